"""The shape of a run, decided before it starts: its global batch, steps per epoch and steps per execution.

The one place for these derived values: `train()`, the panel (its progress bar and profile window) and the CLI
ask here, never compute them again. The global batch itself is `RunConfig.global_batch(replicas)`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from tpukit.config import ConfigError, RunConfig, window_fits
from tpukit.data import pipeline, sources


@dataclasses.dataclass(frozen=True)
class Plan:
    """A run's shape before it starts: the global batch, and the steps per epoch (None: only the run can count
    them, as for a tf.data input of unknown length)."""

    global_batch: int
    steps_per_epoch: Optional[int]


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """What a run decided before its first step, made once: everything after it reads this, never the choices again.

    `config` is the user's RunConfig with each "auto" and each unset value resolved for the hardware (backend,
    replicas, precision, steps_per_execution, jit_compile; a non-chief process's logdir): what the model compiles
    with and what config.json records, so a resume runs the same. The user's own config is left as written.
    """

    config: RunConfig
    steps_per_epoch: Optional[int]
    precision_reason: str


def resolve(
    config: RunConfig,
    runtime,
    *,
    policy: str,
    precision_reason: str,
    steps: Optional[int],
    steps_per_execution,
    jit_compile,
    logdir: str,
) -> RunPlan:
    """The run's plan: `config` with what was decided for `runtime`, in one validated copy.

    `replicas` is recorded as the devices the run trained on, and `model_parallel` as the split it had (1 where a
    model without a layout map trained data parallel), so that a resume, in one process too, connects the same
    devices and lays them out the same: the global batch is then the same (`RunConfig.global_batch_size`)."""
    resolved = config.replace(
        backend=runtime.backend,
        replicas=runtime.replicas * runtime.model_split,
        model_parallel=runtime.model_split,
        precision=policy,
        steps_per_execution=steps_per_execution,
        jit_compile=jit_compile,
        logdir=logdir,
    )
    return RunPlan(resolved, steps, precision_reason)


def steps_per_epoch(config: RunConfig, num_train: int, replicas: int) -> int:
    """The steps in one epoch of `num_train` examples: the config's own, else whole global batches.

    The one place that says it: the trainer (on the loaded data) and `plan` (before loading) both call it.
    """
    return config.steps_per_epoch or pipeline.steps_per_epoch(num_train, config.global_batch(replicas))


def make(config: RunConfig, replicas: int, data=None, validation_data=None) -> Plan:
    """The global batch and steps per epoch a run of `config` on `replicas` will have, without loading the data
    where its size is known (built-in datasets, arrays); for the panel's progress bar and profile window."""
    global_batch = config.global_batch(replicas)
    if config.steps_per_epoch:
        return Plan(global_batch, config.steps_per_epoch)
    available = sources.planned_train_examples(config, data, validation_data)
    if not available or available < global_batch:
        return Plan(global_batch, None)
    return Plan(global_batch, steps_per_epoch(config, available, replicas))


def batches_line(config: RunConfig, replicas: int, available: Optional[int], steps: Optional[int]) -> Optional[str]:
    """Where tpukit's numbers differ from Keras' fit on purpose, said before the epoch lines show them: the batch
    is per replica, and an epoch is whole global batches (None where the training examples are not known).

    `available`: the training examples; `steps`: the steps per epoch (`steps_per_epoch`)."""
    global_batch = config.global_batch(replicas)
    per = (
        f"{config.batch_size} per replica x {replicas} replicas = {global_batch:,} examples per step"
        if replicas > 1
        else f"{global_batch:,} examples per step"
    )
    if config.steps_per_epoch:
        return f"Batches: {per}; {config.steps_per_epoch} steps per epoch (--steps-per-epoch)"
    if not available or not steps:
        return None
    left = available - steps * global_batch
    tail = (
        f"; {left} are left out of each epoch (whole batches only, so every step has one shape; "
        f"Keras' fit would run a smaller step {steps + 1})"
        if left > 0
        else ""
    )
    return f"Batches: {per}; {available:,} training examples make {steps} steps per epoch{tail}"


def check_profile_window(profile, steps_per_epoch: Optional[int], epochs: int) -> None:
    """ConfigError unless the profile window (inclusive, 0-based steps; RunConfig checks its form) lies within the
    run's steps; nothing to check while the steps per epoch are unknown."""
    if not window_fits(profile, steps_per_epoch, epochs):
        total = steps_per_epoch * epochs
        raise ConfigError(
            f"RunConfig.profile: the run has {total} steps ({epochs} epochs x {steps_per_epoch}), so "
            f"steps {profile[0]}-{profile[1]} are never reached; choose a window within 1-{total}. "
            f"Received: profile={profile}.",
            field="profile",
            value=profile,
            expected=f"a window within 1-{total}",
        )


