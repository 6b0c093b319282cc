"""The dtype policy a model is built under, and the optimizer that goes with it (loss scaling under float16).

Keras keeps one global dtype policy; `policy` is the only place tpukit changes it, and it always puts the previous
one back, so runs in one kernel do not leak into each other. Models keep their outputs in float32 (see zoo.py).
Below models/ and runs/: building, compiling and rebuilding a model all apply a policy. Which policy suits the
hardware is decided above, in `tpukit.training.precision`.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def current_policy() -> str:
    import keras

    return keras.config.dtype_policy().name


@contextlib.contextmanager
def policy(name: str) -> Iterator[str]:
    """Set the global Keras dtype policy inside the block; the previous one comes back after."""
    import keras

    if name not in POLICIES:
        raise ValueError(f"Unknown dtype policy {name!r}. Choices: {', '.join(POLICIES)}.")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(name)
    try:
        yield name
    finally:
        keras.config.set_dtype_policy(previous)


def make_optimizer(name: str, learning_rate: float, precision: str):
    """The named Keras optimizer, wrapped in a LossScaleOptimizer under mixed_float16.

    `fit` would wrap it too; doing it here lets custom loops share the same
    object and makes the loss scaling visible.
    """
    import keras

    classes = {"adam": keras.optimizers.Adam, "adamw": keras.optimizers.AdamW,
               "sgd": keras.optimizers.SGD, "rmsprop": keras.optimizers.RMSprop}
    if name not in classes:
        raise ValueError(f"Unknown optimizer {name!r}. Choices: {', '.join(classes)}.")
    optimizer = classes[name](learning_rate=learning_rate)
    if precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def scale_loss(optimizer, loss):
    """For custom training loops: the loss to differentiate.

    Call it inside the GradientTape. Under a LossScaleOptimizer the loss is
    multiplied by the dynamic loss scale, so small float16 gradients do not
    underflow to zero; `optimizer.apply(grads, variables)` then divides the
    gradients by the same scale, skips a step whose gradients hold inf or NaN,
    and adapts the scale. Keras 3 has no get_scaled_loss/get_unscaled_gradients.

    >>> with tf.GradientTape() as tape:
    ...     loss = loss_fn(y, model(x, training=True))
    ...     scaled = scale_loss(optimizer, loss)
    >>> optimizer.apply(tape.gradient(scaled, model.trainable_variables), model.trainable_variables)
    """
    import keras

    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.scale_loss(loss)
    return loss


def loss_scale(optimizer) -> Optional[float]:
    """The current dynamic loss scale, or None when the optimizer does not scale."""
    import keras

    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        scale = optimizer.dynamic_scale if optimizer.built else optimizer.initial_scale
        return float(keras.ops.convert_to_numpy(scale))
    return None
