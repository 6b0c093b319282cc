"""Several TensorFlow processes training as one: MultiWorkerMirroredStrategy from TF_CONFIG.

Only for `TF_CONFIG` clusters of GPUs or CPUs (TPU pods connect without it). Simulated CPU
replicas per worker need TensorFlow's private `CollectiveAllReduceExtended._initialize_local_devices`,
used in one place here (`_local_cpu_devices`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from typing import Any, Optional

from tpukit.hardware import cpu
from tpukit.hardware.runtime import ConnectError, Request, TensorFlowRuntime

KIND = None  # any kind: the cluster's


@dataclasses.dataclass(frozen=True)
class MultiWorkerRuntime(TensorFlowRuntime):
    """TensorFlow's MultiWorkerMirroredStrategy across processes. Keras 3's fit cannot run under it
    (keras-team/keras#20585), so fit and evaluate run tpukit's loop (`tf_multiworker_loop`) with the same callbacks;
    the distributed dataset shards the input (its DATA auto-shard policy), and one worker's stop stops them all."""

    def shard(self):
        return 0, 1

    def fit(self, model, train, *, validation, epochs, initial_epoch, steps, callbacks, whole_feed=False):
        from tpukit.hardware import tf_multiworker_loop

        return tf_multiworker_loop.fit(
            model,
            self.strategy,
            train,
            validation=validation,
            epochs=epochs,
            initial_epoch=initial_epoch,
            steps=steps,
            callbacks=callbacks,
        )

    def evaluate(self, model, data):
        from tpukit.hardware import tf_multiworker_loop

        return tf_multiworker_loop.evaluate(model, self.strategy, data)

    def stopped_elsewhere(self, model) -> bool:
        return bool(model.stop_training)

    def multi_step_refusal(self):
        return (
            "tpukit's loop for TensorFlow's MultiWorkerMirroredStrategy (Keras 3's fit cannot run under it, "
            "keras-team/keras#20585) runs one step per call"
        )


def available(request: Request) -> Optional[str]:
    """None when TF_CONFIG names a cluster for TensorFlow to join, else why not."""
    if request.backend != "tensorflow":
        return f"the {request.backend} backend joins processes its own way"
    return None if os.environ.get("TF_CONFIG") else "TF_CONFIG is not set"


def connect(request: Request, skipped=()) -> "MultiWorkerRuntime":
    """MultiWorkerMirroredStrategy from TF_CONFIG: synchronous data parallelism across processes."""
    import tensorflow as tf

    accelerator, replicas = request.accelerator, request.replicas
    try:
        cluster = json.loads(os.environ["TF_CONFIG"])
        workers = len(cluster["cluster"]["worker"])
        task = cluster["task"]
    except (ValueError, KeyError, TypeError) as e:
        raise ConnectError(f"TF_CONFIG is not a valid cluster spec with a 'worker' list and a 'task': {e}") from None
    if accelerator == "tpu":
        raise ConnectError(
            "TF_CONFIG describes a multi-worker cluster; TPU pods use accelerator='tpu' without TF_CONFIG"
        )
    gpus = tf.config.list_physical_devices("GPU")
    kind = "gpu" if gpus and accelerator != "cpu" else "cpu"
    cpus = replicas if kind == "cpu" and replicas and replicas > 1 else 1
    if cpus > 1:
        cpu.configure_cpu_replicas(cpus)
    strategy = _multi_worker_strategy(cpus)
    devices = tuple(strategy.extended.worker_devices)
    facts: tuple = ()
    precision, reason = "float32", "multi-worker CPU cluster: float32."
    if kind == "cpu":
        facts = (cpu.facts(),)
    return MultiWorkerRuntime(
        backend="tensorflow",
        backend_reason=request.backend_reason,
        kind=kind,
        devices=devices,
        replicas=strategy.num_replicas_in_sync,
        strategy=strategy,
        simulated=cpus > 1,
        workers=workers,
        process_index=int(task.get("index") or 0),
        device_facts=facts,
        precision=precision,
        precision_reason=reason + f" Worker {task.get('index')} of {workers}.",
        skipped=tuple(skipped),  # empty: this path comes before the kinds
    )


def _multi_worker_strategy(cpus: int = 1) -> Any:
    """MultiWorkerMirroredStrategy; on the CPU, over this worker's first `cpus` logical devices.

    TensorFlow takes every GPU of a worker, but on the CPU one device only (TF 2.21,
    `CollectiveAllReduceExtended._initialize_local_devices`). For simulated replicas
    (`replicas=N` per worker) tpukit names the N logical CPU devices there while the
    strategy is made (the hook TensorFlow's own Habana integration overrides too).
    Measured: 2 workers x 2 devices end within 6e-8 of one process with 4 after 40
    steps (not bitwise: the 4 gradients are summed in another order).
    """
    import tensorflow as tf

    if cpus < 2:
        return tf.distribute.MultiWorkerMirroredStrategy()
    with _local_cpu_devices(cpus):
        return tf.distribute.MultiWorkerMirroredStrategy()


@contextlib.contextmanager
def _local_cpu_devices(cpus: int):
    """While a MultiWorkerMirroredStrategy is made, each worker's CPU share is its first `cpus` logical devices.

    tpukit's one use of this private TensorFlow API: the method
    `CollectiveAllReduceExtended._initialize_local_devices` (module
    `tensorflow.python.distribute.collective_all_reduce_strategy`), wrapped while the
    strategy is made. Where it is gone, simulated replicas per worker are refused in one line.
    """
    import tensorflow as tf

    try:
        from tensorflow.python.distribute import collective_all_reduce_strategy as impl
    except ImportError:
        impl = None
    cls = getattr(impl, "CollectiveAllReduceExtended", None)
    original = getattr(cls, "_initialize_local_devices", None)
    if original is None:
        raise ConnectError(
            f"TensorFlow {tf.__version__} no longer has "
            "CollectiveAllReduceExtended._initialize_local_devices; tpukit needs it for "
            f"replicas={cpus} per worker (simulated CPU devices under MultiWorkerMirroredStrategy): "
            "use replicas=1 per worker (one CPU device each)."
        )

    def local_devices(self, resolver, worker_device):
        devices, kind = original(self, resolver, worker_device)
        if kind == "CPU":
            devices = tuple(f"{worker_device}/device:CPU:{i}" for i in range(cpus))
        return devices, kind

    cls._initialize_local_devices = local_devices
    try:
        yield
    finally:
        cls._initialize_local_devices = original
