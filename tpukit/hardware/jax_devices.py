"""Keras on JAX: JAX's devices, the processes that train together, and the distribution over them.

The JAX path of `connect()`: XLA flags set before JAX starts, `keras.distribution.initialize`
across processes, and `keras.distribution.DataParallel` (or `OneDevice` on one device) in the
place of a tf.distribute strategy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from typing import Any, Dict, Optional, Tuple

from tpukit.hardware import cpu, gpu, tpu
from tpukit.hardware.runtime import ConnectError, Request, RestartRequired, Runtime
from tpukit.hardware.specs import KINDS, PEAK_FLOPS, tpu_type_from_kind

KIND = None  # any kind: the one JAX finds


@dataclasses.dataclass(frozen=True)
class JaxRuntime(Runtime):
    """Keras on JAX over whatever JAX finds: `keras.distribution` in the place of a tf.distribute strategy, fed by
    NumPy (no TensorFlow needed, as on Colab's TPU runtime), each compile of the train step reported by JAX."""

    feeder = "numpy"
    counts_compiles = True
    caches_compiles = True
    determinism_by_xla = True

    @property
    def feeder_fixed(self) -> bool:
        """Several JAX processes take NumPy whatever TPUKIT_FEEDER says: each cuts its own share of every batch."""
        return self.multi_process

    def determinism_refusal(self) -> Optional[str]:
        """XLA reads its deterministic-ops flag once, when JAX starts: a GPU started without it cannot have it."""
        if self.kind != "gpu" or self.xla_deterministic_ops:
            return None
        return (
            "this JAX runtime started its GPU without XLA's deterministic ops, and XLA reads that flag only when "
            "JAX starts: restart the runtime, then call tpukit.connect(deterministic=True) (in the panel: tick "
            "deterministic before connecting) before anything uses JAX"
        )

    def callbacks(self) -> list:
        """Over several simulated CPU devices, a callback that waits for each call's steps (`SyncSteps`)."""
        return [_sync_steps()] if self.kind == "cpu" and len(self.devices) > 1 else []

    def for_model(self, source, model_parallel: int) -> Tuple[Runtime, Optional[str]]:
        """With `model_parallel` > 1, the devices as a mesh of (batch, model) = (devices / model_parallel,
        model_parallel), the model's weights laid out over its "model" axis by the model's own layout map
        (`source.layout_map(mesh)`: a KerasHub preset's backbone `get_layout_map`), under
        `keras.distribution.ModelParallel`; the global batch is then split over the "batch" axis alone. A model
        with no layout map trains with data parallelism over all the devices, and the note says so.

        Over several processes each copy of the model is split within one process (`model_parallel` divides the
        devices each has), the mesh's rows taken process by process: each process's devices then hold whole rows
        of the batch axis, which its feeder's share of every batch fills. Its weights are read through
        `host_reads`."""
        if model_parallel == 1:
            return self, None
        import keras

        from tpukit.config import ConfigError

        count = len(self.devices)
        local = count // self.workers
        if local % model_parallel:
            divisors = [d for d in range(1, local + 1) if local % d == 0]
            where = (
                f"each of the {self.workers} processes' {local}" if self.multi_process else f"this process's {local}"
            )
            raise ConfigError(
                f"RunConfig.model_parallel: expected one of {divisors} (a divisor of {where} "
                f"{self.kind.upper()} devices, over which one copy of the model is split). "
                f"Received: model_parallel={model_parallel}.",
                field="model_parallel",
                value=model_parallel,
                choices=tuple(divisors),
            )
        devices = getattr(getattr(self.strategy, "device_mesh", None), "devices", None)
        if devices is not None:  # process by process: a row of the mesh (one copy of the model) in one process
            devices = sorted(devices.flatten(), key=lambda d: (getattr(d, "process_index", 0), getattr(d, "id", 0)))
        mesh = keras.distribution.DeviceMesh((count // model_parallel, model_parallel), ("batch", "model"), devices)
        layout, named = source.layout_map(mesh)
        if layout is None:
            return self, (
                f"model_parallel={model_parallel}: {named} has no layout map, so the model trains with "
                f"data parallelism over all {count} devices"
            )
        distribution = keras.distribution.ModelParallel(layout_map=layout, batch_dim_name="batch")
        distribution.auto_shard_dataset = not self.multi_process  # as in `connect`: the feeders cut the shares
        reason = (
            f"keras.distribution.ModelParallel over {count} {self.kind.upper()} devices"
            + (f" in {self.workers} processes" if self.multi_process else "")
            + f", a mesh of batch {count // model_parallel} x model {model_parallel}: the weights laid out by "
            f"{named}, the global batch split over the batch axis"
        )
        return dataclasses.replace(
            self, strategy=distribution, replicas=count // model_parallel, strategy_reason=reason
        ), None

    @property
    def model_split(self) -> int:
        """The devices (every process's) over the copies of the model: `model_parallel` where it was applied."""
        return max(1, len(self.devices) // self.replicas)

    def host_reads(self, model, together: bool = True):
        """Over several processes, `host_copies(model, together)`: a weight split over their devices is gathered."""
        return host_copies(model, together) if self.multi_process else contextlib.nullcontext(True)

    def ends_together(self, status: str) -> bool:
        """Several processes end together only when the run completed: each sees a stop request, SIGTERM or Ctrl-C
        after its own step, and a process that ended first while the others wait in a step's all-reduce would wait
        for them forever in a gather."""
        return status == "completed" or not self.multi_process


@contextlib.contextmanager
def host_copies(model, together: bool = True):
    """While open, each of `model`'s variables (its optimizer's too) whose value is split over devices of several
    processes reads as one NumPy array, gathered from every process by JAX (`multihost_utils.process_allgather`);
    at exit the split value is back. Gives whether the weights can be read: not where some are split and the other
    processes are not at this point too (`together` False: a run that stopped), where nothing is gathered.

    Why: JAX fetches an array that spans other processes' devices only when every device holds all of it
    (replicated, as under data parallelism). Under `ModelParallel` the weights are split, over the "model" axis and,
    by KerasHub's layout maps, over the "batch" axis too (which spans the processes), so each read of Keras' and
    KerasHub's (`get_weights`, `save_weights`, `save_lora_weights`) and tpukit's (backups, the fingerprint) would
    fail in every process. The gather is a collective: every process opens this at the same points of the run (the
    backups of whole epochs, the end), as every process runs the same callbacks; each gets the same values. Only
    Keras' private slot for a variable's value (`_value`, in Keras 3.13 and 3.15) is swapped, for the reads.
    """
    import jax
    from jax.experimental import multihost_utils

    split = [
        v
        for v in _variables(model)
        if isinstance(getattr(v, "_value", None), jax.Array)
        and not v._value.is_fully_addressable
        and not v._value.is_fully_replicated
    ]
    if split and not together:
        yield False
        return
    swapped = []
    try:
        for v in split:
            value = v._value
            gathered = multihost_utils.process_allgather(value, tiled=True)
            swapped.append((v, value))
            v._value = gathered
        yield True
    finally:
        for v, value in swapped:
            v._value = value


def _variables(model) -> list:
    """`model`'s variables and its optimizer's, each once, in the same order in every process."""
    optimizer = getattr(model, "optimizer", None)
    found = {id(v): v for v in list(model.variables) + list(getattr(optimizer, "variables", None) or [])}
    return list(found.values())


def _sync_steps():
    """Waits for every simulated device to finish a call before Keras dispatches the next: JAX over several
    simulated CPU devices only.

    There XLA's CPU collectives can deadlock when one call's all-reduce is still running on some devices while the
    next call starts on others ("Expected 8 threads to join the rendezvous, but only 6 of them arrived", then a
    fatal 40 s timeout). Plain JAX does it too (jax 0.7.2 and 0.10.2 on 2 cores: a jitted step with a psum over 8
    devices, dispatched in a loop, stopped within seconds; with `block_until_ready` after each step, 20000 steps
    ran). Reading the logs is not enough: a replicated metric is read from one device. So the hook waits for the
    whole state the step returned (Keras keeps it on `model._jax_state` for callbacks that sync it), every shard.
    A step hook that is not `async_safe` also keeps Keras' hooks on the main thread. The simulated devices share
    the host's cores, so waiting costs little: an mlp at 20 steps per call over 8 devices, 400 epochs, took 59.5,
    57.4 and 64.9 s with the wait, against 50.8, 56.1 and 63.7 s with a hook that only kept Keras' hooks on the
    main thread (which CI once saw deadlock); with no hook, the run stopped (2 cores, in turns).
    """
    import jax
    import keras

    class SyncSteps(keras.callbacks.Callback):
        def _wait(self):
            state = getattr(self.model, "_jax_state", None)
            if state:
                jax.block_until_ready(state)

        def on_train_batch_end(self, batch, logs=None):
            self._wait()

        def on_test_batch_end(self, batch, logs=None):
            self._wait()

    return SyncSteps()


def available(request: Request) -> Optional[str]:
    """None when Keras runs on JAX in this process (`tpukit.backend` chose it), else why not."""
    return None if request.backend == "jax" else f"the backend is {request.backend}"


def xla_flag(flag: str) -> None:
    """Add an XLA flag (read once, when JAX starts its backends)."""
    name = flag.split("=")[0]
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if f.split("=")[0] != name]
    os.environ["XLA_FLAGS"] = " ".join(flags + [flag])


def processes() -> int:
    """How many processes train together, from Keras' own variables (`python -m tpukit launch` sets them)."""
    try:
        return max(1, int(os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES") or 1))
    except ValueError:
        raise ConnectError(
            f"KERAS_DISTRIBUTION_NUM_PROCESSES must be a whole number. Received: "
            f"{os.environ.get('KERAS_DISTRIBUTION_NUM_PROCESSES')!r}."
        ) from None


_initialized = False
DETERMINISTIC_OPS = "--xla_gpu_deterministic_ops=true"
_started_with: Optional[str] = None  # XLA_FLAGS as JAX's backends read them when they started (`_note_start`)


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
        raise ConnectError(
            f"could not join the {count} processes through {where}: "
            f"{str(e).splitlines()[0][:200]} (off a Cloud TPU pod, set KERAS_DISTRIBUTION_JOB_ADDRESSES "
            "and KERAS_DISTRIBUTION_PROCESS_ID, or use python -m tpukit launch)"
        ) from None
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


def connect(request: Request, skipped=()) -> JaxRuntime:
    """Devices from JAX: data parallelism with keras.distribution.DataParallel over every process's devices, or
    `OneDevice` (no distribution) where there is one. `skipped` is empty (this path comes first); the kinds JAX
    does not see are added."""
    accelerator, replicas = request.accelerator, request.replicas
    _note_start(starting=False)
    if replicas and replicas > 1 and accelerator in ("auto", "cpu"):
        xla_flag(f"--xla_force_host_platform_device_count={replicas}")
    if request.deterministic:
        xla_flag(DETERMINISTIC_OPS)
    count = processes()
    if count > 1:
        _join_processes(count)
    import jax
    import keras

    _note_start(starting=True)
    try:
        devices = jax.devices() if accelerator == "auto" else jax.devices(accelerator)
    except RuntimeError as e:
        raise ConnectError(f"JAX sees no {accelerator.upper()}: {str(e).splitlines()[0][:200]}") from None
    kind = {"cuda": "gpu", "rocm": "gpu"}.get(devices[0].platform, devices[0].platform)
    if count > 1:  # replicas: each process's own devices; the run trains on all of them
        local = [d for d in devices if d.process_index == jax.process_index()]
        if replicas and len(local) < replicas:
            raise RestartRequired(
                f"replicas={replicas} per process, but this process has {len(local)} {kind.upper()} device(s)."
            )
    elif replicas:
        if len(devices) < replicas:
            raise RestartRequired(
                f"replicas={replicas} but JAX started with {len(devices)} {kind.upper()} device(s). "
                "Restart the runtime and connect with replicas first (JAX fixes its CPU device count "
                "when it starts)."
                if kind == "cpu"
                else f"replicas={replicas} but JAX sees only {len(devices)} {kind.upper()} device(s)."
            )
        devices = devices[:replicas]
    # Facts of this process's devices (peak_flops multiplies them by the workers).
    facts = tuple(_jax_facts(d, kind) for d in devices if count == 1 or d.process_index == jax.process_index())
    if kind == "tpu":
        precision, reason = tpu.precision()
    elif kind == "gpu":
        precision, reason = gpu.precision(facts)
    else:
        precision, reason = cpu.precision()
    others = [k for k in KINDS if k != kind]
    skipped = tuple(skipped) + tuple((k, f"JAX sees no {k.upper()} device") for k in others[: KINDS.index(kind)])
    if count == 1 and len(devices) == 1:
        distribution = OneDevice(devices[0])
        strategy_reason = (
            f"one {kind.upper()} device, no keras.distribution, as plain Keras on JAX runs it "
            "(DataParallel over one device would compile train_step three times)"
        )
    else:
        distribution = keras.distribution.DataParallel(devices=devices)
        strategy_reason = (
            f"keras.distribution.DataParallel over {len(devices)} {kind.upper()} devices"
            + (f" in {count} processes" if count > 1 else "")
            + ": each takes its share of the global batch, and XLA all-reduces the gradients"
        )
    if count > 1:
        distribution.auto_shard_dataset = False  # tpukit's feeders give each process its share of every batch
    return JaxRuntime(
        backend="jax",
        backend_reason=request.backend_reason,
        kind=kind,
        devices=tuple(str(d) for d in devices),
        replicas=len(devices),
        strategy=distribution,
        strategy_reason=strategy_reason,
        simulated=kind == "cpu" and len(devices) > 1,
        workers=count,
        process_index=jax.process_index() if count > 1 else 0,
        device_facts=facts,
        precision=precision,
        precision_reason=reason,
        xla_deterministic_ops=DETERMINISTIC_OPS in _started_with.split(),
        skipped=skipped,
    )


def _note_start(starting: bool) -> None:
    """Keep XLA_FLAGS as JAX's backends read them, once: as tpukit is `starting` them (its first `jax.devices`),
    or earlier, where the user's own JAX code started them first (then tpukit's flags come too late).

    tpukit's one use of a private JAX API: `jax._src.xla_bridge.backends_are_initialized` (JAX 0.7.2, 0.10).
    Where it is gone, the flags are kept as tpukit starts JAX, which misses a start by the user's code."""
    global _started_with
    if _started_with is not None:
        return
    if starting or ("jax" in sys.modules and _backends_started()):
        _started_with = os.environ.get("XLA_FLAGS", "")


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return False


def _memory_mib(device) -> Optional[int]:
    """The memory JAX may allocate on `device` (its memory stats' bytes_limit), in MiB, or None."""
    try:
        limit = (device.memory_stats() or {}).get("bytes_limit")
    except Exception:  # a platform without memory stats
        return None
    return int(limit) // 2**20 if limit else None


def _jax_facts(device, kind) -> Dict[str, Any]:
    name = getattr(device, "device_kind", kind)
    if kind == "tpu":
        return {
            "name": name,
            "tpu_type": tpu_type_from_kind(name),
            "peak_flops": PEAK_FLOPS.get(tpu_type_from_kind(name), {}),
        }
    if kind == "gpu":
        cc = getattr(device, "compute_capability", None)
        return gpu.facts(name, str(cc) if cc else None, _memory_mib(device))
    return cpu.facts()
