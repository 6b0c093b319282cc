"""The user's own model and data through train() and resume(): real Keras fits on the CPU, no mocks.

Each model here is one tpukit has never seen: written in the test the way a
user writes one in a notebook cell.
"""

import io
import threading
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest

import tpukit
from tpukit import registry
from tpukit.runs import directory, records
from tpukit.data import sources
from tpukit.config import ConfigError, RunConfig
from tpukit.training.api import resume, train
from conftest import REPLICAS
from run_support import CallAt
from usermodels import TinyNet, images, tokens, regressor, text_classifier, two_inputs, user_cnn

BASE = dict(epochs=2, batch_size=32)


def _config(tmp_path, **changes):
    return RunConfig(**{**BASE, "logdir": str(tmp_path), **changes})


# ---- kinds of model and data -------------------------------------------------------------


def test_user_functional_cnn_on_numpy_images_with_validation_split_and_test(tmp_path):
    x, y = images()
    x_test, y_test = images(256, seed=1)
    result = train(_config(tmp_path), model=user_cnn, data=(x, y), test_data=(x_test, y_test))
    assert result.status == "completed" and result.config["model"] == "usermodels:user_cnn"
    assert result.config["dataset"] == "<arrays>"
    # as many as fit(validation_split=0.1) holds out: 1024 - floor(1024 * 0.9)
    assert result.data["spec"]["num_train"] == 921 and result.data["spec"]["num_validation"] == 103
    assert result.data["validation_from"] == "split" and result.data["fingerprint"]
    assert set(result.validation_metrics) == {"loss", "accuracy"}
    assert set(result.test_metrics) == {"loss", "accuracy"}
    assert "validation:" in result.summary() and "test:" in result.summary()
    assert records.load(result.run_dir).test_metrics == result.test_metrics


def test_subclassed_model_trains_and_mfu_comes_from_the_compiler(tmp_path):
    x, y = images(512)
    # One step per call: at auto's 7 per call this tiny model outran the CPU peak measured under load (MFU > 1 is
    # not reported), and this test is about the count.
    result = train(_config(tmp_path, epochs=1, steps_per_execution=1), model=lambda: TinyNet(4), data=(x, y))
    assert result.status == "completed" and result.fingerprint
    assert result.flops_source.startswith("TensorFlow graph")
    matmuls = 3 * 2 * (32 * 32 * 3 * 32 + 32 * 4)
    elementwise = 3 * (2 * 32 * 32 * 3 + 32 + 32 + 4)  # the graph also counts rescaling, biases and ReLU
    assert result.flops_per_example == pytest.approx(matmuls + elementwise, rel=0.002)
    assert result.mfu is not None and result.mfu > 0


def test_two_input_model_fed_a_dict(tmp_path):
    x, y = images(512)
    extra = np.random.default_rng(0).normal(size=(512, 4)).astype("float32")
    result = train(_config(tmp_path, epochs=1), model=two_inputs, data=({"image": x, "extra": extra}, y))
    assert result.status == "completed"
    assert result.data["spec"]["input_shape"] == {"image": [32, 32, 3], "extra": [4]}


def test_regression_on_diabetes_with_mse_and_mae(tmp_path):
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    config = _config(tmp_path, loss="mse", metrics=("mae",), learning_rate=0.05, epochs=3)
    result = train(config, model=regressor, data=(x.astype("float32"), y.astype("float32")))
    assert result.status == "completed"
    assert set(result.validation_metrics) == {"loss", "mae"}
    assert result.history["loss"][-1] < result.history["loss"][0]


def test_text_classifier_with_an_embedding_learns(tmp_path):
    x, y = tokens()
    result = train(_config(tmp_path, epochs=3, learning_rate=0.01), model=text_classifier, data=(x, y))
    assert result.status == "completed" and result.validation_metrics["accuracy"] > 0.8


