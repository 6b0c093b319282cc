"""Which dtype policy and whether XLA, for the hardware at hand: `resolve` ("auto" precision) and `jit_compile`.

Applying a policy and making the optimizer that goes with it are below, in `tpukit.models.policies`, where the
model and the run directory's rebuild use them too.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

# Applying a policy and its optimizer, here too for notebooks and custom loops (`precision.policy(...)`).
from tpukit.models.policies import (POLICIES, current_policy, loss_scale, make_optimizer, policy,  # noqa: F401
                                    scale_loss)


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
