"""Dtype policies: pick one for the hardware, apply it for a run, restore it after.

Keras keeps one global dtype policy; this module is the only place tpukit
changes it, and it always puts the previous one back, so runs in one kernel do
not leak into each other. Models keep their outputs in float32 (see models.py).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional, Tuple

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


def resolve(precision: str, runtime=None) -> Tuple[str, str]:
    """Turn "auto" into a concrete policy for `runtime`; returns (policy, reason).

    Raises:
        ValueError: mixed_float16 on a TPU, or an unknown precision.
    """
    from tpukit.config import PRECISIONS, ConfigError

    if precision not in PRECISIONS:
        raise ConfigError(
            f"RunConfig.precision: expected one of {', '.join(map(repr, PRECISIONS))}. Received: precision={precision!r}.",
            field="precision", value=precision, expected="one of " + ", ".join(map(repr, PRECISIONS)),
            choices=PRECISIONS)
    kind = getattr(runtime, "kind", None)
    if precision == "mixed_float16" and kind == "tpu":
        raise ConfigError(
            "RunConfig.precision: mixed_float16 is not supported on TPU; use 'mixed_bfloat16'. "
            "Received: precision='mixed_float16'.",
            field="precision", value="mixed_float16", expected="'mixed_bfloat16' or 'float32' on a TPU")
    if precision != "auto":
        return precision, "set by the config"
    if runtime is None:
        return "float32", "no runtime connected: float32 is always safe"
    return runtime.precision, runtime.precision_reason


# A step estimated shorter than this (the model's FLOPs at the CPU's measured peak) keeps Keras' "auto" on a
# TensorFlow CPU: XLA's compile costs a second or two there, more than such a step's 16-bit math wins back in a
# workshop-sized run (the zoo mlp on digits: the same speed either way, 2.3 s more before its first step).
XLA_MIN_STEP_SECONDS = 0.01
# XLA is turned on where the CPU probe measured it this much faster than TensorFlow's kernels (the geometric mean
# of the matmul's and the conv gradients' ratios), the margin "auto" precision asks of bfloat16 too.
XLA_MIN_GAIN = 1.2


def jit_compile(requested, runtime, policy: str, model, op_determinism: bool = False,
                step_seconds: Callable[[], Optional[float]] = lambda: None) -> Tuple[object, Optional[str]]:
    """(jit_compile for `model.compile`, a sentence on why, or None where Keras' own "auto" stands).

    Keras' "auto" keeps XLA off on a TensorFlow CPU. Under mixed precision whether that
    is the fast choice depends on the CPU: one AMD EPYC's TensorFlow kernels emulate
    bfloat16 and float16, and the zoo CNN ran 9.5x (mixed_bfloat16) and 4x (mixed_float16)
    faster under XLA; another EPYC runs bfloat16 natively, 1.5x faster than under XLA
    (docs/decisions.md). So "auto" follows what the CPU probe measured on this machine
    (`runtime.device_facts[0]["xla_gain"]`): True where XLA ran the policy's 16-bit type
    more than `XLA_MIN_GAIN` times faster, unless `step_seconds()` (called only on a
    TensorFlow CPU under mixed precision; None when unknown) is under
    `XLA_MIN_STEP_SECONDS`. XLA cannot run MirroredStrategy's variables across CPU
    devices, and Keras keeps it off under op determinism (`op_determinism`: on in this
    process, which a deterministic run leaves on) and for a layer with
    `supports_jit=False`; there it stays off, and the sentence says so.
    """
    if requested != "auto" or policy == "float32":
        return requested, None
    if runtime.backend != "tensorflow" or runtime.kind != "cpu":
        return requested, None
    estimate = step_seconds()
    if estimate is not None and estimate < XLA_MIN_STEP_SECONDS:
        return requested, None
    from tpukit.hardware.specs import compute_key

    facts = runtime.device_facts[0] if runtime.device_facts else {}
    gain = (facts.get("xla_gain") or {}).get(compute_key(policy))
    if not gain:
        return requested, None
    dtype = policy.split("_")[1]
    measured = (f"{facts.get('measured', 'measured here')}, XLA ran {dtype} matmuls at {gain['matmul']:.1f}x and "
                f"conv gradients at {gain['conv']:.1f}x the speed of TensorFlow's own CPU kernels")
    if (gain["matmul"] * gain["conv"]) ** 0.5 <= XLA_MIN_GAIN:
        return requested, f"Keras' auto (off on a CPU): {measured}, so XLA would not gain"
    slow = f"{policy} runs on TensorFlow's own CPU kernels ({measured}; float32 may be the faster choice here)"
    if runtime.replicas > 1 or getattr(runtime, "workers", 1) > 1:
        return requested, f"XLA stays off: it cannot compile MirroredStrategy's variables across CPU devices, so {slow}"
    layers = getattr(model, "_flatten_layers", None)
    unsupported = [layer.name for layer in (layers() if layers else ()) if not getattr(layer, "supports_jit", True)]
    if unsupported:
        return requested, f"XLA stays off: layer {unsupported[0]!r} does not support it, so {slow}"
    if op_determinism:
        return requested, (f"XLA stays off under TensorFlow's op determinism (RunConfig.deterministic, or a "
                           f"deterministic run earlier in this process), so {slow}")
    return True, f"on (XLA): {measured}; RunConfig.jit_compile=False turns it off"


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
