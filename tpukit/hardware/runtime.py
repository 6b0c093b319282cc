"""`connect()`: find the accelerator that is there and connect to it: TPU, else GPUs, else the CPU.

`connect()` returns a `Runtime`: what was found, the strategy to train under (a
`tf.distribute` strategy, or a `keras.distribution` on JAX), the precision we recommend
for it (and why), and why each other kind was skipped. This module only picks the backend
and the path and keeps the last runtime; each path is its own module:

- `specs`: the `Runtime` value, `ConnectError`, `RestartRequired`, device kinds and peaks;
- `tpu`: TPU discovery and TensorFlow's TPU connection, with its time limits;
- `gpu`: GPUs under TensorFlow, and the one `MirroredStrategy` per device set;
- `cpu`: the CPU under TensorFlow, simulated replicas; `cpu_probe`: its measured peak;
- `tf_multiworker`: MultiWorkerMirroredStrategy from TF_CONFIG;
- `jax_devices`: Keras on JAX, one process or several.

The public names of those modules are also importable from here, as before the split.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Optional

from tpukit.config import ACCELERATORS
from tpukit.hardware import backend as backends
from tpukit.hardware.cpu import configure_cpu_replicas, _connect_cpu
from tpukit.hardware.cpu_probe import cpu_probe
from tpukit.hardware.gpu import mirrored, set_tf32, _connect_gpu
from tpukit.hardware.jax_devices import OneDevice, processes, _connect_jax
from tpukit.hardware.specs import KINDS, PEAK_FLOPS, ConnectError, RestartRequired, Runtime, tpu_type_from_kind
from tpukit.hardware.tf_multiworker import _connect_multi_worker
from tpukit.hardware.tpu import (TPU_TIMEOUT_S, installed_tensorflow, tpu_address, tpu_needs_jax, tpu_timeout,
                                 tpu_vm_present, _check_timeout, _connect_tpu)

__all__ = [
    "connect", "connect_for", "Runtime", "ConnectError", "RestartRequired", "KINDS", "PEAK_FLOPS", "TPU_TIMEOUT_S",
    "tpu_type_from_kind", "tpu_address", "tpu_vm_present", "tpu_needs_jax", "installed_tensorflow", "tpu_timeout",
    "set_tf32", "mirrored", "configure_cpu_replicas", "cpu_probe", "processes", "OneDevice",
]

# Module state: the last runtime (so connecting again with the same arguments is free).
_lock = threading.Lock()
_current: Optional[Runtime] = None
_current_key: Optional[tuple] = None


def connect(
    accelerator: str = "auto",
    *,
    backend: str = "auto",
    tpu: Optional[str] = None,
    replicas: Optional[int] = None,
    deterministic: bool = False,
    tpu_resolver: Optional[Callable[[str], Any]] = None,
    timeout: Optional[float] = None,
) -> Runtime:
    """Connect to the accelerator and return a `Runtime`.

    Args:
        accelerator: "auto" (TPU, else GPUs, else CPU), "tpu", "gpu" or "cpu".
        backend: "auto", "tensorflow" or "jax" (see `tpukit.hardware.backend`). Must be
            decided before Keras is imported; "auto" picks JAX only for a TPU
            that TensorFlow cannot drive.
        deterministic: on the JAX backend, also ask XLA for deterministic GPU
            ops (a flag XLA reads when it starts).
        tpu: TPU to use: "local" on a TPU VM, a "grpc://host:port" address on an
            old TPU node, or a Cloud TPU name. Default: from the environment.
        replicas: on the CPU, simulate this many replicas on logical devices
            (MirroredStrategy); on GPUs, use the first N. Default: every device.
        tpu_resolver: builds the TPUClusterResolver (injected by tests that fake
            a TPU, which cannot exist on a CPU machine).
        timeout: seconds to wait for a TPU, in two bounded steps: reaching it (a
            grpc://host:port address must accept a TCP connection, then TensorFlow
            must resolve and reach it) and initializing it each get `timeout`.
            Default: the environment variable TPUKIT_TPU_TIMEOUT, else 30 s.
            A refused port fails at once.

    Raises:
        ConnectError: the accelerator asked for is not usable; says why.
        RestartRequired: simulated replicas need a fresh runtime, or TensorFlow is
            left waiting for a TPU that did not answer in time.

    Example:
        `tpukit.connect("tpu", tpu="grpc://10.0.0.2:8470", timeout=60)` waits up to
        60 s for that TPU node, then raises ConnectError naming the address.
    """
    if accelerator not in ACCELERATORS:
        raise ValueError(
            f"Unknown accelerator {accelerator!r}. Choices: {', '.join(ACCELERATORS)}."
        )
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1):
        raise ValueError(f"replicas must be a positive integer or None. Received: replicas={replicas!r}.")
    if timeout is not None:
        _check_timeout(timeout, "timeout")

    global _current, _current_key
    key = (accelerator, backend, tpu, replicas, deterministic, os.environ.get("TF_CONFIG"))
    with _lock:
        if _current is not None and _current_key == key:
            return _current
        name, why = backends.choose(backend, lambda: tpu_needs_jax(tpu))
        backends.select(name)
        if name == "jax":
            runtime = _connect_jax(accelerator, replicas, deterministic, why)
        elif os.environ.get("TF_CONFIG"):
            runtime = _connect_multi_worker(accelerator, replicas)
        else:
            runtime = _connect(accelerator, tpu, replicas, tpu_resolver, timeout)
        _current, _current_key = runtime, key
        return runtime


def _connect(accelerator, tpu, replicas, tpu_resolver, timeout=None) -> Runtime:
    skipped = []
    order = KINDS if accelerator == "auto" else (accelerator,)
    for kind in order:
        try:
            if kind == "tpu":
                return _connect_tpu(tpu, tpu_resolver, tuple(skipped), timeout)
            if kind == "gpu":
                return _connect_gpu(replicas, tuple(skipped))
            return _connect_cpu(replicas, tuple(skipped))
        except ConnectError as e:
            if accelerator != "auto" or isinstance(e, RestartRequired):
                raise
            skipped.append((kind, str(e)))
    raise ConnectError("no accelerator could be used: " + "; ".join(f"{k}: {w}" for k, w in skipped))


def connect_for(config) -> Runtime:
    """`connect()` with a RunConfig's own settings (accelerator, backend, tpu, replicas, deterministic): the one
    place that maps a config to connect's arguments, for train, tune, the CLI and the panel."""
    return connect(config.accelerator, backend=config.backend, tpu=config.tpu, replicas=config.replicas,
                   deterministic=config.deterministic)
