"""tpukit.observe.profiling.names: the names profilers give ops, as real captures hold them, read as '<layer> <op>'.

The inputs are copied from captures of the zoo CNN (`python -m tpukit train --model cnn --profile ...`): TensorFlow's
framework op stats (graph paths and op types) and the op names in the HLO modules that XLA writes into a JAX
capture. tests/cli/test_main.py checks the same on fresh captures.
"""

import pytest

from tpukit.observe.profiling import names

# TensorFlow names the layers of the traced step with a "_<n>" suffix: layer conv2d is "conv2d_1", conv2d_1 is
# "conv2d_1_2"; the loss sits in a scope of its own that has none.
TF_PATHS = [
    "StatefulPartitionedCall/gradient_tape/cnn_1/conv2d_1_2/convolution/Conv2DBackpropFilter",
    "StatefulPartitionedCall/cnn_1/conv2d_1/convolution",
    "StatefulPartitionedCall/gradient_tape/cnn_1/batch_normalization_1/Cast/Cast",
    "StatefulPartitionedCall/cnn_1/max_pooling2d_1_2/MaxPool",
    "StatefulPartitionedCall/cnn_1/Cast",
    "StatefulPartitionedCall/compile_loss/sparse_categorical_crossentropy/Sum",
]


@pytest.mark.parametrize(
    "path, op_type, expected",
    [
        (TF_PATHS[0], "_MklNativeConv2DBackpropFilter", "conv2d_1 Conv2DBackpropFilter"),
        (TF_PATHS[1], "_MklNativeConv2D", "conv2d Conv2D"),
        (TF_PATHS[2], "Cast", "batch_normalization Cast (grad)"),
        (TF_PATHS[3], "MaxPool", "max_pooling2d_1 MaxPool"),
        (TF_PATHS[4], "Cast", "cnn Cast"),
        (TF_PATHS[5], "Sum", "sparse_categorical_crossentropy Sum"),
        ("Iterator::Root::Prefetch", "Iterator", "Iterator::Root::Prefetch"),
        ("StatefulPartitionedCall/cnn_1/re_lu_1/Relu:Relu", "", "re_lu Relu"),
    ],
)
def test_tf_graph_paths_read_as_layer_and_op_type(path, op_type, expected):
    assert names.tf_name(path, op_type, names.tf_layer_suffixes(TF_PATHS)) == expected


def test_tf_suffixes_are_kept_where_a_layer_scope_has_none():
    """Under a model whose layers' scopes do not all carry TensorFlow's suffix, the suffix may be the layer's own."""
    paths = ["StatefulPartitionedCall/model_1/dense_1/MatMul", "StatefulPartitionedCall/model_1/head/MatMul"]
    assert names.tf_layer_suffixes(paths) == frozenset()
    assert names.tf_name(paths[0], "MatMul", names.tf_layer_suffixes(paths)) == "dense_1 MatMul"
    assert names.tf_layer_suffixes(TF_PATHS) == {"cnn_1"}


@pytest.mark.parametrize(
    "op_name, expected",
    [
        ("jit(train_step)/jvp(conv2d)/conv_general_dilated", "conv2d conv"),
        ("jit(train_step)/transpose(jvp(conv2d_1))/conv_general_dilated", "conv2d_1 conv (grad)"),
        ("jit(train_step)/jvp(re_lu_1)/jit(relu)/max", "re_lu_1 max"),
        ("jit(train_step)/transpose(jvp(batch_normalization))/jit(_var)/mul", "batch_normalization mul (grad)"),
        ("jit(train_step)/jvp(dense)/dot_general", "dense dot"),
        ("jit(train_step)/adam/add", "adam add"),
        ("jit(train_step)/add", "add"),
        ("", ""),
    ],
)
def test_jax_op_names_read_as_layer_and_primitive(op_name, expected):
    assert names.jax_name(op_name) == expected


