"""Measure this CPU's float32 and bfloat16 FLOP/s, once per machine, cached on disk.

No library gives a CPU's peak: it is measured with the framework that will train (TensorFlow,
or JAX where there is none). The matmul figure is MFU's divisor. "auto" precision needs a conv
figure too: a CPU can run bfloat16 matmuls fast and bfloat16 conv gradients ten times slower
than float32 (an AMD EPYC under TensorFlow 2.21), and a CNN trains on both.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Dict, Optional

from tpukit.hardware import backend

_probe: Dict[str, dict] = {}
_FIELDS = ("fp32_flops", "bf16_flops", "fp32_conv_flops", "bf16_conv_flops")
# The conv probe: a 3x3 conv over a batch of 16x16 maps, 32 channels in and out, as a small CNN has.
_CONV_X, _CONV_W = (8, 16, 16, 32), (3, 3, 32, 32)
_CONV_FLOPS = 3 * 2 * 8 * 16 * 16 * 32 * 3 * 3 * 32  # forward, and the gradients for the input and the kernel


def cpu_probe(cache_dir: Optional[str] = None) -> dict:
    """Measure float32 and bfloat16 FLOP/s of a matmul and of a conv's forward and backward pass on this CPU
    once; cached in memory and on disk.

    The figures serve two ends: whether "auto" precision should pick bfloat16 (both must gain),
    and the peak FLOP/s that MFU divides by (the matmul's). They are measured with the
    framework that will train: TensorFlow, or JAX where Keras runs on JAX
    (Colab's TPU runtime has no TensorFlow).
    """
    framework = _probe_framework()
    if framework in _probe:
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
    if not (isinstance(entry, dict) and set(_FIELDS) <= set(entry)):  # an older probe's entry lacks the conv
        matmul, conv = (_matmul_flops_jax, _conv_flops_jax) if framework == "jax" else (_matmul_flops, _conv_flops)
        entry = {"key": key, "cpu": cpu, "fp32_flops": matmul("float32"), "bf16_flops": matmul("bfloat16"),
                 "fp32_conv_flops": conv("float32"), "bf16_conv_flops": conv("bfloat16")}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            cached = {k: v for k, v in cached.items() if isinstance(v, dict)} if isinstance(cached, dict) else {}
            path.write_text(json.dumps({**cached, key: entry}))
        except OSError:
            pass
    _probe[framework] = entry
    return entry


def _probe_framework() -> str:
    """The framework the CPU's peak is measured with: the backend this process runs (`backend.choose` where none
    is decided yet)."""
    return backend.selected() or backend.choose("auto")[0]


def _matmul_flops(dtype: str, n: int = 1024, reps: int = 8) -> float:
    import tensorflow as tf

    with tf.device("/CPU:0"):
        a = tf.cast(tf.random.stateless_normal((n, n), seed=(1, 2)), dtype)
        b = tf.cast(tf.random.stateless_normal((n, n), seed=(3, 4)), dtype)
        matmul = tf.function(tf.matmul)
        return 2.0 * n**3 / _best_seconds(lambda: matmul(a, b), lambda out: out.numpy(), reps)


def _conv_flops(dtype: str, reps: int = 8) -> float:
    import tensorflow as tf

    with tf.device("/CPU:0"):
        x = tf.cast(tf.random.stateless_normal(_CONV_X, seed=(5, 6)), dtype)
        w = tf.cast(tf.random.stateless_normal(_CONV_W, seed=(7, 8)), dtype)

        @tf.function
        def grads():
            with tf.GradientTape() as tape:
                tape.watch([x, w])
                loss = tf.reduce_sum(tf.nn.conv2d(x, w, 1, "SAME"))
            return tape.gradient(loss, [x, w])

        return _CONV_FLOPS / _best_seconds(grads, lambda out: out[1].numpy(), reps)


def _matmul_flops_jax(dtype: str, n: int = 1024, reps: int = 8) -> float:
    import jax
    import jax.numpy as jnp

    cpu = jax.devices("cpu")[0]
    a = jax.device_put(jax.random.normal(jax.random.key(1), (n, n)).astype(dtype), cpu)
    b = jax.device_put(jax.random.normal(jax.random.key(2), (n, n)).astype(dtype), cpu)
    matmul = jax.jit(jnp.matmul)
    return 2.0 * n**3 / _best_seconds(lambda: matmul(a, b), lambda out: out.block_until_ready(), reps)


def _conv_flops_jax(dtype: str, reps: int = 8) -> float:
    import jax

    cpu = jax.devices("cpu")[0]
    x = jax.device_put(jax.random.normal(jax.random.key(3), _CONV_X).astype(dtype), cpu)
    w = jax.device_put(jax.random.normal(jax.random.key(4), _CONV_W).astype(dtype), cpu)

    def loss(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")).sum()

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))
    return _CONV_FLOPS / _best_seconds(lambda: grads(x, w), lambda out: jax.block_until_ready(out), reps)


def _best_seconds(step, wait, reps: int) -> float:
    """Seconds per call: the best of 3 timings of `reps` back-to-back calls, after a warm-up."""
    wait(step())
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(reps):
            out = step()
        wait(out)
        best = min(best, (time.perf_counter() - start) / reps)
    return best


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"
