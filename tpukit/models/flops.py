"""FLOPs per training example for any Keras model: from its layers where they are all known, else the compiler.

MFU divides achieved FLOP/s by the hardware's peak, so a wrong count is worse
than none. The count comes from, in order:

1. the layers, when the model is Sequential or functional and made only of
   Dense and convolution layers plus layers with no matmul (pooling,
   normalization, activations, reshapes): exact, instant, and the same on
   both backends (the compiler took 50-120 ms, a traced forward pass, before
   the first step);
2. the compiler, for any other model: XLA's cost analysis of the forward pass
   on JAX; on TensorFlow, the float-operation count of the traced graph (the TF
   profiler's per-op FLOP rules, exact for MatMul and Conv2D);
3. layer counting for a functional model the compiler could not take;
4. nothing: `None`, with the reason.

Training FLOPs are 3x the forward pass (forward, and about twice that
backward), the usual convention for model FLOPs utilization. With LoRA adapters
the frozen weights get no gradient of their own: a step is the forward pass, the
activations' gradients (about one more), and the weight gradients of what trains
only, so 2x plus the share of the weights that train (about 4N FLOPs a token for
N parameters, not 6N; counted as 3x, LoRA's MFU would read 1.5x too high).
"""

from __future__ import annotations

import contextlib
import io
from typing import Optional, Tuple

LAYERS = "counted from the Dense and convolution layers"
# Layers whose forward pass has no matmul: the compiler's count adds their elementwise work, under 1% of the zoo's.
_NO_MATMUL = frozenset(
    {
        "InputLayer",
        "Flatten",
        "Reshape",
        "Permute",
        "Dropout",
        "SpatialDropout1D",
        "SpatialDropout2D",
        "GaussianNoise",
        "Activation",
        "ReLU",
        "LeakyReLU",
        "ELU",
        "Softmax",
        "Rescaling",
        "Normalization",
        "BatchNormalization",
        "LayerNormalization",
        "GroupNormalization",
        "Add",
        "Subtract",
        "Multiply",
        "Average",
        "Maximum",
        "Minimum",
        "Concatenate",
        "ZeroPadding1D",
        "ZeroPadding2D",
        "Cropping1D",
        "Cropping2D",
        "MaxPooling1D",
        "MaxPooling2D",
        "MaxPooling3D",
        "AveragePooling1D",
        "AveragePooling2D",
        "AveragePooling3D",
        "GlobalAveragePooling1D",
        "GlobalAveragePooling2D",
        "GlobalAveragePooling3D",
        "GlobalMaxPooling1D",
        "GlobalMaxPooling2D",
        "GlobalMaxPooling3D",
        "Identity",
    }
)
_COUNTED = frozenset({"Dense", "Conv1D", "Conv2D", "Conv3D"})
_GRAPHS = ("Sequential", "Functional")  # Keras' models whose layers are their whole computation


def training_flops_per_example(model, sample) -> Tuple[Optional[int], str]:
    """(FLOPs per training example or None, how they were counted or why not).

    Args:
        model: a built Keras model.
        sample: a few example inputs (NumPy; a dict for named inputs), batch first.
    """
    times, basis = training_multiple(model)
    count, how = _training_flops(model, sample, times)
    return count, (how + basis if count else how)


def training_multiple(model) -> Tuple[float, str]:
    """(forward passes a training step costs, how that was counted, to add to the source): 3, or with LoRA
    adapters 2 plus the share of the weights that train."""
    from tpukit.models import lora

    if not lora.is_adapted(model):
        return 3.0, ""
    trainable = sum(_size(w.shape) for w in model.trainable_weights)
    total = trainable + sum(_size(w.shape) for w in model.non_trainable_weights if _floating(w))
    share = trainable / total if total else 1.0
    return 2.0 + share, (
        f"; LoRA basis: {2 + share:.3g}x the forward pass (the frozen weights get no gradient; "
        f"{share:.2%} of the weights train)"
    )


def _floating(variable) -> bool:
    return "float" in str(variable.dtype)


