"""Measure this CPU's float32 and bfloat16 FLOP/s, once per machine, cached on disk.

No library gives a CPU's peak: it is measured with the framework that will train (TensorFlow,
or JAX where there is none). The matmul figure is MFU's divisor. "auto" precision needs a conv
figure too: a CPU can run bfloat16 matmuls fast and bfloat16 conv gradients ten times slower
than float32 (an AMD EPYC under TensorFlow 2.21), and a CNN trains on both.

Under TensorFlow it also times the 16-bit matmul and conv on TensorFlow's own kernels and under
XLA: whether XLA pays for mixed precision depends on the CPU (one AMD EPYC's TensorFlow kernels
emulate bfloat16 and ran a CNN 9.5x slower than XLA; another's run it natively, faster than XLA).

`TPUKIT_CPU_PROBE=FILE` (a JSON object of these figures) replaces the measurement: to pin the
decisions that follow from it, and for tests, which must not depend on the CPU they run on.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Dict, Optional

from tpukit import backend
from tpukit import global_state
from tpukit.hardware.runtime import ConnectError

_probe: Dict[str, dict] = {}


def _set_probe(figures: Dict[str, dict]) -> None:
    _probe.clear()
    _probe.update(figures)


global_state.register("cpu_probe", lambda: dict(_probe), _set_probe, dict)
_FIELDS = ("fp32_flops", "bf16_flops", "fp32_conv_flops", "bf16_conv_flops")
# TensorFlow only: the 16-bit figures on TensorFlow's own CPU kernels and under XLA (`jit_compile=True`).
XLA_FIELDS = (
    "fp16_flops",
    "fp16_conv_flops",
    "bf16_xla_flops",
    "bf16_conv_xla_flops",
    "fp16_xla_flops",
    "fp16_conv_xla_flops",
)
FORCE = "TPUKIT_CPU_PROBE"
# The conv probe: a 3x3 conv over a batch of 28x28 maps, 32 channels in and out, as a small CNN has. Smaller
# (8 maps of 16x16: 0.1 GFLOP a call) its bfloat16-to-float32 ratio moved between 0.9 and 1.4 on one CPU.
_CONV_X, _CONV_W = (16, 28, 28, 32), (3, 3, 32, 32)
_CONV_FLOPS = 3 * 2 * 16 * 28 * 28 * 32 * 3 * 3 * 32  # forward, and the gradients for the input and the kernel


def cpu_probe(cache_dir: Optional[str] = None) -> dict:
    """Measure float32 and bfloat16 FLOP/s of a matmul and of a conv's forward and backward pass on this CPU
    once; cached in memory and on disk.

    The figures serve three ends: whether "auto" precision should pick bfloat16 (both must gain),
    the peak FLOP/s that MFU divides by (the matmul's), and, under TensorFlow, whether XLA pays
    for mixed precision (`XLA_FIELDS`). They are measured with the framework that will train:
    TensorFlow, or JAX where Keras runs on JAX (Colab's TPU runtime has no TensorFlow).

    Raises:
        ConnectError: `TPUKIT_CPU_PROBE` names a file that does not hold the figures.
    """
    framework = _probe_framework()
    if framework in _probe:
        return _probe[framework]
    fields = _fields(framework)
    if os.environ.get(FORCE):
        _probe[framework] = _forced(os.environ[FORCE], fields)
        return _probe[framework]
    module = __import__(framework)
    cpu = _cpu_name()
    key = f"{cpu}|{os.cpu_count()}|{framework} {module.__version__}"
    path = Path(cache_dir or os.environ.get("TPUKIT_CACHE", Path.home() / ".cache" / "tpukit")) / "cpu_probe.json"
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    entry = cached.get(key) if isinstance(cached, dict) else None
    if not (isinstance(entry, dict) and set(fields) <= set(entry)):  # an older probe's entry lacks a figure
        entry = {"key": key, "cpu": cpu, **_measure(framework)}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            cached = {k: v for k, v in cached.items() if isinstance(v, dict)} if isinstance(cached, dict) else {}
            path.write_text(json.dumps({**cached, key: entry}))
        except OSError:
            pass
    _probe[framework] = entry
    return entry


def _fields(framework: str) -> tuple:
    return _FIELDS + (XLA_FIELDS if framework == "tensorflow" else ())


def _measure(framework: str) -> dict:
    """Every figure of this framework's probe, timed round-robin (`_best_rates`)."""
    if framework == "jax":
        kinds = {"fp32": "float32", "bf16": "bfloat16"}
        steps = {
            **{f"{k}_flops": _matmul_jax(d) for k, d in kinds.items()},
            **{f"{k}_conv_flops": _conv_jax(d) for k, d in kinds.items()},
        }
        return _best_rates(steps)
    import tensorflow as tf

    steps = {}
    for short, dtype in (("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16")):
        for xla in (False, True) if short != "fp32" else (False,):
            suffix = "_xla_flops" if xla else "_flops"
            steps[short + suffix] = _matmul(dtype, xla)
            steps[short + "_conv" + suffix] = _conv(dtype, xla)
    logger, level = tf.get_logger(), tf.get_logger().level
    logger.setLevel("ERROR")  # ten tf.functions of two Python functions: TensorFlow's retracing warning is noise here
    try:
        return _best_rates(steps)
    finally:
        logger.setLevel(level)


def _forced(path: str, fields: tuple) -> dict:
    """The figures of a `TPUKIT_CPU_PROBE` file, checked: every field a positive number."""
    try:
        entry = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ConnectError(
            f"{FORCE}={path!r}: cannot read it as JSON ({type(e).__name__}); expected a JSON file of "
            f"FLOP/s figures ({', '.join(fields)}), or unset it to measure this CPU"
        ) from None
    bad = [
        f for f in fields if not (isinstance(entry, dict) and isinstance(entry.get(f), (int, float)) and entry[f] > 0)
    ]
    if bad:
        raise ConnectError(
            f"{FORCE}={path!r}: {', '.join(bad)} missing or not a positive number; expected FLOP/s "
            f"figures for {', '.join(fields)}, or unset it to measure this CPU"
        )
    return {
        "key": f"{FORCE}={path}",
        "cpu": entry.get("cpu", _cpu_name()),
        **{f: float(entry[f]) for f in fields},
        "forced": path,
    }


def _probe_framework() -> str:
    """The framework the CPU's peak is measured with: the backend this process runs (`connect` has chosen it
    before it asks for the CPU's facts, the only way tpukit asks), else TensorFlow where installed, else JAX."""
    return backend.selected() or ("tensorflow" if backend.installed("tensorflow") else "jax")


# Each builder returns (step, wait, FLOPs per step): `step()` launches one call, `wait(out)` blocks until it is done.


def _matmul(dtype: str, xla: bool, n: int = 1024):
    import tensorflow as tf

    with tf.device("/CPU:0"):
        a = tf.cast(tf.random.stateless_normal((n, n), seed=(1, 2)), dtype)
        b = tf.cast(tf.random.stateless_normal((n, n), seed=(3, 4)), dtype)
    matmul = tf.function(tf.matmul, jit_compile=xla)

    def step():
        with tf.device("/CPU:0"):
            return matmul(a, b)

    return step, lambda out: out.numpy(), 2.0 * n**3


def _conv(dtype: str, xla: bool):
    import tensorflow as tf

    with tf.device("/CPU:0"):
        x = tf.cast(tf.random.stateless_normal(_CONV_X, seed=(5, 6)), dtype)
        w = tf.cast(tf.random.stateless_normal(_CONV_W, seed=(7, 8)), dtype)

    @tf.function(jit_compile=xla)
    def grads():
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            loss = tf.reduce_sum(tf.nn.conv2d(x, w, 1, "SAME"))
        return tape.gradient(loss, [x, w])

    def step():
        with tf.device("/CPU:0"):
            return grads()

    return step, lambda out: out[1].numpy(), _CONV_FLOPS


def _matmul_jax(dtype: str, n: int = 1024):
    import jax
    import jax.numpy as jnp

    cpu = jax.devices("cpu")[0]
    a = jax.device_put(jax.random.normal(jax.random.key(1), (n, n)).astype(dtype), cpu)
    b = jax.device_put(jax.random.normal(jax.random.key(2), (n, n)).astype(dtype), cpu)
    matmul = jax.jit(jnp.matmul)
    return lambda: matmul(a, b), lambda out: out.block_until_ready(), 2.0 * n**3


def _conv_jax(dtype: str):
    import jax

    cpu = jax.devices("cpu")[0]
    x = jax.device_put(jax.random.normal(jax.random.key(3), _CONV_X).astype(dtype), cpu)
    w = jax.device_put(jax.random.normal(jax.random.key(4), _CONV_W).astype(dtype), cpu)

    def loss(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")).sum()

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))
    return lambda: grads(x, w), lambda out: jax.block_until_ready(out), _CONV_FLOPS


def _best_rates(steps: Dict[str, tuple], rounds: int = 5, reps: int = 4) -> Dict[str, float]:
    """FLOP/s of each (step, wait, flops): after a warm-up call each, `rounds` rounds that time `reps`
    back-to-back calls of every step in turn; each keeps its best round. Taking turns puts load that comes
    and goes (another process) on every figure alike, so their ratios, which the decisions read, hold."""
    for step, wait, _ in steps.values():
        wait(step())
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(rounds):
        for name, (step, wait, _) in steps.items():
            start = time.perf_counter()
            for _ in range(reps):
                out = step()
            wait(out)
            best[name] = min(best[name], (time.perf_counter() - start) / reps)
    return {name: steps[name][2] / seconds for name, seconds in best.items()}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"
