"""What `connect()` is asked (`Request`), what it returns (a `Runtime`: the hardware path), and its two errors.

Every discovery path (tpu, gpu, cpu, jax_devices, tf_multiworker) takes a `Request` and returns a
`Runtime` of its path's class: `TensorFlowRuntime` (TensorFlow on a TPU, GPUs or the CPU, one process; here),
`MultiWorkerRuntime` (TensorFlow across processes; `tf_multiworker`) or `JaxRuntime` (`jax_devices`). What differs
between paths is answered by the object's methods (how fit and evaluate run, how data is sharded and fed, the
ceiling for steps per execution, Keras' jit default, the precisions it takes, the callbacks it adds), so code above
`hardware/` never asks which kind, backend or worker count it runs on. A caller that only reads a `Runtime` (the
panel, run records) or catches a `ConnectError` loads no discovery code.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple

from tpukit import precision as precisions
from tpukit.errors import TpukitError


@dataclasses.dataclass(frozen=True)
class Request:
    """`connect()`'s arguments, checked, with the Keras backend already chosen (`backend`, and why)."""

    accelerator: str = "auto"
    backend: str = "tensorflow"
    backend_reason: str = ""
    tpu: Optional[str] = None
    replicas: Optional[int] = None
    deterministic: bool = False
    tpu_resolver: Optional[Callable[[str], Any]] = None
    timeout: Optional[float] = None


class ConnectError(TpukitError, RuntimeError):
    """The asked-for accelerator cannot be used; the message says why and what to do."""

    topic = "cannot connect"


class RestartRequired(ConnectError):
    """Restart the runtime first: a setting TensorFlow fixes at start-up is needed, or TensorFlow is stuck waiting."""


