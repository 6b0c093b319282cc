"""GPUs under TensorFlow: whether any is there, the strategy over them, their facts, their precision, and TF32.

One GPU trains under TensorFlow's default strategy, as plain `model.fit` does; two or more under a
MirroredStrategy (`gpu_strategy` says which and why). `precision` and `facts` also serve the JAX path.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any, Dict, Optional, Tuple

from tpukit.hardware import mirrored
from tpukit.hardware.runtime import ConnectError, Request, Runtime, TensorFlowRuntime
from tpukit.hardware.specs import gpu_peak
from tpukit.precision import FLOAT32, MIXED_FLOAT16

KIND = "gpu"


def available(request: Request) -> Optional[str]:
    """None when TensorFlow sees a GPU here, else why not."""
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return None
    if not tf.test.is_built_with_cuda():
        return "no GPU visible (this TensorFlow build has no CUDA support: tensorflow-cpu)"
    return "no GPU visible to TensorFlow (CUDA_VISIBLE_DEVICES or drivers)"


def connect(request: Request, skipped=()) -> Runtime:
    """TensorFlow on the first `request.replicas` GPUs (every GPU by default)."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:  # called without `available` (connect's walk asks it first)
        raise ConnectError(available(request))
    replicas = request.replicas
    if replicas is not None and replicas > len(gpus):
        raise ConnectError(f"replicas={replicas} but only {len(gpus)} GPU(s) are visible")
    gpus = gpus[: replicas or len(gpus)]
    memory = _nvidia_memory()
    device_facts = []
    for i, gpu in enumerate(gpus):
        details = tf.config.experimental.get_device_details(gpu)
        device_facts.append(
            facts(details.get("device_name", f"GPU {i}"), details.get("compute_capability"), memory.get(i))
        )
    logical = [d.name for d in tf.config.list_logical_devices("GPU")][: len(gpus)]
    strategy, strategy_reason = gpu_strategy(logical)
    policy, reason = precision(device_facts)
    return TensorFlowRuntime(
        backend="tensorflow",
        backend_reason=request.backend_reason,
        kind=KIND,
        devices=tuple(logical),
        replicas=len(logical),
        strategy=strategy,
        strategy_reason=strategy_reason,
        device_facts=tuple(device_facts),
        precision=policy,
        precision_reason=reason,
        skipped=tuple(skipped),
    )


def facts(name: str, compute_capability=None, memory_mib: Optional[int] = None) -> Dict[str, Any]:
    """A GPU's facts: its name, compute capability ((7, 5) from TensorFlow, "7.5" from JAX), memory, peaks."""
    if isinstance(compute_capability, str):
        compute_capability = compute_capability.split(".")
    cc = [int(p) for p in compute_capability] if compute_capability else None
    return {"name": name, "compute_capability": cc, "memory_mib": memory_mib, "peak_flops": gpu_peak(name)}


def gpu_strategy(devices) -> Tuple[Any, str]:
    """(strategy, why) for TensorFlow on these GPUs: the default strategy for one, a MirroredStrategy for more.

    Keras' `jit_compile="auto"` turns XLA off under any tf.distribute strategy other than the
    default one (keras/src/trainers/trainer.py, `_resolve_auto_jit_compile`). A MirroredStrategy over
    one GPU mirrors nothing, yet it would cost that GPU the XLA that plain `model.fit` gets there.
    """
    import tensorflow as tf

    if len(devices) == 1:
        return tf.distribute.get_strategy(), (
            "TensorFlow's default strategy on one GPU, as plain model.fit: Keras' jit_compile='auto' compiles "
            "with XLA there (it turns XLA off under a tf.distribute strategy)"
        )
    return mirrored.strategy(devices), (
        f"MirroredStrategy over {len(devices)} GPUs: each replica takes its share of the global batch and the "
        "gradients are all-reduced; Keras' jit_compile='auto' keeps XLA off under it"
    )


def precision(device_facts) -> Tuple[str, str]:
    """(policy, why) for these GPUs: float16 mixed precision from compute capability 7.0 (Tensor Cores), else
    float32."""
    caps = [tuple(f["compute_capability"] or (0, 0)) for f in device_facts]
    low = [f["name"] for f, cc in zip(device_facts, caps) if cc < (7, 0)]
    if low:
        return FLOAT32.name, (
            f"{', '.join(low)} has compute capability below 7.0 (no Tensor Cores): "
            "mixed precision would run slower than float32."
        )
    reason = f"compute capability {'.'.join(map(str, min(caps)))} >= 7.0: Tensor Cores run float16."
    if min(caps) >= (8, 0):
        reason += " Ampere or newer also uses TF32 for float32 matmuls (see set_tf32), so gains shrink."
    return MIXED_FLOAT16.name, reason


def _nvidia_memory() -> Dict[int, int]:
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        return {i: int(line.strip()) for i, line in enumerate(out.splitlines()) if line.strip()}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


def set_tf32(enabled: bool) -> bool:
    """Turn TensorFloat-32 for float32 matmuls on Ampere+ GPUs on or off; returns the previous setting."""
    import tensorflow as tf

    previous = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(bool(enabled))
    return previous