def test_unbatched_tf_dataset_and_a_loader_callable_and_splits(tmp_path):
    import tensorflow as tf

    x, y = images(512)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    a = train(_config(tmp_path, epochs=1, deterministic=True), model=user_cnn, data=ds)
    b = train(_config(tmp_path, epochs=1, deterministic=True), model=user_cnn, data=lambda: (x, y))
    assert a.data["train"] == "arrays" and a.data["fingerprint"] == b.data["fingerprint"]
    assert a.fingerprint == b.fingerprint  # the same examples in the same order, whichever way they came
    c = train(
        _config(tmp_path, epochs=1),
        model=user_cnn,
        data=sources.Splits(train=(x[:400], y[:400]), validation=(x[400:], y[400:])),
    )
    assert c.data["validation_from"] == "given" and c.data["spec"]["num_validation"] == 112


def test_already_batched_dataset_warns_and_trains(tmp_path):
    import tensorflow as tf

    x, y = images(256)
    batched = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).batch(32)
    with pytest.warns(sources.UnorderedDataWarning, match="cannot control its order"):
        result = train(
            _config(tmp_path, epochs=2),
            model=user_cnn,
            data=batched,
            validation_data=tf.data.Dataset.from_tensor_slices((x[:64], y[:64])),
        )
    assert result.status == "completed" and result.data["ordered"] is False and result.epochs_done == 2


def test_a_built_model_is_trained_in_place_and_its_compile_is_kept(tmp_path):
    x, y = images(512)
    model = user_cnn(sources.DataSpec((32, 32, 3), "uint8", (), "int32", 4, None))
    model.compile(
        optimizer=keras.optimizers.SGD(0.05),
        loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"],
    )
    with pytest.warns(tpukit.models.modeling.TrainedInPlace, match="trains your Functional object in place"):
        result = train(_config(tmp_path, epochs=1), model=model, data=(x, y))
    assert result.model is model
    assert "sparse_categorical_accuracy" in result.final_metrics  # the user's metrics, not RunConfig.metrics
    assert any("came compiled" in note and "SGD" in note for note in result.notes)
    assert result.config["model"] == "<Functional>"


def test_a_built_model_is_cloned_under_mirrored_strategy_and_its_compile_is_kept(tmp_path):
    x, y = images(512)
    model = user_cnn(sources.DataSpec((32, 32, 3), "uint8", (), "int32", 4, None))
    model.compile(
        optimizer=keras.optimizers.SGD(0.05),
        loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"],
    )
    with pytest.warns(tpukit.models.modeling.ClonedModelWarning, match="trains a clone"):
        result = train(_config(tmp_path, epochs=1, replicas=2, batch_size=16), model=model, data=(x, y))
    assert result.model is not model
    assert "sparse_categorical_accuracy" in result.final_metrics
    assert any("came compiled" in note and "SGD" in note for note in result.notes)


def test_user_model_on_8_simulated_replicas(tmp_path):
    x, y = tokens(1024)
    config = _config(tmp_path, epochs=1, replicas=REPLICAS, batch_size=8, deterministic=True)
    a, b = train(config, model=text_classifier, data=(x, y)), train(config, model=text_classifier, data=(x, y))
    assert a.config["replicas"] == REPLICAS and a.status == "completed"
    assert a.fingerprint == b.fingerprint


def test_registered_model_and_dataset_by_name(tmp_path):
    x, y = tokens(512)
    tpukit.register_model("my-text", text_classifier, description="a tiny text classifier")
    tpukit.register_dataset("my-tokens", lambda: (x, y))
    try:
        assert "my-text" in registry.names("model") and "my-tokens" in registry.names("dataset")
        assert registry.describe("model", "my-text") == "a tiny text classifier"
        result = train(_config(tmp_path, epochs=1, model="my-text", dataset="my-tokens"))
        assert result.status == "completed" and Path(result.run_dir).name.endswith("my-text-my-tokens")
        with pytest.raises(directory.RunDirError, match="is a completed run"):
            resume(result.run_dir)  # a finished run is never trained again
    finally:
        registry.unregister("model", "my-text")
        registry.unregister("dataset", "my-tokens")
    with pytest.raises(registry.RegistryError, match="built-in model name"):
        tpukit.register_model("cnn", text_classifier)


