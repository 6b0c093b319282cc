"""Find the accelerator that is there and connect to it: TPU, else GPUs, else the CPU.

`connect()` returns a `Runtime`: what was found, the `tf.distribute` strategy to
train under, the precision we recommend for it (and why), and why each other
kind was skipped. Logical CPU devices (simulated replicas) are global state
owned by this module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

KINDS = ("tpu", "gpu", "cpu")
TPU_TIMEOUT_S = 30.0  # default wait for a TPU to answer; connect(timeout=) or TPUKIT_TPU_TIMEOUT changes it

# Dense peak FLOP/s per chip (16-bit matrix units, float32), from vendor datasheets.
# A TPU core here is one TensorFlow replica: v2/v3 have 2 cores a chip.
PEAK_FLOPS = {
    "TPU v2": {"bf16": 45e12 / 2, "fp32": 45e12 / 2},
    "TPU v3": {"bf16": 123e12 / 2, "fp32": 123e12 / 2},
    "TPU v4": {"bf16": 275e12, "fp32": 275e12},
    "TPU v5e": {"bf16": 197e12, "fp32": 197e12},
    "TPU v5p": {"bf16": 459e12, "fp32": 459e12},
    "TPU v6e": {"bf16": 918e12, "fp32": 918e12},
    "Tesla T4": {"fp16": 65e12, "bf16": 8.1e12, "fp32": 8.1e12},
    "NVIDIA L4": {"fp16": 121e12, "bf16": 121e12, "fp32": 30e12},
    "Tesla V100": {"fp16": 125e12, "bf16": 15.7e12, "fp32": 15.7e12},
    "Tesla P100": {"fp16": 18.7e12, "bf16": 9.3e12, "fp32": 9.3e12},
    "NVIDIA A100": {"fp16": 312e12, "bf16": 312e12, "fp32": 156e12},  # fp32 via TF32
    "NVIDIA H100": {"fp16": 989e12, "bf16": 989e12, "fp32": 495e12},
    "NVIDIA H200": {"fp16": 989e12, "bf16": 989e12, "fp32": 495e12},
}


class ConnectError(RuntimeError):
    """The asked-for accelerator cannot be used; the message says why and what to do."""


class RestartRequired(ConnectError):
    """Restart the runtime first: a setting TensorFlow fixes at start-up is needed, or TensorFlow is stuck waiting."""


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What `connect()` found and how to train on it.

    `strategy` is a `tf.distribute.Strategy`: build and compile models in
    `strategy.scope()`. `skipped` maps each kind not used to the reason.
    """

    backend: str
    kind: str
    devices: Tuple[str, ...]
    replicas: int
    strategy: Any = dataclasses.field(repr=False, compare=False)
    simulated: bool = False
    workers: int = 1
    process_index: int = 0  # this process among `workers`; 0 is the chief, the one that writes the run
    device_facts: Tuple[Dict[str, Any], ...] = ()
    precision: str = "float32"
    precision_reason: str = ""
    skipped: Tuple[Tuple[str, str], ...] = ()

    @property
    def skipped_reasons(self) -> Dict[str, str]:
        return dict(self.skipped)

    def peak_flops(self, precision: str) -> Optional[float]:
        """Peak FLOP/s of all replicas together for a precision, or None when unknown."""
        key = {"mixed_bfloat16": "bf16", "mixed_float16": "fp16"}.get(precision, "fp32")
        per = [f.get("peak_flops", {}).get(key) for f in self.device_facts]
        if self.kind == "cpu":
            # Simulated replicas share one CPU: its peak counts once.
            return per[0] if per and per[0] else None
        if not per or any(p is None for p in per):
            return None
        return float(sum(per)) * self.workers

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "strategy"}
        d["skipped"] = dict(self.skipped)
        d["devices"] = list(self.devices)
        d["device_facts"] = [dict(f) for f in self.device_facts]
        return d

    def describe(self) -> str:
        """A few lines a person can read: what was found, what was skipped and why."""
        what = f"{self.kind.upper()}"
        if self.simulated:
            what += f" with {self.replicas} simulated replicas (logical CPU devices)"
        elif self.kind != "cpu" or self.replicas > 1:
            what += f", {self.replicas} replica{'s' if self.replicas != 1 else ''}"
        if self.workers > 1:
            what += f" on {self.workers} workers"
        names = sorted({f.get("name", "") for f in self.device_facts if f.get("name")})
        lines = [f"Connected: {what} ({self.backend}; {', '.join(names) or 'devices: ' + ', '.join(self.devices)})"]
        lines.append(f"Precision: {self.precision} recommended; {self.precision_reason}")
        for kind, why in self.skipped:
            lines.append(f"Skipped {kind.upper()}: {why}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# Module state: the last runtime (so connecting again with the same arguments is free).
_lock = threading.Lock()
_current: Optional[Runtime] = None
_current_key: Optional[tuple] = None


def current() -> Optional[Runtime]:
    """The runtime of the last successful `connect()` in this process, if any."""
    return _current


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
    from tpukit.config import ACCELERATORS

    if accelerator not in ACCELERATORS:
        raise ValueError(
            f"Unknown accelerator {accelerator!r}. Choices: {', '.join(ACCELERATORS)}."
        )
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1):
        raise ValueError(f"replicas must be a positive integer or None. Received: replicas={replicas!r}.")
    if timeout is not None:
        _check_timeout(timeout, "timeout")
    from tpukit.hardware import backend as backends

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


