"""Measure this CPU's float32 and bfloat16 matmul FLOP/s, once per machine, cached on disk.

No library gives a CPU's matmul peak: it is measured with the framework that will train
(TensorFlow, or JAX where there is none), and serves as MFU's divisor and as the evidence for
"auto" precision on the CPU.
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


def cpu_probe(cache_dir: Optional[str] = None) -> dict:
    """Measure float32 and bfloat16 matmul FLOP/s on this CPU once; cached in memory and on disk.

    The figures serve two ends: whether "auto" precision should pick bfloat16,
    and the peak FLOP/s that MFU divides by. They are measured with the
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
    if not (isinstance(entry, dict) and {"fp32_flops", "bf16_flops"} <= set(entry)):
        measure = _matmul_flops_jax if framework == "jax" else _matmul_flops
        entry = {"key": key, "cpu": cpu, "fp32_flops": measure("float32"), "bf16_flops": measure("bfloat16")}
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
        return _best_flops(lambda: matmul(a, b), lambda out: out.numpy(), n, reps)


def _matmul_flops_jax(dtype: str, n: int = 1024, reps: int = 8) -> float:
    import jax
    import jax.numpy as jnp

    cpu = jax.devices("cpu")[0]
    a = jax.device_put(jax.random.normal(jax.random.key(1), (n, n)).astype(dtype), cpu)
    b = jax.device_put(jax.random.normal(jax.random.key(2), (n, n)).astype(dtype), cpu)
    matmul = jax.jit(jnp.matmul)
    return _best_flops(lambda: matmul(a, b), lambda out: out.block_until_ready(), n, reps)


def _best_flops(step, wait, n: int, reps: int) -> float:
    """FLOP/s of an n x n x n matmul: the best of 3 timings of `reps` back-to-back calls, after a warm-up."""
    wait(step())
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(reps):
            out = step()
        wait(out)
        best = min(best, (time.perf_counter() - start) / reps)
    return 2.0 * n**3 / best


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"