# ---- determinism and resume -----------------------------------------------------------------


def test_deterministic_user_run_stopped_and_resumed_matches_uninterrupted(tmp_path):
    x, y = tokens(1024)
    config = _config(tmp_path, epochs=3, deterministic=True, steps_per_execution=1)  # a stop at a step
    reference = train(config, model=text_classifier, data=(x, y))
    flag = threading.Event()
    stopped = train(config, model=text_classifier, data=(x, y), callbacks=[CallAt(40, flag.set)], stop=flag)
    assert stopped.status == "stopped" and stopped.epochs_done == 1  # 28 steps an epoch: the partial one is not done
    with pytest.raises(registry.RegistryError, match="pass the same object again as dataset="):
        resume(stopped.run_dir)  # the model is importable (usermodels:text_classifier); the arrays are not
    with pytest.raises(sources.DataError, match="the data differs"):
        resume(stopped.run_dir, model=text_classifier, data=(x[::-1], y[::-1]))
    resumed = resume(stopped.run_dir, model=text_classifier, data=(x, y))
    assert resumed.status == "completed" and resumed.fingerprint == reference.fingerprint
    assert resumed.history["loss"] == reference.history["loss"]


def test_early_stopping_restores_the_best_weights(tmp_path):
    x, y = tokens(1024)
    config = _config(tmp_path, epochs=30, early_stopping=1, learning_rate=3.0, optimizer="sgd")  # plateaus by epoch 4
    stream = io.StringIO()
    result = train(config, model=text_classifier, data=(x, y), progress=stream, verbose=2)
    assert "restored the weights of epoch" in result.message and result.epochs_done < 30
    said = stream.getvalue().splitlines()
    assert said[-1] == result.message[0].upper() + result.message[1:] + "."  # under the epochs, as Keras says it
    assert said[-2].startswith(f"epoch {result.epochs_done}/30")


# ---- bad input: one line, before any run directory ---------------------------------------------


def _raises_one_line(tmp_path, error, match, **kwargs):
    with pytest.raises(error, match=match) as info:
        train(_config(tmp_path, **kwargs.pop("config", {})), **kwargs)
    assert "\n" not in str(info.value)
    assert not list(Path(tmp_path).glob("*")), "a bad input left a run directory"


def _raising_factory():
    raise RuntimeError("no GPU in my notebook")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(model=_raising_factory), tpukit.ModelError, "raised RuntimeError: no GPU in my notebook"),
        (dict(model=lambda: "not a model"), tpukit.ModelError, "returned str; expected a keras.Model"),
        (dict(data=(np.zeros((10, 4)), np.zeros(9))), tpukit.DataError, "x has 10 examples and y has 9"),
        (
            dict(
                data=(np.zeros((100, 8, 8, 1), "uint8"), np.arange(100) % 12),
                model=lambda: keras.Sequential(
                    [keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10)]
                ),
            ),
            tpukit.DataError,
            "labels run from 0 to 11, but the model's output has 10 unit",
        ),
        (
            dict(
                data=(np.zeros((100, 4)), np.zeros(100)),
                model=lambda: keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)]),
            ),
            tpukit.DataError,
            "the model cannot take this data",
        ),
        (
            dict(data=(np.zeros((100, 4)), np.zeros(100)), config=dict(validation_split=None, batch_size=128)),
            ConfigError,
            "has 100 training examples, fewer than one global batch of 128",
        ),
        (dict(config=dict(model="no_such_model")), registry.RegistryError, "unknown model 'no_such_model'"),
        (dict(config=dict(dataset="nowhere.module:load")), registry.RegistryError, "importing 'nowhere.module' failed"),
        (dict(data={"x": np.zeros(3)}), tpukit.DataError, "a dict must be the inputs of"),
    ],
)
def test_bad_input_fails_in_one_line_without_a_run_directory(tmp_path, kwargs, error, match):
    _raises_one_line(tmp_path, error, match, **kwargs)