def _training_flops(model, sample, times: float) -> Tuple[Optional[int], str]:
    import keras

    forward = layer_count(model) if _known_layers_only(model) else None
    if forward:
        return int(round(times * forward)), LAYERS
    batch = _batch_size(sample)
    errors = []
    counter = _jax_forward if keras.backend.backend() == "jax" else _tf_forward
    if batch:
        try:
            forward = counter(model, sample)
            if forward and forward > 0:
                return int(round(times * forward / batch)), counter.__doc__.strip().splitlines()[0].rstrip(".")
            errors.append("the compiler counted no floating-point operations")
        except Exception as e:  # a model the tracer cannot take: fall back to the layers
            errors.append(f"the compiler could not count it ({type(e).__name__})")
    layers = layer_count(model)
    if layers:
        return int(round(times * layers)), LAYERS
    reason = "; ".join(errors + ["its layers cannot be counted (a subclassed model has no layer shapes)"])
    return None, f"FLOPs unknown: {reason}, so MFU is not reported"


def _jax_forward(model, sample) -> float:
    """XLA cost analysis of the forward pass (JAX)."""
    import jax
    import numpy as np

    def abstract(v):
        return jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)

    trainable = [abstract(v) for v in model.trainable_variables]
    non_trainable = [abstract(v) for v in model.non_trainable_variables]
    inputs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype), sample)

    # stateless_call passes keyword arguments straight to call(), which may not take `training`.
    kwargs = {"training": False} if getattr(model, "_call_has_training_arg", True) else {}

    def forward(trainable, non_trainable, x):
        return model.stateless_call(trainable, non_trainable, x, **kwargs)[0]

    cost = jax.jit(forward).lower(trainable, non_trainable, inputs).cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX: one dict per computation
        cost = cost[0] if cost else {}
    return float((cost or {}).get("flops", 0.0))


def _tf_forward(model, sample) -> float:
    """TensorFlow graph float-operation count of the forward pass."""
    import tensorflow as tf
    from tensorflow.python.profiler import option_builder

    specs = tf.nest.map_structure(lambda a: tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)), sample)
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(specs)
    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    with _quiet_tf():
        info = tf.compat.v1.profiler.profile(graph=concrete.graph, options=options)
    return float(info.total_float_ops)


@contextlib.contextmanager
def _quiet_tf():
    """The v1 profiler logs a deprecation notice; it is not the user's concern."""
    import tensorflow as tf

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def _known_layers_only(model) -> bool:
    """Whether `layer_count` is exact for `model`: a Sequential or functional model (nested ones too) of Keras'
    own Dense and convolution layers and layers with no matmul. A subclass of any of them may compute anything."""
    if not (type(model).__name__ in _GRAPHS and _is_keras(model)) or not model.layers:
        return False
    for layer in model.layers:
        if type(layer).__name__ in _GRAPHS:
            if not _known_layers_only(layer):
                return False
        elif not (type(layer).__name__ in _COUNTED | _NO_MATMUL and _is_keras(layer)):
            return False
    return True


def _is_keras(obj) -> bool:
    return type(obj).__module__.split(".", 1)[0] == "keras"


def layer_count(model) -> Optional[int]:
    """Forward FLOPs per example from Dense and convolution layers, or None when they cannot be counted.

    Counts the multiply-adds of Dense (2 * inputs * units per position) and
    convolutions (2 * kernel size * input channels * filters per output
    position), nested models included; elementwise layers are left out.
    """
    import keras

    convs = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
    total = 0
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            inner = layer_count(layer)
            if inner is None:
                return None
            total += inner
        elif isinstance(layer, (keras.layers.Dense,) + convs):
            try:
                if isinstance(layer, keras.layers.Dense):
                    positions = layer.input.shape[1:-1]
                else:  # a conv's output positions, its channels first or last
                    last = layer.data_format != "channels_first"
                    positions = layer.output.shape[1:-1] if last else layer.output.shape[2:]
            except (AttributeError, ValueError):
                return None
            total += 2 * _size(layer.kernel.shape) * _size(positions)
    return total or None


def _size(shape) -> int:
    out = 1
    for dim in shape:
        out *= int(dim)
    return out


def _batch_size(sample) -> int:
    import numpy as np

    first = next(iter(sample.values())) if isinstance(sample, dict) else sample
    shape = np.shape(first)
    return int(shape[0]) if shape else 0
