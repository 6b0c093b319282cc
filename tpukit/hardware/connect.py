"""`connect()`: find the accelerator that is there and connect to it: TPU, else GPUs, else the CPU.

`connect()` chooses the Keras backend (`tpukit.backend`), then walks `PATHS`, an ordered tuple of
modules that each offer `available(request)` (None, or why not) and `connect(request, skipped)`:

- `jax_devices`: Keras on JAX, whatever JAX finds (one process or several);
- `tf_multiworker`: TensorFlow's MultiWorkerMirroredStrategy, where TF_CONFIG names a cluster;
- `tpu`, `gpu`, `cpu`: TensorFlow on one kind. Under accelerator "auto" a kind that is not there, or fails
  to connect, is skipped, and the `Runtime` says why (but `RestartRequired` is raised: TensorFlow is stuck, or
  needs a restart); a kind asked for by name fails in one line.

The first available path connects, and the last runtime is kept (connecting again with the same
arguments is free). The value and errors are in `runtime`, the device facts in `specs`.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Optional, Tuple

from tpukit import backend as backends
from tpukit import global_state
from tpukit.config import ACCELERATORS
from tpukit.hardware import cpu, gpu, jax_devices, tf_multiworker, tpu
from tpukit.hardware.runtime import ConnectError, Request, RestartRequired, Runtime

PATHS = (jax_devices, tf_multiworker, tpu, gpu, cpu)

# Module state: the last runtime (so connecting again with the same arguments is free).
_lock = threading.Lock()
_current: Optional[Runtime] = None
_current_key: Optional[tuple] = None


def _set_current(value) -> None:
    global _current, _current_key
    _current, _current_key = value


global_state.register("connection", lambda: (_current, _current_key), _set_current, lambda: (None, None))


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
        backend: "auto", "tensorflow" or "jax" (see `tpukit.backend`). Must be
            decided before Keras is imported; "auto" takes a KERAS_BACKEND the
            user set, else picks JAX only for a TPU that TensorFlow cannot drive
            (or where TensorFlow is not installed).
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
        BackendError: the backend asked for is not the one Keras runs here (already loaded, or named by
            KERAS_BACKEND), is not installed, or KERAS_BACKEND names one tpukit does not run.
        ConnectError: the accelerator asked for is not usable; says why.
        RestartRequired: simulated replicas need a fresh runtime, or TensorFlow is
            left waiting for a TPU that did not answer in time.

    Example:
        `tpukit.connect("tpu", tpu="grpc://10.0.0.2:8470", timeout=60)` waits up to
        60 s for that TPU node, then raises ConnectError naming the address.
    """
    _check(accelerator, replicas, timeout)
    global _current, _current_key
    key = (accelerator, backend, tpu, replicas, deterministic, os.environ.get("TF_CONFIG"))
    with _lock:
        if _current is not None and _current_key == key:
            return _current
        name, why = backend_for(backend, tpu)
        backends.select(name)
        runtime = find(
            Request(
                accelerator=accelerator,
                backend=name,
                backend_reason=why,
                tpu=tpu,
                replicas=replicas,
                deterministic=deterministic,
                tpu_resolver=tpu_resolver,
                timeout=timeout,
            )
        )
        _current, _current_key = runtime, key
        return runtime


def _check(accelerator, replicas, timeout) -> None:
    """ValueError naming the value and the choices, before anything is imported or connected."""
    if accelerator not in ACCELERATORS:
        raise ValueError(f"Unknown accelerator {accelerator!r}. Choices: {', '.join(ACCELERATORS)}.")
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1):
        raise ValueError(f"replicas must be a positive integer or None. Received: replicas={replicas!r}.")
    if timeout is not None:
        tpu.check_timeout(timeout, "timeout")


def backend_for(requested: str = "auto", tpu_name: Optional[str] = None) -> Tuple[str, str]:
    """(Keras backend, why) for a requested one: "auto" takes the user's KERAS_BACKEND, else asks
    `tpu.tpu_needs_jax` whether only JAX can drive the TPU here. Imports neither Keras nor TensorFlow."""
    return backends.choose(requested, lambda: tpu.tpu_needs_jax(tpu_name))


def find(request: Request) -> Runtime:
    """Walk `PATHS` for `request` (its backend already chosen); no cache: `connect` keeps the result."""
    skipped = []
    for path in PATHS:
        if path.KIND is not None and request.accelerator not in ("auto", path.KIND):
            continue
        falls_back = path.KIND is not None and request.accelerator == "auto"
        why_not = path.available(request)
        if why_not is None:
            try:
                return path.connect(request, tuple(skipped))
            except ConnectError as e:
                if not falls_back or isinstance(e, RestartRequired):
                    raise
                why_not = str(e)
        elif path.KIND is not None and not falls_back:
            raise ConnectError(why_not)
        if falls_back:
            skipped.append((path.KIND, why_not))
    raise ConnectError("no accelerator could be used: " + "; ".join(f"{k}: {w}" for k, w in skipped))


def connect_for(config) -> Runtime:
    """`connect()` with a RunConfig's own settings (accelerator, backend, tpu, replicas, deterministic): the one
    place that maps a config to connect's arguments, for train, tune, the CLI and the panel."""
    return connect(
        config.accelerator,
        backend=config.backend,
        tpu=config.tpu,
        replicas=config.replicas,
        deterministic=config.deterministic,
    )