# ---- TPU -------------------------------------------------------------------
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
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("tensorflow-tpu", "tensorflow", "tensorflow-cpu", "tf-nightly"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def tpu_timeout(timeout: Optional[float] = None) -> float:
    """Seconds to wait for a TPU: `timeout` if given, else TPUKIT_TPU_TIMEOUT, else 30."""
    if timeout is not None:
        return _check_timeout(timeout, "timeout")
    text = os.environ.get("TPUKIT_TPU_TIMEOUT", "").strip()
    if not text:
        return TPU_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    return _check_timeout(value, "TPUKIT_TPU_TIMEOUT", shown=text)


def _check_timeout(value, name: str, shown=None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"{name}: expected a positive number of seconds. "
                         f"Received: {name}={shown if shown is not None else value!r}.")
    return float(value)


class _TookTooLong(Exception):
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


def _connect_tpu(tpu, tpu_resolver, skipped, timeout=None) -> Runtime:
    address = tpu_address(tpu)
    if address is None:
        raise ConnectError(
            "no TPU found (COLAB_TPU_ADDR and TPU_NAME are unset and this is not a TPU VM)"
        )
    seconds = tpu_timeout(timeout)
    deadline = time.monotonic() + seconds
    _probe_tpu(address, seconds)
    import tensorflow as tf

    make = tpu_resolver or (lambda a: tf.distribute.cluster_resolver.TPUClusterResolver(tpu=a))
    step = "resolve"
    try:
        # Reaching the TPU: the resolver (a Cloud TPU name asks Google's API), then TensorFlow's remote context.
        resolver = _within(deadline - time.monotonic(), lambda: make(address), "tpu-resolve")
        if address != "local":
            step = "reach"
            _within(deadline - time.monotonic(), lambda: tf.config.experimental_connect_to_cluster(resolver),
                    "tpu-connect")

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
    return Runtime(
        backend="tensorflow",
        kind="tpu",
        devices=devices,
        replicas=strategy.num_replicas_in_sync,
        strategy=strategy,
        device_facts=facts,
        precision="mixed_bfloat16",
        precision_reason="TPU matrix units compute in bfloat16; variables stay float32.",
        skipped=skipped,
    )


def _tpu_timed_out(address: str, step: str, seconds: float) -> ConnectError:
    """The error for a TPU step that did not end in time; TensorFlow's own steps leave it stuck."""
    if step == "resolve":
        return ConnectError(
            f"TPU '{address}' could not be resolved within {seconds:g} s. Check the name and the network, "
            + _wait_hint(seconds))
    what = "did not answer" if step == "reach" else "was not initialized"
    return RestartRequired(
        f"TPU '{address}' {what} within {seconds:g} s, and TensorFlow stays blocked waiting for it: "
        "check the address, restart the runtime (Colab: Runtime > Restart session) and connect again, "
        + _wait_hint(seconds))


def _explain_tpu_failure(address: str, error: Exception) -> str:
    text = str(error)
    if "ConfigureDistributedTPU" in text or "TPUs not found" in text:
        return (
            f"TPU '{address}' could not be initialized: this TensorFlow build has no TPU support. "
            "On Colab's TPU runtime (a TPU VM with JAX) use the JAX backend of Keras instead."
        )
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return f"TPU '{address}' could not be initialized: {first[:300]}"


_TPU_TYPES = (("v2", "TPU v2"), ("v3", "TPU v3"), ("v4", "TPU v4"), ("v5litepod", "TPU v5e"),
              ("v5e", "TPU v5e"), ("v5p", "TPU v5p"), ("v6e", "TPU v6e"))


def tpu_type_from_kind(device_kind: str) -> str:
    """JAX's device_kind ('TPU v2', 'TPU v5 lite', 'TPU v6 lite') as a PEAK_FLOPS key."""
    kind = device_kind.replace(" lite", "e").strip()
    return kind if kind in PEAK_FLOPS else "TPU"


def _tpu_type(resolver) -> str:
    """The TPU generation from TPU_ACCELERATOR_TYPE (e.g. 'v2-8', 'v5litepod-1'), for its datasheet peak."""
    accel = os.environ.get("TPU_ACCELERATOR_TYPE", "").lower()
    return next((name for prefix, name in _TPU_TYPES if accel.startswith(prefix)), "TPU")


# ---- GPU -------------------------------------------------------------------
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
    strategy = mirrored(logical)
    precision, reason = _gpu_precision(facts)
    return Runtime(
        backend="tensorflow",
        kind="gpu",
        devices=tuple(logical),
        replicas=strategy.num_replicas_in_sync,
        strategy=strategy,
        device_facts=tuple(facts),
        precision=precision,
        precision_reason=reason,
        skipped=skipped,
    )


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
    set gets its own range of group keys, through the class attribute that
    MirroredStrategy reads once, when it is made.
    """
    import tensorflow as tf

    key = tuple(devices)
    if key not in _mirrored:
        cls = tf.distribute.MirroredStrategy
        base = getattr(cls, "_collective_key_base", None)
        if base is not None:
            cls._collective_key_base = base + _GROUP_KEYS_PER_STRATEGY * len(_mirrored)
        try:
            _mirrored[key] = cls(devices=list(key))
        finally:
            if base is not None:
                cls._collective_key_base = base
    return _mirrored[key]


_GROUP_KEYS_PER_STRATEGY = 10_000  # a strategy uses a few group keys (one per device group); far fewer than this


# ---- CPU -------------------------------------------------------------------
def configure_cpu_replicas(n: int) -> int:
    """Split the CPU into at least `n` logical devices; returns how many there are.

    Must run before TensorFlow initializes its devices (before any op).
    Asking again for up to the configured number changes nothing.
    """
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    existing = tf.config.get_logical_device_configuration(cpu)
    if existing and len(existing) >= n:
        return len(existing)
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError:
        have = len(tf.config.list_logical_devices("CPU"))
        if have >= n:
            return have
        raise RestartRequired(
            f"replicas={n} needs {n} logical CPU devices, but TensorFlow already started with {have}. "
            "Restart the runtime (Colab: Runtime > Restart session) and connect before any other TensorFlow work."
        ) from None
    return n


def _connect_cpu(replicas, skipped) -> Runtime:
    import tensorflow as tf

    if replicas and replicas > 1:
        configure_cpu_replicas(replicas)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    if replicas and replicas > 1:
        devices = devices[:replicas]
        strategy = mirrored(devices)
    else:
        devices = devices[:1]
        strategy = tf.distribute.get_strategy()
    facts = tuple(_cpu_facts() for _ in devices)
    precision, reason = _cpu_precision()
    return Runtime(
        backend="tensorflow",
        kind="cpu",
        devices=tuple(devices),
        replicas=len(devices),
        strategy=strategy,
        simulated=bool(replicas and replicas > 1),
        device_facts=facts,
        precision=precision,
        precision_reason=reason,
        skipped=skipped,
    )


def _cpu_facts() -> Dict[str, Any]:
    probe = cpu_probe()
    return {"name": probe["cpu"], "peak_flops": {"fp32": probe["fp32_flops"], "bf16": probe["bf16_flops"], "fp16": None}}


def _cpu_precision() -> Tuple[str, str]:
    """bfloat16 when this CPU's measured bf16 matmuls beat float32 by more than 20%."""
    probe = cpu_probe()
    speedup = probe["bf16_flops"] / probe["fp32_flops"]
    if speedup > 1.2:
        return "mixed_bfloat16", f"measured here: bfloat16 matmuls run {speedup:.1f}x faster than float32 on this CPU."
    return "float32", f"measured here: bfloat16 matmuls run at {speedup:.1f}x float32 speed, no gain on this CPU."


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
    from tpukit.hardware import backend

    if backend.loaded() == "jax" or os.environ.get("KERAS_BACKEND") == "jax" or not backend.installed("tensorflow"):
        return "jax"
    return "tensorflow"


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
    import platform

    return platform.processor() or "CPU"


# ---- multi-worker ----------------------------------------------------------
def _connect_multi_worker(accelerator, replicas) -> Runtime:
    """MultiWorkerMirroredStrategy from TF_CONFIG: synchronous data parallelism across processes."""
    import tensorflow as tf

    try:
        cluster = json.loads(os.environ["TF_CONFIG"])
        workers = len(cluster["cluster"]["worker"])
        task = cluster["task"]
    except (ValueError, KeyError, TypeError) as e:
        raise ConnectError(f"TF_CONFIG is not a valid cluster spec with a 'worker' list and a 'task': {e}") from None
    if accelerator == "tpu":
        raise ConnectError("TF_CONFIG describes a multi-worker cluster; TPU pods use accelerator='tpu' without TF_CONFIG")
    gpus = tf.config.list_physical_devices("GPU")
    kind = "gpu" if gpus and accelerator != "cpu" else "cpu"
    cpus = replicas if kind == "cpu" and replicas and replicas > 1 else 1
    if cpus > 1:
        configure_cpu_replicas(cpus)
    strategy = _multi_worker_strategy(cpus)
    devices = tuple(strategy.extended.worker_devices)
    facts: tuple = ()
    precision, reason = "float32", "multi-worker CPU cluster: float32."
    if kind == "cpu":
        facts = (_cpu_facts(),)
    return Runtime(
        backend="tensorflow",
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
        skipped=(),
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
    from tensorflow.python.distribute import collective_all_reduce_strategy as impl

    cls = getattr(impl, "CollectiveAllReduceExtended", None)
    original = getattr(cls, "_initialize_local_devices", None)
    if original is None:
        raise ConnectError(f"replicas={cpus} per worker needs simulated CPU devices under "
                           f"MultiWorkerMirroredStrategy, which this TensorFlow ({tf.__version__}) does not let tpukit "
                           "set; use replicas=1 per worker (one CPU device each).")

    def local_devices(self, resolver, worker_device):
        devices, kind = original(self, resolver, worker_device)
        if kind == "CPU":
            devices = tuple(f"{worker_device}/device:CPU:{i}" for i in range(cpus))
        return devices, kind

    cls._initialize_local_devices = local_devices
    try:
        return tf.distribute.MultiWorkerMirroredStrategy()
    finally:
        cls._initialize_local_devices = original


# ---- JAX backend -----------------------------------------------------------
def _xla_flag(flag: str) -> None:
    """Add an XLA flag (read once, when JAX starts its backends)."""
    name = flag.split("=")[0]
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if f.split("=")[0] != name]
    os.environ["XLA_FLAGS"] = " ".join(flags + [flag])


def processes() -> int:
    """How many processes train together, from Keras' own variables (`python -m tpukit launch` sets them)."""
    try:
        return max(1, int(os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES") or 1))
    except ValueError:
        raise ConnectError(f"KERAS_DISTRIBUTION_NUM_PROCESSES must be a whole number. Received: "
                           f"{os.environ.get('KERAS_DISTRIBUTION_NUM_PROCESSES')!r}.") from None


_initialized = False


def _join_processes(count: int) -> None:
    """Join the other processes once: keras.distribution.initialize, which calls jax.distributed.initialize with
    KERAS_DISTRIBUTION_JOB_ADDRESSES (the coordinator), _NUM_PROCESSES and _PROCESS_ID. On the CPU the
    collectives are gloo's (JAX's default since 0.5.1)."""
    global _initialized
    if _initialized:
        return
    import keras

    # On a Cloud TPU pod slice JAX finds the coordinator and its own id from the TPU's metadata; elsewhere
    # KERAS_DISTRIBUTION_JOB_ADDRESSES and _PROCESS_ID say them (python -m tpukit launch sets all three).
    where = os.environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES") or "the TPU's metadata"
    try:
        keras.distribution.initialize()
    except Exception as e:  # a coordinator that never answers, a bad address, no TPU metadata
        raise ConnectError(f"could not join the {count} processes through {where}: "
                           f"{str(e).splitlines()[0][:200]} (off a Cloud TPU pod, set KERAS_DISTRIBUTION_JOB_ADDRESSES "
                           "and KERAS_DISTRIBUTION_PROCESS_ID, or use python -m tpukit launch)") from None
    _initialized = True


class OneDevice:
    """JAX on one device, with no `keras.distribution`: the strategy a single chip (Colab's v5e-1, v6e-1), one GPU
    or the plain CPU gets.

    `DataParallel` over one device gives nothing and costs: Keras 3 then compiles `train_step` three times (the
    first step's uncommitted variables, the committed state after it, the metrics reset at the next epoch) and
    ran at 0.72 of no distribution (docs/decisions.md). `scope()` matches the distributions' so code written
    for any runtime (`with runtime.strategy.scope(): ...`) runs here unchanged.
    """

    def __init__(self, device):
        self.device = device

    def scope(self):
        return contextlib.nullcontext()

    def __repr__(self):
        return f"OneDevice({self.device})"


def _connect_jax(accelerator, replicas, deterministic, why) -> Runtime:
    """Devices from JAX: data parallelism with keras.distribution.DataParallel over every process's devices, or
    `OneDevice` (no distribution) where there is one."""
    if replicas and replicas > 1 and accelerator in ("auto", "cpu"):
        _xla_flag(f"--xla_force_host_platform_device_count={replicas}")
    if deterministic:
        _xla_flag("--xla_gpu_deterministic_ops=true")
    count = processes()
    if count > 1:
        _join_processes(count)
    import jax
    import keras

    try:
        devices = jax.devices() if accelerator == "auto" else jax.devices(accelerator)
    except RuntimeError as e:
        raise ConnectError(f"JAX sees no {accelerator.upper()}: {str(e).splitlines()[0][:200]}") from None
    kind = {"cuda": "gpu", "rocm": "gpu"}.get(devices[0].platform, devices[0].platform)
    if count > 1:  # replicas: each process's own devices; the run trains on all of them
        local = [d for d in devices if d.process_index == jax.process_index()]
        if replicas and len(local) < replicas:
            raise RestartRequired(f"replicas={replicas} per process, but this process has {len(local)} "
                                  f"{kind.upper()} device(s).")
    elif replicas:
        if len(devices) < replicas:
            raise RestartRequired(
                f"replicas={replicas} but JAX started with {len(devices)} {kind.upper()} device(s). "
                "Restart the runtime and connect with replicas first (JAX fixes its CPU device count "
                "when it starts)." if kind == "cpu" else
                f"replicas={replicas} but JAX sees only {len(devices)} {kind.upper()} device(s)."
            )
        devices = devices[:replicas]
    # Facts of this process's devices (peak_flops multiplies them by the workers).
    facts = tuple(_jax_facts(d, kind) for d in devices if count == 1 or d.process_index == jax.process_index())
    if kind == "tpu":
        precision, reason = "mixed_bfloat16", "TPU matrix units compute in bfloat16; variables stay float32."
    elif kind == "gpu":
        precision, reason = _gpu_precision(facts)
    else:
        precision, reason = _cpu_precision()
    others = [k for k in KINDS if k != kind]
    skipped = tuple((k, f"JAX sees no {k.upper()} device") for k in others[: KINDS.index(kind)])
    if count == 1 and len(devices) == 1:
        distribution = OneDevice(devices[0])
    else:
        distribution = keras.distribution.DataParallel(devices=devices)
    if count > 1:
        distribution.auto_shard_dataset = False  # tpukit's feeders give each process its share of every batch
    return Runtime(
        backend="jax",
        kind=kind,
        devices=tuple(str(d) for d in devices),
        replicas=len(devices),
        strategy=distribution,
        simulated=kind == "cpu" and len(devices) > 1,
        workers=count,
        process_index=jax.process_index() if count > 1 else 0,
        device_facts=facts,
        precision=precision,
        precision_reason=f"{reason} (Backend: JAX, {why}.)",
        skipped=skipped,
    )


def _jax_facts(device, kind) -> Dict[str, Any]:
    name = getattr(device, "device_kind", kind)
    if kind == "tpu":
        return {"name": name, "tpu_type": tpu_type_from_kind(name),
                "peak_flops": PEAK_FLOPS.get(tpu_type_from_kind(name), {})}
    if kind == "gpu":
        cc = getattr(device, "compute_capability", None)
        cc = [int(p) for p in str(cc).split(".")] if cc else None
        peak = next((v for k, v in PEAK_FLOPS.items() if k.lower() in name.lower()), {})
        return {"name": name, "compute_capability": cc, "peak_flops": peak}
    return _cpu_facts()