def test_dataset_of_wrong_structure_and_bad_validation_split(tmp_path):
    import tensorflow as tf

    _raises_one_line(
        tmp_path,
        tpukit.DataError,
        "expected a dataset of unbatched \\(x, y\\) elements",
        data=tf.data.Dataset.from_tensor_slices(np.zeros((64, 3))),
    )
    with pytest.raises(tpukit.DataError, match="validation_split: expected a fraction"):
        sources.prepare((np.zeros((64, 3)), np.zeros(64)), name="x", validation_split=1.5)
    with pytest.raises(ConfigError, match="validation_split=-0.1"):
        RunConfig(validation_split=-0.1)


def test_float_labels_with_a_classification_loss_point_to_regression(tmp_path):
    _raises_one_line(
        tmp_path,
        tpukit.DataError,
        "for regression use RunConfig\\(loss='mse'",
        model=regressor,
        data=(np.zeros((200, 3), "float32"), np.linspace(0, 1, 200)),
    )


# ---- FLOPs against a hand count -----------------------------------------------------------------


def _hand_model():
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, use_bias=False)(inputs)  # 6*6 positions * 27 * 4 MACs
    x = keras.layers.Flatten()(x)
    return keras.Model(inputs, keras.layers.Dense(5, use_bias=False)(x))  # 144 * 5 MACs


def test_flops_match_a_hand_count_for_dense_conv_and_embedding():
    from tpukit.models import flops

    forward = 2 * (6 * 6 * 27 * 4 + 144 * 5)
    sample = np.zeros((4, 8, 8, 3), "float32")
    count, how = flops.training_flops_per_example(_hand_model(), sample)
    assert count == 3 * forward and how == flops.LAYERS  # known layers only: counted without a trace
    assert flops.layer_count(_hand_model()) == forward
    assert flops._tf_forward(_hand_model(), sample) == 4 * forward  # the compiler agrees, for the batch of 4
    channels_first = keras.Input((3, 8, 8))
    x = keras.layers.Conv2D(4, 3, use_bias=False, data_format="channels_first")(channels_first)
    x = keras.layers.Dense(5, use_bias=False)(keras.layers.Flatten()(x))
    assert flops.layer_count(keras.Model(channels_first, x)) == forward  # 6*6 positions, not 4*6
    tokens = keras.Input((20,), dtype="int32")
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(200, 16)(tokens))
    embed = keras.Model(tokens, keras.layers.Dense(2, use_bias=False)(x))
    count, _ = flops.training_flops_per_example(embed, np.zeros((4, 20), "int32"))
    # An embedding lookup is a gather (no FLOPs): only the Dense and the average over 20 positions count,
    # far from the 2 * 200 * 16 per token a one-hot matmul would cost.
    assert 3 * 2 * 16 * 2 <= count <= 3 * (2 * 16 * 2 + 2 * 21 * 16)


def test_flops_come_from_the_compiler_when_a_layer_is_not_known():
    from tpukit.models import flops

    class Doubling(keras.layers.Dense):  # a subclass of a known layer may compute anything
        def call(self, x):
            return 2 * super().call(x)

    inputs = keras.Input((6,))
    for layer, source in [
        (keras.layers.Dense(3), flops.LAYERS),
        (Doubling(3), "TensorFlow graph"),
        (keras.layers.SimpleRNN(3), "TensorFlow graph"),
    ]:
        x = keras.layers.Reshape((2, 3))(inputs) if isinstance(layer, keras.layers.SimpleRNN) else inputs
        inner = keras.Sequential([keras.Input(x.shape[1:]), layer])  # nested models are walked too
        _, how = flops.training_flops_per_example(keras.Model(inputs, inner(x)), np.zeros((2, 6), "float32"))
        assert how.startswith(source), (layer, how)


def test_flops_unknown_gives_none_with_a_reason():
    from tpukit.models import flops

    class Opaque(keras.Model):
        def call(self, x):
            return keras.ops.sum(x, axis=-1, keepdims=True)

    count, how = flops.training_flops_per_example(Opaque(), np.zeros((0, 3), "float32"))
    assert count is None and how.startswith("FLOPs unknown") and "MFU is not reported" in how
