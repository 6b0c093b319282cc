"""GPUs under TensorFlow: the strategy over them, their facts, the precision for them, and TF32.

One GPU trains under TensorFlow's default strategy, as plain `model.fit` does; two or more under a
MirroredStrategy (`gpu_strategy` says which and why). `mirrored` is also the strategy of simulated CPU
replicas: one per device set per process, and it holds tpukit's one use of MirroredStrategy's private
`_collective_key_base` (`_group_keys_from`).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from typing import Any, Dict, Tuple

from tpukit.hardware.specs import PEAK_FLOPS, ConnectError, Runtime


def _connect_gpu(replicas, skipped) -> Runtime:
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        if not tf.test.is_built_with_cuda():
            raise ConnectError("no GPU visible (this TensorFlow build has no CUDA support: tensorflow-cpu)")
        raise ConnectError("no GPU visible to TensorFlow (CUDA_VISIBLE_DEVICES or drivers)")
    if replicas is not None and replicas > len(gpus):
        raise ConnectError(f"replicas={replicas} but only {len(gpus)} GPU(s) are visible")
    gpus = gpus[: replicas or len(gpus)]
    facts = []
    memory = _nvidia_memory()
    for i, gpu in enumerate(gpus):
        details = tf.config.experimental.get_device_details(gpu)
        name = details.get("device_name", f"GPU {i}")
        cc = details.get("compute_capability")
        peak = next((v for k, v in PEAK_FLOPS.items() if k.lower() in name.lower()), {})
        facts.append({"name": name, "compute_capability": list(cc) if cc else None,
                      "memory_mib": memory.get(i), "peak_flops": peak})
    logical = [d.name for d in tf.config.list_logical_devices("GPU")][: len(gpus)]
    strategy, strategy_reason = gpu_strategy(logical)
    precision, reason = _gpu_precision(facts)
    return Runtime(
        backend="tensorflow",
        kind="gpu",
        devices=tuple(logical),
        replicas=len(logical),
        strategy=strategy,
        strategy_reason=strategy_reason,
        device_facts=tuple(facts),
        precision=precision,
        precision_reason=reason,
        skipped=skipped,
    )


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
            "with XLA there (it turns XLA off under a tf.distribute strategy)")
    return mirrored(devices), (
        f"MirroredStrategy over {len(devices)} GPUs: each replica takes its share of the global batch and the "
        "gradients are all-reduced; Keras' jit_compile='auto' keeps XLA off under it")


def _gpu_precision(facts) -> Tuple[str, str]:
    caps = [tuple(f["compute_capability"] or (0, 0)) for f in facts]
    low = [f["name"] for f, cc in zip(facts, caps) if cc < (7, 0)]
    if low:
        return "float32", (f"{', '.join(low)} has compute capability below 7.0 (no Tensor Cores): "
                           "mixed precision would run slower than float32.")
    reason = f"compute capability {'.'.join(map(str, min(caps)))} >= 7.0: Tensor Cores run float16."
    if min(caps) >= (8, 0):
        reason += " Ampere or newer also uses TF32 for float32 matmuls (see set_tf32), so gains shrink."
    return "mixed_float16", reason


def _nvidia_memory() -> Dict[int, int]:
    if not shutil.which("nvidia-smi"):
        return {}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return {i: int(line.strip()) for i, line in enumerate(out.splitlines()) if line.strip()}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


def set_tf32(enabled: bool) -> bool:
    """Turn TensorFloat-32 for float32 matmuls on Ampere+ GPUs on or off; returns the previous setting."""
    import tensorflow as tf

    previous = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(bool(enabled))
    return previous


_mirrored: Dict[Tuple[str, ...], Any] = {}


def mirrored(devices) -> Any:
    """The one MirroredStrategy of this process over `devices` (made on first use, then reused).

    Reusing it is not only cheaper: a second MirroredStrategy over the same devices
    starts its collective instance keys where the first did, and TensorFlow then
    matches its all-reduces with ones the first left pending (seen with a sparse
    Embedding gradient: "Shape mismatch in the collective instance 100"), which
    cancels the next run. One strategy per device set never reuses a key.

    Strategies over different device sets (replicas=8, then replicas=4) would
    still both number their all-reduce groups from 1, and TensorFlow refuses the
    second ("joining a group with size 4, but that group has size 8"). So each
    set gets its own range of group keys (`_group_keys_from`).
    """
    import tensorflow as tf

    key = tuple(devices)
    if key not in _mirrored:
        with _group_keys_from(_GROUP_KEYS_PER_STRATEGY * len(_mirrored)):
            _mirrored[key] = tf.distribute.MirroredStrategy(devices=list(key))
    return _mirrored[key]


_GROUP_KEYS_PER_STRATEGY = 10_000  # a strategy uses a few group keys (one per device group); far fewer than this


@contextlib.contextmanager
def _group_keys_from(offset: int):
    """While a MirroredStrategy is made, its all-reduce group keys start `offset` further on.

    tpukit's one use of a private TensorFlow API: the class attribute
    `MirroredStrategy._collective_key_base`, which a strategy reads once, when it is
    made. The first strategy (offset 0) needs nothing; a later device set without
    the attribute is refused in one line rather than left to fail in its first all-reduce.
    """
    if not offset:
        yield
        return
    import tensorflow as tf

    cls = tf.distribute.MirroredStrategy
    base = getattr(cls, "_collective_key_base", None)
    if base is None:
        raise ConnectError(
            f"TensorFlow {tf.__version__} no longer has MirroredStrategy._collective_key_base; tpukit needs it to give "
            "a second device set its own all-reduce group keys: restart the runtime and connect with one device set.")
    cls._collective_key_base = base + offset
    try:
        yield
    finally:
        cls._collective_key_base = base