def test_an_xla_op_is_named_by_its_own_metadata_then_its_fused_ops_then_its_neighbours():
    conv = "jit(train_step)/transpose(jvp(conv2d_1))/conv_general_dilated"
    assert names.xla_name("fusion", "", conv) == "conv2d_1 conv (grad)"
    assert names.xla_name("fusion", "", "", fused=(("convolution", "", conv),)) == "conv2d_1 conv (grad)"
    # XLA:CPU's fusions that lost their metadata: what they do, and the layer they read or feed
    relu = "jit(train_step)/jvp(re_lu_1)/jit(relu)/max"
    assert names.xla_name("fusion", "", "", (("reduce-window", "", ""),), inputs=[relu]) == (
        "reduce-window after re_lu_1"
    )
    assert names.xla_name("fusion", "", "", (("convolution", "", ""),), outputs=["jit(train_step)/adam/add"] * 2) == (
        "convolution into adam"
    )
    assert names.xla_name("fusion", "", "", (("iota", "", ""),)) == "iota"
    # a nameless convolution whose result has the shape of a layer's kernel is that kernel's gradient
    assert (
        names.xla_name(
            "fusion", "", "", (("convolution", "", ""),), outputs=["jit(train_step)/adam/add"], weight_of="conv2d_2"
        )
        == "conv2d_2 conv (weight grad)"
    )
    assert names.forward_layer("jit(train_step)/jvp(conv2d_2)/conv_general_dilated") == "conv2d_2"
    assert names.forward_layer(conv) == "" and names.forward_layer(TF_PATHS[1]) == ""
    assert names.xla_name("fusion", "", "", ()) == ""  # nothing to say: the caller keeps XLA's own name
    # TensorFlow's jit_compile: the module's op names are graph paths with an op type
    assert names.xla_name("convolution", "Conv2DBackpropInput", TF_PATHS[0], suffixed={"cnn_1"}) == (
        "conv2d_1 Conv2DBackpropInput"
    )


def test_names_that_two_ops_share_are_told_apart_by_the_end_of_their_paths():
    told = names.distinct(
        ["convolution into adam", "conv2d conv", "convolution into adam", "bn Mul (grad)", "bn Mul (grad)"],
        [
            "jit_train_step/ynn_fusion.3",
            "jit_train_step/ynn_fusion.37",
            "jit_train_step/ynn_fusion.1",
            "gradient_tape/cnn_1/bn_1/moments/truediv",
            "gradient_tape/cnn_1/bn_1/batchnorm/truediv",
        ],
    )
    assert told == [
        "convolution into adam (ynn_fusion.3)",
        "conv2d conv",
        "convolution into adam (ynn_fusion.1)",
        "bn Mul (grad) (moments/truediv)",
        "bn Mul (grad) (batchnorm/truediv)",
    ]
    assert len(set(told)) == len(told)
    assert names.distinct(["a", "a"], ["x/y", "x/y"]) == ["a (y #1)", "a (y #2)"]


def test_collectives_are_named_as_such_and_combined_ops_by_their_layers():
    """Under data parallelism (8 replicas) XLA's all-reduces keep the name of the sum they distribute, and one
    all-reduce can carry the gradients of several layers (their op names joined by ':' in parentheses)."""
    combined = (
        "jit(train_step)/(transpose(jvp(conv2d))/conv_general_dilated:transpose(jvp(conv2d_1))/"
        "conv_general_dilated:transpose(jvp(logits))/dot_general:transpose(jvp(logits))/reduce_sum)"
    )
    assert names.xla_name("all-reduce", "", combined) == "all-reduce of conv2d…logits (grad)"
    assert names.xla_name("all-reduce", "", "jit(train_step)/transpose(jvp(batch_normalization_1))/reduce_sum") == (
        "batch_normalization_1 all-reduce (grad)"
    )
    assert (
        names.xla_name("all-reduce", "", "jit(train_step)/jvp(batch_normalization)/(jit(_var)/reduce_sum:reduce_sum)")
        == "batch_normalization all-reduce"
    )
    assert names.jax_name("jit(f)/(jvp(dense)/dot_general:jvp(dense)/add)") == "dense dot"
    assert names.xla_name("fusion", "", "jit(train_step)/jvp(dense)/dot_general") == "dense dot"  # not a collective