# "auto" runs at most this many steps per execution: enough to amortize the host's dispatch of each call
# (measured: benchmarks/steps_per_execution.py), while callbacks, stop requests and NaN checks still come often.
AUTO_STEPS_PER_EXECUTION = 32
# On the CPU, "auto" runs several steps per call only while a call stays this short (seconds, estimated): Stop,
# progress and callbacks wait for a whole call, and only millisecond steps gain (benchmarks/steps_per_execution.py).
CPU_CALL_SECONDS = 0.05
# A step estimated shorter than this (the model's FLOPs at the CPU's measured peak) keeps Keras' "auto" on a
# TensorFlow CPU: XLA's compile costs a second or two there, more than such a step's 16-bit math wins back in a
# workshop-sized run (the zoo mlp on digits: the same speed either way, 2.3 s more before its first step).
XLA_MIN_STEP_SECONDS = 0.01
# XLA is turned on where the CPU probe measured it this much faster than TensorFlow's kernels (the geometric mean
# of the matmul's and the conv gradients' ratios), the margin "auto" precision asks of bfloat16 too.
XLA_MIN_GAIN = 1.2


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
    backend_reason: str = ""  # why this Keras backend (`tpukit.backend.choose`): KERAS_BACKEND, the config, ...
    strategy_reason: str = ""  # which strategy and why, where there was a choice (TF: one GPU or more; JAX: any)
    # JAX: whether XLA's deterministic GPU ops were on when JAX started (connect(deterministic=True) before it
    # did); None on TensorFlow, whose op determinism a run turns on itself
    xla_deterministic_ops: Optional[bool] = None

    @property
    def skipped_reasons(self) -> Dict[str, str]:
        return dict(self.skipped)

    def peak_flops(self, precision: str) -> Optional[float]:
        """Peak FLOP/s of all replicas together for a precision, or None when unknown."""
        key = precisions.get(precision).key
        per = [f.get("peak_flops", {}).get(key) for f in self.device_facts]
        if self.kind == "cpu":
            # Simulated replicas share one CPU: its peak counts once.
            return per[0] if per and per[0] else None
        if not per or any(p is None for p in per):
            return None
        return float(sum(per)) * self.workers

    def peak_basis(self, precision: str) -> str:
        """What MFU divides by here, in words a reader can check ("" when the peak is unknown): a CPU's peak is
        tpukit's own measurement of its matmuls, an accelerator's the published figure for its chips."""
        peak = self.peak_flops(precision)
        if not peak:
            return ""
        kind = precisions.get(precision).compute  # the dtype the peak is for: float32, bfloat16, float16
        if self.kind == "cpu":
            return f"this CPU's {kind} matmul peak as tpukit's probe measured it ({peak / 1e9:,.1f} GFLOP/s)"
        chips = len(self.device_facts) * self.workers
        return (
            f"the published {kind} peak of {chips} × {self.chip_name or self.kind.upper()} ({peak / 1e12:,.1f} TFLOP/s)"
        )

    def resolve_precision(self, requested: str) -> Tuple[str, str]:
        """(the precision a run asking for `requested` trains under here, why): "auto" is this runtime's
        recommendation.

        Raises:
            ConfigError: a precision this hardware refuses (mixed_float16 on a TPU), or an unknown name.
        """
        from tpukit.config import check_precision

        check_precision(requested, self.kind)
        if requested == "auto":
            return self.precision, self.precision_reason
        return requested, "set by the config"

    # ---- what a run asks of its path ----------------------------------------------------------------------------
    feeder = "tf.data"  # the input pipeline that suits the path (`tpukit.data.pipeline`); TPUKIT_FEEDER may force one
    feeder_fixed = False  # True where no other feeder can serve (several JAX processes cut their own shares)
    counts_compiles = False  # whether the backend reports each compile of the train step (JAX's monitoring events)
    caches_compiles = False  # whether compiled programs can be kept on disk for the next run (JAX's persistent cache)
    # Where determinism comes from: False, TensorFlow's op determinism, switched on in the process by a run; True,
    # XLA's own kernels (deterministic on CPU and TPU, XLA's GPU flag set at connect), so a run switches nothing on
    # and seeds no TensorFlow.
    determinism_by_xla = False

    @property
    def multi_process(self) -> bool:
        """Several processes train as one: only the chief (`process_index` 0) writes the run."""
        return self.workers > 1

    @property
    def lane_width(self) -> Optional[int]:
        """The lanes a TPU tiles an array's minor dimension to (hidden Dense widths pad to it), else None."""
        return 128 if self.kind == "tpu" else None

    @property
    def step_time_caps_calls(self) -> bool:
        """Whether "auto" steps per execution here follow the model's step time (`steps_per_call_cap`): the CPU."""
        return self.kind == "cpu"

    @property
    def chip_name(self) -> Optional[str]:
        """The accelerator's name for a one-line status ("Tesla T4", "TPU v5e"); None on the CPU."""
        names = sorted({f.get("name", "") for f in self.device_facts if f.get("name")})
        return names[0] if names and self.kind != "cpu" else None

    @property
    def device_memory(self) -> Optional[int]:
        """Bytes of memory one device (a replica) has: a TPU's HBM by its generation, a GPU's as it reported it;
        None on the CPU (it trains in host memory) and where unknown."""
        from tpukit.hardware.specs import HBM_BYTES

        if self.kind == "cpu" or not self.device_facts:
            return None
        facts = self.device_facts[0]
        if facts.get("memory_mib"):
            return int(facts["memory_mib"]) * 2**20
        return HBM_BYTES.get(facts.get("tpu_type") or facts.get("name"))

    @property
    def upcasts(self) -> bool:
        """Whether XLA computes 16-bit math in float32 here (the CPU), holding float32 copies (`models.memory`)."""
        return self.kind == "cpu"

    def check(self, config) -> None:
        """ConfigError unless `config` can run here: its backend, and a precision this hardware takes."""
        from tpukit.config import ConfigError

        if config.backend not in ("auto", self.backend):
            raise ConfigError(
                f"RunConfig.backend: the runtime runs {self.backend}, not {config.backend}. "
                f"Received: backend={config.backend!r}.",
                field="backend",
                value=config.backend,
                expected=f"{self.backend!r} or 'auto'",
                choices=("auto", self.backend),
            )
        config.check_for(self.kind, self.replicas)

    def padding_advice(self, config) -> Optional[str]:
        """What the per-replica batch of `config` costs in padding here, or None."""
        return config.padding_advice(self.kind)

    def precision_advice(self, precision: str, deterministic: bool = False) -> Optional[str]:
        """A sentence where `precision` is known (measured) to run slower than float32 here, for the form to show
        before Train; None where nothing says so."""
        return None

    def determinism_refusal(self) -> Optional[str]:
        """Why a deterministic run cannot be deterministic on this runtime (None: it can)."""
        return None

    def for_model(self, source, model_parallel: int) -> Tuple["Runtime", Optional[str]]:
        """(the runtime `source`'s model trains on, a note where it is not what was asked): this one where
        `model_parallel` is 1. Splitting a model's weights over devices is Keras' JAX distribution's
        (`JaxRuntime.for_model`); here it is a one-line ConfigError."""
        if model_parallel == 1:
            return self, None
        from tpukit.config import ConfigError

        raise ConfigError(
            f"RunConfig.model_parallel: splitting a model over devices is Keras' JAX distribution "
            f"(keras.distribution.ModelParallel), and this runtime runs {self.backend}; use "
            f"model_parallel=1 or backend='jax'. Received: model_parallel={model_parallel}.",
            field="model_parallel",
            value=model_parallel,
        )

    def host_reads(self, model, together: bool = True):
        """A context in which `model`'s weights read to the host (the backups, the final weights, the fingerprint),
        which gives whether they can: here always, as they are. `JaxRuntime.host_reads` gathers weights split over
        several processes, which needs them all at this point (`together`)."""
        return contextlib.nullcontext(True)

    @property
    def model_split(self) -> int:
        """Over how many devices each copy of the model is split (`for_model`): 1, data parallelism, here."""
        return 1

    def ends_together(self, status: str) -> bool:
        """Whether every process reaches the end of a run that ended with `status` at the same point, where what
        needs them all (a gather of split weights, a generate over their devices) can run: with one process, and
        with TensorFlow's workers, which agree on the step to stop after, always."""
        return True

    def shard(self) -> Tuple[int, int]:
        """(this process, processes) for the feeds: each process cuts its share of every global batch."""
        return self.process_index, self.workers

    def fit(
        self, model, train, *, validation, epochs: int, initial_epoch: int, steps, callbacks, whole_feed: bool = False
    ):
        """Train `model` (built and compiled in the strategy's scope) as Keras' `fit` does here.

        `steps`: per epoch; `whole_feed`: each epoch runs to the end of the feed instead (batched data with no
        steps_per_epoch set, whose length Keras finds by iterating)."""
        return model.fit(
            train,
            validation_data=validation,
            epochs=epochs,
            initial_epoch=initial_epoch,
            steps_per_epoch=None if whole_feed else steps,
            callbacks=callbacks,
            shuffle=False,
            verbose=0,
        )

    def evaluate(self, model, data) -> Dict[str, float]:
        """`model.evaluate(data)` as a dict of floats."""
        scores = model.evaluate(data, verbose=0, return_dict=True)
        return {k: float(v) for k, v in scores.items()}

    def stopped_elsewhere(self, model) -> bool:
        """Whether another process stopped a run that this one saw end normally."""
        return False

    def callbacks(self) -> list:
        """Keras callbacks this path needs beside tpukit's own."""
        return []

    def multi_step_refusal(self) -> Optional[str]:
        """Why more than one step per execution cannot run here, or None where it can."""
        return None

    def steps_per_call_cap(self, step_seconds) -> Tuple[int, str]:
        """(the most steps per execution "auto" runs here, where and why; a cap under 2 means 1).

        `step_seconds`: a training step's time at the device's peak (a lower bound), a number or a function that
        estimates it, asked only on the CPU; None where unknown. On the CPU a call is held under
        `CPU_CALL_SECONDS`, since a stop request, progress and callbacks wait for a whole call: only millisecond
        steps gain (benchmarks/steps_per_execution.py).
        """
        if self.kind != "cpu":
            return AUTO_STEPS_PER_EXECUTION, f"on {self.kind.upper()}"
        estimate = step_seconds() if callable(step_seconds) else step_seconds
        if estimate is None:
            return 1, (
                "on the CPU: the step's time could not be estimated (the model's FLOPs or the CPU's peak are "
                "unknown), and a stop request, progress and callbacks wait for a whole call"
            )
        cap = min(
            AUTO_STEPS_PER_EXECUTION, int(CPU_CALL_SECONDS / estimate) if estimate > 0 else AUTO_STEPS_PER_EXECUTION
        )
        return cap, (
            f"on the CPU, where a step takes at least {1000 * estimate:.2g} ms (the model's FLOPs at the "
            f"CPU's measured peak) and a call is held under {1000 * CPU_CALL_SECONDS:.0f} ms, since a stop "
            "request, progress and callbacks wait for it"
        )

    def jit_compile(
        self,
        requested,
        policy: str,
        model,
        op_determinism: bool = False,
        step_seconds: Callable[[], Optional[float]] = lambda: None,
    ) -> Tuple[object, Optional[str]]:
        """(jit_compile for `model.compile`, a sentence on why, or None where Keras' own "auto" stands)."""
        return requested, None

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
        if self.backend_reason:
            lines.append(f"Backend: {self.backend} ({self.backend_reason})")
        if self.strategy_reason:
            lines.append(f"Strategy: {self.strategy_reason}")
        lines.append(f"Precision: {self.precision} recommended; {self.precision_reason}")
        for kind, why in self.skipped:
            lines.append(f"Skipped {kind.upper()}: {why}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class TensorFlowRuntime(Runtime):
    """TensorFlow in one process, on a TPU, GPUs or the CPU, under a `tf.distribute` strategy."""

    def multi_step_refusal(self) -> Optional[str]:
        """Checked on TF 2.21 + Keras 3.15 with 8 logical CPU devices: MirroredStrategy over 2 or more devices fails
        in Keras' multi-step loop; over one device and on the default strategy it trains."""
        if self.replicas < 2:
            return None
        import tensorflow as tf

        if isinstance(self.strategy, tf.distribute.MirroredStrategy):
            return (
                f"Keras 3.15 cannot run more than one step per execution under MirroredStrategy with more than "
                f'one replica ({self.replicas} here): its multi-step loop fails with "You must feed a value '
                f'for placeholder tensor"'
            )
        return None

    def precision_advice(self, precision: str, deterministic: bool = False) -> Optional[str]:
        """On the CPU: where the probe measured TensorFlow's own kernels for `precision`'s 16-bit type slower than
        float32 (matmuls or conv gradients), and XLA will not run it instead (op determinism, several replicas or
        processes, or no XLA gain measured), the measured figures and that float32 is likely faster."""
        mode = precisions.find(precision)
        if mode is None or mode is precisions.FLOAT32 or self.kind != "cpu" or not self.device_facts:
            return None
        facts = self.device_facts[0]
        speed = (facts.get("kernel_speed") or {}).get(mode.key)
        if not speed or min(speed.values()) >= 1:
            return None
        gain = (facts.get("xla_gain") or {}).get(mode.key)
        xla_gains = bool(gain) and (gain["matmul"] * gain["conv"]) ** 0.5 > XLA_MIN_GAIN
        if xla_gains and not deterministic and self.replicas == 1 and self.workers == 1:
            return None  # XLA runs it instead (jit_compile), at the speed it measured
        why = (
            "XLA stays off under op determinism"
            if deterministic and xla_gains
            else "XLA stays off over several replicas"
            if xla_gains
            else "XLA was not measured faster"
        )
        return (
            f"{precision} is slow here: TensorFlow's own CPU kernels ran {mode.compute} matmuls at "
            f"{speed['matmul']:.1f}x and conv gradients at {speed['conv']:.1f}x float32's speed "
            f"({facts.get('measured', 'measured here')}), and {why}: float32 is likely faster"
        )

    def jit_compile(
        self,
        requested,
        policy: str,
        model,
        op_determinism: bool = False,
        step_seconds: Callable[[], Optional[float]] = lambda: None,
    ) -> Tuple[object, Optional[str]]:
        """(jit_compile for `model.compile`, a sentence on why, or None where Keras' own "auto" stands).

        Keras' "auto" keeps XLA off on a TensorFlow CPU. Under mixed precision whether that
        is the fast choice depends on the CPU: one AMD EPYC's TensorFlow kernels emulate
        bfloat16 and float16, and the zoo CNN ran 9.5x (mixed_bfloat16) and 4x (mixed_float16)
        faster under XLA; another EPYC runs bfloat16 natively, 1.5x faster than under XLA
        (docs/decisions.md). So "auto" follows what the CPU probe measured on this machine
        (`runtime.device_facts[0]["xla_gain"]`): True where XLA ran the policy's 16-bit type
        more than `XLA_MIN_GAIN` times faster, unless `step_seconds()` (called only on a
        TensorFlow CPU under mixed precision; None when unknown) is under
        `XLA_MIN_STEP_SECONDS`. XLA cannot run MirroredStrategy's variables across CPU
        devices, and Keras keeps it off under op determinism (`op_determinism`: on in this
        process, which a deterministic run leaves on) and for a layer with
        `supports_jit=False`; there it stays off, and the sentence says so.
        """
        if requested != "auto" or policy == precisions.FLOAT32.name or self.kind != "cpu":
            return requested, None
        estimate = step_seconds()
        if estimate is not None and estimate < XLA_MIN_STEP_SECONDS:
            return requested, None
        facts = self.device_facts[0] if self.device_facts else {}
        mode = precisions.get(policy)
        gain = (facts.get("xla_gain") or {}).get(mode.key)
        if not gain:
            return requested, None
        measured = (
            f"{facts.get('measured', 'measured here')}, XLA ran {mode.compute} matmuls at "
            f"{gain['matmul']:.1f}x and conv gradients at {gain['conv']:.1f}x the speed of TensorFlow's own CPU kernels"
        )
        if (gain["matmul"] * gain["conv"]) ** 0.5 <= XLA_MIN_GAIN:
            return requested, f"Keras' auto (off on a CPU): {measured}, so XLA would not gain"
        slow = f"{policy} runs on TensorFlow's own CPU kernels ({measured}; float32 may be the faster choice here)"
        if self.replicas > 1 or self.workers > 1:
            return requested, (
                f"XLA stays off: it cannot compile MirroredStrategy's variables across CPU devices, so {slow}"
            )
        layers = getattr(model, "_flatten_layers", None)
        unsupported = [layer.name for layer in (layers() if layers else ()) if not getattr(layer, "supports_jit", True)]
        if unsupported:
            return requested, f"XLA stays off: layer {unsupported[0]!r} does not support it, so {slow}"
        if op_determinism:
            return requested, (
                f"XLA stays off under TensorFlow's op determinism (RunConfig.deterministic, or a "
                f"deterministic run earlier in this process), so {slow}"
            )
        return True, f"on (XLA): {measured}; RunConfig.jit_compile=False turns it off"
