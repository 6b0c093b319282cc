"""The model zoo, on real Keras: input and output dtypes, shapes, FLOPs, and a short real fit."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tpukit.data import builtin as data
from tpukit.training import determinism
from tpukit.models import zoo as models

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = [(8, 8, 1), (28, 28, 1), (32, 32, 3)]


@pytest.fixture
def dtype_policy():
    """Set the global Keras dtype policy for one test and put the previous one back."""
    import keras

    previous = keras.config.dtype_policy()
    try:
        yield keras.config.set_dtype_policy
    finally:
        keras.config.set_dtype_policy(previous)


def test_import_does_not_load_keras():
    code = (
        "import sys, tpukit.data.builtin, tpukit.models.zoo; "
        "assert not {'tensorflow', 'keras'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})


def test_describe_is_one_line_per_model():
    for name in models.MODELS:
        text = models.describe(name)
        assert text and "\n" not in text


def test_unknown_model_lists_the_choices():
    with pytest.raises(ValueError, match=r"mlp, cnn, resnet\. Received: name='vgg'\."):
        models.build("vgg", input_shape=(8, 8, 1), num_classes=10)
    with pytest.raises(ValueError, match="Received: name='vgg'"):
        models.describe("vgg")


@pytest.mark.parametrize(
    "kwargs, received",
    [
        ({"input_shape": (8, 8)}, "input_shape=(8, 8)"),
        ({"input_shape": (8, 0, 1)}, "input_shape=(8, 0, 1)"),
        ({"num_classes": 1}, "num_classes=1"),
    ],
)
def test_build_rejects_bad_arguments(kwargs, received):
    args = {"input_shape": (8, 8, 1), "num_classes": 10, **kwargs}
    with pytest.raises(ValueError, match=re.escape(f"Received: {received}.")):
        models.build("mlp", **args)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", models.MODELS)
def test_every_model_fits_every_dataset_shape(name, shape):
    import keras

    model = models.build(name, input_shape=shape, num_classes=7)
    assert model.input.dtype == "uint8"
    assert tuple(model.output.shape) == (None, 7)
    assert not any(isinstance(layer, keras.layers.Dropout) for layer in model.layers)
    assert isinstance(model.layers[1], keras.layers.Rescaling)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_outputs_are_float32_probabilities_under_every_policy(policy, dtype_policy):
    dtype_policy(policy)
    images = np.random.default_rng(0).integers(0, 256, (4, 8, 8, 1), dtype=np.uint8)
    for name in models.MODELS:
        model = models.build(name, input_shape=(8, 8, 1), num_classes=10)
        assert model.layers[2].compute_dtype == policy.replace("mixed_", "")
        probabilities = model(images, training=False)
        assert probabilities.dtype == "float32"
        np.testing.assert_allclose(np.sum(probabilities, axis=1), 1.0, rtol=1e-3)


def test_flops_are_counted_from_dense_and_conv_layers():
    import keras

    inputs = keras.Input((4, 4, 1), dtype="uint8")
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(2, 3, padding="same")(x)  # 2*(3*3*1*2) per position, 4*4 positions = 576
    x = keras.layers.Conv2D(3, 3, strides=2, padding="same")(x)  # 2*(3*3*2*3) * 2*2 positions = 432
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(5)(x)  # 2*12*5 = 120
    inner = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4)])  # nested: 2*5*4 = 40
    model = keras.Model(inputs, inner(x))
    assert models.flops_per_example(model) == 3 * (576 + 432 + 120 + 40)


def test_flops_grow_with_the_model():
    flops = [
        models.flops_per_example(models.build(name, input_shape=(28, 28, 1), num_classes=10)) for name in models.MODELS
    ]
    assert 0 < flops[0] < flops[2] < flops[1]  # mlp < resnet < cnn at 28x28


def test_cnn_learns_shapes_in_two_epochs():
    import keras

    shapes = data.load("shapes", size=512, seed=1)
    determinism.set_seed(0)
    model = models.build("cnn", input_shape=shapes.info.image_shape, num_classes=shapes.info.num_classes)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=["accuracy"],
        jit_compile=False,
    )
    history = model.fit(
        data.train_dataset(shapes, global_batch=16, seed=0, epochs=2),
        epochs=2,
        steps_per_epoch=data.steps_per_epoch(shapes, 16),
        shuffle=False,
        verbose=0,
    )
    # Chance is 0.25 over four classes. Training accuracy is the stable signal after 64 steps:
    # BatchNorm's moving averages still lag the weights, so evaluation swings more.
    assert history.history["accuracy"][-1] > 0.5
