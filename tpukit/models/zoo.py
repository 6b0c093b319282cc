"""A small model zoo for teaching: every model takes uint8 images and returns float32 probabilities.

Each model normalizes inside itself (a `Rescaling` layer casts uint8 to the
compute dtype), so the input pipeline ships 4x fewer bytes, and each ends in a
float32 softmax, so the outputs and the loss stay float32 under mixed precision.
None uses Dropout: its RNG state would break bitwise stop-and-resume checks.

Importing this module is cheap: Keras loads when a model is built.
"""

from __future__ import annotations

from typing import Sequence

from tpukit import registry

MODELS = ("mlp", "cnn", "resnet")

_DESCRIPTIONS = {
    "mlp": "MLP: Flatten, Dense 256, Dense 128 (ReLU), softmax; a baseline that ignores the image's layout.",
    "cnn": (
        "CNN: 2x (Conv 3x3, BatchNorm, ReLU) at 64 then 128 filters, MaxPool after each, "
        "global average pool, Dense 256."
    ),
    "resnet": (
        "ResNet: stem conv and max pool, three stages of basic residual blocks (32, 64, 128 filters), "
        "global average pool."
    ),
}


def describe(name: str) -> str:
    """One line on what model `name` is."""
    _check_name(name)
    return _DESCRIPTIONS[name]


def build(name: str, *, input_shape: Sequence[int], num_classes: int):
    """Build model `name` for uint8 images of `input_shape` (H, W, C) and `num_classes` classes.

    The current global dtype policy applies to every layer but the final
    softmax, which is float32. Seed first (keras.utils.set_random_seed) for
    repeatable weights; nothing here seeds.

    Raises:
        ValueError: unknown name, a shape that is not (H, W, C), or fewer than 2 classes.

    >>> build("mlp", input_shape=(8, 8, 1), num_classes=10).output.dtype
    'float32'
    """
    import keras

    _check_name(name)
    input_shape = _check_shape(input_shape)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"Expected num_classes to be an integer >= 2. Received: num_classes={num_classes!r}.")
    inputs = keras.Input(input_shape, dtype="uint8", name="images")
    x = keras.layers.Rescaling(1.0 / 255, name="rescale")(inputs)
    x = _BODIES[name](x)
    x = keras.layers.Dense(num_classes, name="logits")(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs, name=name)


def factory(name: str):
    """Zoo model `name` as a model factory: it takes the data's `DataSpec` (images and classes)."""
    _check_name(name)

    def build_zoo_model(spec):
        shape = spec.input_shape
        if not isinstance(shape, tuple) or len(shape) != 3 or spec.num_classes is None:
            raise ValueError(
                f"the zoo model {name!r} takes images (height, width, channels) with integer class labels. "
                f"Received: inputs of shape {shape} with {spec.target_dtype or 'no'} labels; "
                "pass model= a factory of your own for this data."
            )
        return build(name, input_shape=shape, num_classes=max(spec.num_classes, 2))

    build_zoo_model.__doc__ = describe(name)
    return build_zoo_model


def flops_per_example(model) -> int:
    """Training FLOPs per example from the layers: 3x the forward pass (see `tpukit.models.flops.layer_count`).

    For any model, `tpukit.models.flops.training_flops_per_example` asks the compiler first.
    """
    from tpukit.models import flops

    return 3 * (flops.layer_count(model) or 0)


# ---- bodies ----------------------------------------------------------------


def _mlp(x):
    import keras

    x = keras.layers.Flatten()(x)
    for units in (256, 128):
        x = keras.layers.Dense(units, activation="relu")(x)
    return x


def _cnn(x):
    """The classic Colab TPU CIFAR CNN, with BatchNorm where it had Dropout.

    Global average pooling instead of Flatten keeps the head the same size for
    8x8 digits and 32x32 images, and learns small data sets faster.
    """
    import keras

    for filters in (64, 128):
        for _ in range(2):
            x = _conv_bn(x, filters, relu=True)
        if _can_halve(x):
            x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.layers.Dense(256, activation="relu")(x)


def _resnet(x):
    """Stem conv and max pool, then one basic block per stage; each later stage halves the size, doubles the filters.

    Pooling in the stem (as ImageNet ResNets do) cuts the work about 3.5x, which keeps
    an epoch of mnist5k to seconds on two CPU cores.
    """
    import keras

    x = _conv_bn(x, 32, relu=True)
    if _can_halve(x):
        x = keras.layers.MaxPooling2D()(x)
    for stage, filters in enumerate((32, 64, 128)):
        x = _basic_block(x, filters, stride=2 if stage and _can_halve(x) else 1)
    return keras.layers.GlobalAveragePooling2D()(x)


_BODIES = {"mlp": _mlp, "cnn": _cnn, "resnet": _resnet}


def _conv_bn(x, filters, *, relu, kernel_size=3, strides=1):
    """Conv (no bias: BatchNorm's offset replaces it), BatchNorm, optional ReLU.

    BatchNorm momentum 0.9 rather than 0.99: its moving statistics then catch
    up within tens of steps, so evaluation after a short teaching run is sane.
    """
    import keras

    x = keras.layers.Conv2D(filters, kernel_size, strides=strides, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization(momentum=0.9)(x)
    return keras.layers.ReLU()(x) if relu else x


def _basic_block(x, filters, *, stride):
    """Two 3x3 convs plus a shortcut (a strided 1x1 conv when the shape changes), ReLU after the sum."""
    import keras

    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = _conv_bn(x, filters, relu=False, kernel_size=1, strides=stride)
    x = _conv_bn(x, filters, relu=True, strides=stride)
    x = _conv_bn(x, filters, relu=False)
    return keras.layers.ReLU()(keras.layers.Add()([x, shortcut]))


def _can_halve(x) -> bool:
    """Halve only while the result keeps at least 2x2 positions (8x8 digits go 8, 4, 2)."""
    return min(x.shape[1], x.shape[2]) >= 4


# ---- checks ------------------------------------------------------------------


def _check_name(name) -> None:
    if name not in MODELS:
        raise ValueError(f"Unknown model. Expected one of {', '.join(MODELS)}. Received: name={name!r}.")


def _check_shape(input_shape):
    shape = tuple(input_shape) if isinstance(input_shape, (tuple, list)) else None
    if shape is None or len(shape) != 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape):
        raise ValueError(
            f"Expected input_shape to be (height, width, channels) of positive integers. "
            f"Received: input_shape={input_shape!r}."
        )
    return shape


def entries():
    """The zoo for `tpukit.registry`: (name, factory, description) of each model."""
    return [(name, factory(name), describe(name)) for name in MODELS]


registry.add_builtins("model", entries)
