"""Find a TPU and connect TensorFlow to it: where it is, whether TensorFlow can drive it, and how long to wait.

TensorFlow's TPU calls cannot be interrupted and fail in many ways: this module bounds each step
in time, probes a TPU node's gRPC port before TensorFlow is asked, and turns every failure into
one line. It also answers, without importing TensorFlow, whether only JAX can drive the TPU here
(`tpu_needs_jax`), which `tpukit.backend.choose` needs before Keras is imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from tpukit.errors import TpukitError
from tpukit.hardware.runtime import ConnectError, Request, RestartRequired, Runtime, TensorFlowRuntime
from tpukit.hardware.specs import PEAK_FLOPS, TPU_TYPES
from tpukit.precision import MIXED_BFLOAT16

KIND = "tpu"
TPU_TIMEOUT_S = 30.0  # default wait for a TPU to answer; connect(timeout=) or TPUKIT_TPU_TIMEOUT changes it


def tpu_address(tpu: Optional[str] = None) -> Optional[str]:
    """The TPU to resolve: explicit, else COLAB_TPU_ADDR (old node), TPU_NAME, or 'local' on a TPU VM."""
    if tpu:
        return tpu
    if os.environ.get("COLAB_TPU_ADDR"):
        return "grpc://" + os.environ["COLAB_TPU_ADDR"]
    if os.environ.get("TPU_NAME"):
        return os.environ["TPU_NAME"]
    if tpu_vm_present():
        return "local"
    return None


def tpu_vm_present() -> bool:
    """A TPU VM exposes its chips as /dev/accel* (v2-v4) or /dev/vfio/* (v5e and later)."""
    dev = Path("/dev")
    return any(dev.glob("accel*")) or (
        (dev / "vfio").is_dir() and any(p.name != "vfio" for p in (dev / "vfio").iterdir())
    )


def tpu_needs_jax(tpu: Optional[str] = None) -> Optional[str]:
    """Why JAX must drive the TPU here, or None (no TPU, or TensorFlow can drive it).

    Decided without importing TensorFlow: `import tensorflow` imports Keras,
    which fixes the Keras backend for the life of the process. A TPU VM
    ('local') needs a TensorFlow built with TPU support (tensorflow-tpu); a
    grpc:// TPU node or a named Cloud TPU works with any TensorFlow.
    """
    address = tpu_address(tpu)
    if address != "local":
        return None
    dists = installed_tensorflow()
    if not dists:
        return "a TPU VM without TensorFlow (Colab's TPU runtime): JAX drives its TPU"
    if "tensorflow-tpu" in dists:
        return None
    build = ", ".join(f"{name} {version}" for name, version in dists.items())
    return f"a TPU VM, and this TensorFlow ({build}) has no TPU support: JAX drives its TPU"


def installed_tensorflow() -> Dict[str, str]:
    """The TensorFlow distributions installed here, name -> version, read from metadata (no import)."""
    found = {}
    for name in ("tensorflow-tpu", "tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def tpu_timeout(timeout: Optional[float] = None) -> float:
    """Seconds to wait for a TPU: `timeout` if given, else TPUKIT_TPU_TIMEOUT, else 30."""
    if timeout is not None:
        return check_timeout(timeout, "timeout")
    text = os.environ.get("TPUKIT_TPU_TIMEOUT", "").strip()
    if not text:
        return TPU_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    return check_timeout(value, "TPUKIT_TPU_TIMEOUT", shown=text)


def check_timeout(value, name: str, shown=None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(
            f"{name}: expected a positive number of seconds. "
            f"Received: {name}={shown if shown is not None else value!r}."
        )
    return float(value)


class _TookTooLong(TpukitError):
    """A step run by `_within` did not end in time (it goes on in its daemon thread)."""


def _within(seconds: float, work: Callable[[], Any], name: str) -> Any:
    """Run `work` in a daemon thread; its result or its exception, or _TookTooLong after `seconds`.

    TensorFlow's TPU calls cannot be interrupted: one waiting on an address
    that never answers is left behind in its thread (the process still exits).
    """
    outcome: Dict[str, Any] = {}

    def run():
        try:
            outcome["value"] = work()
        except BaseException as e:  # handed to the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=run, name=f"tpukit-{name}", daemon=True)
    thread.start()
    thread.join(max(seconds, 0.0))
    if thread.is_alive():
        raise _TookTooLong(name)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _grpc_host_port(address: str) -> Optional[Tuple[str, int]]:
    """(host, port) of a single 'grpc://host:port' address, else None (a TPU name, 'local', a list)."""
    if not address.startswith("grpc://") or "," in address:
        return None
    try:
        parts = urllib.parse.urlsplit(address)
        port = parts.port
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname and port else None


def _probe_tpu(address: str, seconds: float) -> None:
    """ConnectError unless the TPU node's gRPC port accepts a TCP connection within `seconds`."""
    target = _grpc_host_port(address)
    if target is None:
        return
    host, port = target
    wait = _wait_hint(seconds)

    def reach():
        socket.create_connection((host, port), timeout=seconds).close()

    try:
        _within(seconds, reach, "tpu-probe")
    except (_TookTooLong, socket.timeout):
        raise ConnectError(
            f"TPU '{address}' did not answer within {seconds:g} s (no connection to {host}:{port}). "
            f"Check the address and that the TPU is up, {wait}"
        ) from None
    except socket.gaierror as e:
        raise ConnectError(
            f"TPU '{address}': cannot resolve host '{host}' ({e.strerror or e}). Check the address."
        ) from None
    except OSError as e:
        raise ConnectError(
            f"TPU '{address}' does not answer: {host}:{port} refuses connections ({e.strerror or e}). "
            "Check the address (on Colab, COLAB_TPU_ADDR), or use accelerator='auto' for the GPU or CPU."
        ) from None


def _wait_hint(seconds: float) -> str:
    return f"or wait longer with connect(timeout=...) or TPUKIT_TPU_TIMEOUT (now {seconds:g} s)."


def available(request: Request) -> Optional[str]:
    """None when there is a TPU to try (an address, a name, or this TPU VM's chips), else why not."""
    if tpu_address(request.tpu) is None:
        return "no TPU found (COLAB_TPU_ADDR and TPU_NAME are unset and this is not a TPU VM)"
    return None


def precision() -> Tuple[str, str]:
    """(policy, why) on a TPU: bfloat16 is what its matrix units compute in."""
    return MIXED_BFLOAT16.name, "TPU matrix units compute in bfloat16; variables stay float32."


def connect(request: Request, skipped=()) -> Runtime:
    """TensorFlow's TPUStrategy on the TPU `request.tpu` names (or the one the environment names), within
    `request.timeout` for each step; `request.tpu_resolver` builds the resolver (tests fake the TPU with it)."""
    address = tpu_address(request.tpu)
    if address is None:  # called without `available` (connect's walk asks it first)
        raise ConnectError(available(request))
    seconds = tpu_timeout(request.timeout)
    deadline = time.monotonic() + seconds
    _probe_tpu(address, seconds)
    import tensorflow as tf

    make = request.tpu_resolver or (lambda a: tf.distribute.cluster_resolver.TPUClusterResolver(tpu=a))
    step = "resolve"
    try:
        # Reaching the TPU: the resolver (a Cloud TPU name asks Google's API), then TensorFlow's remote context.
        resolver = _within(deadline - time.monotonic(), lambda: make(address), "tpu-resolve")
        if address != "local":
            step = "reach"
            _within(
                deadline - time.monotonic(), lambda: tf.config.experimental_connect_to_cluster(resolver), "tpu-connect"
            )

        def initialize():
            tf.tpu.experimental.initialize_tpu_system(resolver)
            return tf.distribute.TPUStrategy(resolver)

        step = "initialize"
        strategy = _within(seconds, initialize, "tpu-initialize")
    except _TookTooLong:
        raise _tpu_timed_out(address, step, seconds) from None
    except Exception as e:  # TF raises many types here; turn each into one clear line.
        raise ConnectError(_explain_tpu_failure(address, e)) from None
    devices = tuple(d.name for d in tf.config.list_logical_devices("TPU"))
    tpu_type = _tpu_type(resolver)
    peak = PEAK_FLOPS.get(tpu_type, {})
    facts = tuple({"name": tpu_type or "TPU", "peak_flops": peak} for _ in devices)
    policy, reason = precision()
    return TensorFlowRuntime(
        backend="tensorflow",
        backend_reason=request.backend_reason,
        kind=KIND,
        devices=devices,
        replicas=strategy.num_replicas_in_sync,
        strategy=strategy,
        device_facts=facts,
        precision=policy,
        precision_reason=reason,
        skipped=tuple(skipped),
    )


def _tpu_timed_out(address: str, step: str, seconds: float) -> ConnectError:
    """The error for a TPU step that did not end in time; TensorFlow's own steps leave it stuck."""
    if step == "resolve":
        return ConnectError(
            f"TPU '{address}' could not be resolved within {seconds:g} s. Check the name and the network, "
            + _wait_hint(seconds)
        )
    what = "did not answer" if step == "reach" else "was not initialized"
    return RestartRequired(
        f"TPU '{address}' {what} within {seconds:g} s, and TensorFlow stays blocked waiting for it: "
        "check the address, restart the runtime (Colab: Runtime > Restart session) and connect again, "
        + _wait_hint(seconds)
    )


def _explain_tpu_failure(address: str, error: Exception) -> str:
    text = str(error)
    if "ConfigureDistributedTPU" in text or "TPUs not found" in text:
        return (
            f"TPU '{address}' could not be initialized: this TensorFlow build has no TPU support. "
            "On Colab's TPU runtime (a TPU VM with JAX) use the JAX backend of Keras instead."
        )
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return f"TPU '{address}' could not be initialized: {first[:300]}"


def _tpu_type(resolver) -> str:
    """The TPU generation from TPU_ACCELERATOR_TYPE (e.g. 'v2-8', 'v5litepod-1'), for its datasheet peak."""
    accel = os.environ.get("TPU_ACCELERATOR_TYPE", "").lower()
    return next((name for prefix, name in TPU_TYPES if accel.startswith(prefix)), "TPU")