def default_window(steps_per_epoch: Optional[int], epochs: int):
    """A few steps after warm-up that fit in the run: 10-14 when it is long enough (the panel's Profile button).

    Step 0 compiles the train step, so a window holding it times the compile, not the step (168 ms against 4.7 in
    the run, once): where the steps per epoch are not known before the run (text, which is counted once tokenized),
    the window is 2-3, after it; a run too short for that is told so when it starts.
    """
    if not steps_per_epoch:
        return 2, 3
    total = steps_per_epoch * epochs
    start = min(10, total // 4)
    return start, max(start, min(start + 4, total - 1))


def estimated_step_seconds(flops_per_example, global_batch: int, peak_flops) -> Optional[float]:
    """A training step's time at the device's peak: a lower bound (None when the FLOPs or the peak are unknown)."""
    if not flops_per_example or not peak_flops:
        return None
    return flops_per_example * global_batch / peak_flops


def resolve_steps_per_execution(requested, runtime, steps_per_epoch: Optional[int], profile=None, step_seconds=None):
    """(steps per execution, why) for a run: "auto" resolved, or an explicit value checked against the backend.

    "auto" is the largest divisor of the epoch's steps up to the runtime's cap
    (`Runtime.steps_per_call_cap`: 32, and on the CPU only as many as keep a call under
    50 ms, from `step_seconds`, the step's time estimated from the model's FLOPs and the
    CPU's measured peak, a number or a function asked only there), so every epoch ends
    where an execution does (epoch backups and resume need whole epochs). It is 1 where
    `Runtime.multi_step_refusal` says the path cannot run more; when the epoch's length
    is unknown; and with a profile
    window (its step markers are one per call of the train function). An explicit value
    must divide the steps per epoch: Keras runs whole calls, and would take the next
    epoch's batches.

    >>> from tpukit.hardware.runtime import Runtime
    >>> tpu = Runtime(backend="jax", kind="tpu", devices=("TPU_0",), replicas=8, strategy=None)
    >>> resolve_steps_per_execution("auto", tpu, steps_per_epoch=100)[0]
    25
    >>> cpu = Runtime(backend="jax", kind="cpu", devices=("cpu:0",), replicas=1, strategy=None)
    >>> resolve_steps_per_execution("auto", cpu, steps_per_epoch=100, step_seconds=0.002)[0]
    25
    >>> resolve_steps_per_execution("auto", cpu, steps_per_epoch=100, step_seconds=0.2)[0]
    1

    Raises:
        ConfigError: an explicit value above 1 where the backend cannot run it, or with a profile window.
    """
    refusal = runtime.multi_step_refusal()
    if requested != "auto":
        _check_requested(requested, refusal, steps_per_epoch, profile)
        return requested, f"{requested}, as set"
    if refusal:
        return 1, f"auto → 1: {refusal}"
    if not steps_per_epoch:
        return 1, "auto → 1: the number of steps per epoch is unknown, so no value is known to keep epochs whole"
    if profile is not None:
        return 1, (
            f"auto → 1: the profile window {profile[0]}-{profile[1]} marks one step per call of the train function"
        )
    cap, where = runtime.steps_per_call_cap(step_seconds)
    if cap < 2:
        return 1, f"auto → 1 {where}"
    n = max(d for d in range(1, min(steps_per_epoch, cap) + 1) if steps_per_epoch % d == 0)
    if n == 1:
        return 1, (
            f"auto → 1: the {steps_per_epoch} steps per epoch have no divisor from 2 to {cap}, and epochs must "
            "stay whole; a steps_per_epoch or batch size with one would let more steps run per call"
        )
    return n, (
        f"auto → {n} {where}: fewer calls from the host, each running {n} steps; the largest divisor of the "
        f"{steps_per_epoch} steps per epoch up to {cap}, so epochs stay whole"
    )


def _check_requested(requested: int, refusal, steps_per_epoch: Optional[int], profile) -> None:
    """ConfigError, in one line, for an explicit steps_per_execution the run cannot take: more than 1 where the path
    cannot run it or with a profile window, or a value that does not divide the epoch's steps."""
    if requested > 1 and refusal:
        raise ConfigError(
            f"RunConfig.steps_per_execution: {refusal}; use 1 there (or 'auto'). "
            f"Received: steps_per_execution={requested}.",
            field="steps_per_execution",
            value=requested,
            expected="1 or 'auto'",
            choices=(1, "auto"),
        )
    if requested > 1 and profile is not None:
        raise ConfigError(
            f"RunConfig.steps_per_execution: the profile window {profile[0]}-{profile[1]} counts "
            f"steps one call at a time, and {requested} steps per call would move or skip it; use "
            f"1 (or 'auto') for a profiled run. Received: steps_per_execution={requested}.",
            field="steps_per_execution",
            value=requested,
            expected="1 or 'auto'",
            choices=(1, "auto"),
        )
    if steps_per_epoch and steps_per_epoch % requested:
        divisors = ", ".join(str(d) for d in range(steps_per_epoch, 0, -1) if steps_per_epoch % d == 0)
        raise ConfigError(
            f"RunConfig.steps_per_execution: {requested} does not divide the {steps_per_epoch} steps per epoch: "
            f"Keras would run {-(-steps_per_epoch // requested) * requested} steps in each epoch, taking batches "
            f"of the next, and run out of data before the last epoch ends; use a divisor ({divisors[:40]}"
            f"{', ...' if len(divisors) > 40 else ''}) or 'auto'. Received: steps_per_execution={requested}.",
            field="steps_per_execution",
            value=requested,
            expected="a divisor of the steps per epoch or 'auto'",
            choices=tuple(d for d in range(1, steps_per_epoch + 1) if steps_per_epoch % d == 0) + ("auto",),
        )
