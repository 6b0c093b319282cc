"""Find a fast per-replica batch size that fits, by trying it.

Lightning's `Tuner.scale_batch_size` doubles the batch until memory runs out.
This does the same on the run's own model, data, precision and strategy, and
also stops when a bigger batch stops paying: each trial builds a fresh model,
compiles it, runs a few warm-up steps and then times a few more, as a run
times its steps after the compiling first one (`tpukit.observe.meter.Meter`, the
one definition of examples/s). An out-of-memory
error ends the search (the trial's memory is freed, never a crash). Nothing is
written: no run directory, no TensorBoard events.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import threading
import time
import warnings
from typing import Callable, List, Optional, Tuple

from tpukit.config import ConfigError, RunConfig, check_one_batch, global_batch as global_batch_of

PATIENCE = 2  # sizes in a row that gain less than min_gain before the search ends (one can be a hiccup)
MIN_STEPS_PER_EPOCH = 16  # the search stops before a batch that leaves an epoch fewer steps than this


@dataclasses.dataclass(frozen=True)
class BatchTrial:
    """One tried batch size (per replica) and what it gave."""

    batch_size: int
    global_batch_size: int
    examples_per_sec: Optional[float] = None
    step_time_ms: Optional[float] = None
    outcome: str = "measured"  # or "out of memory"
    noise: Optional[float] = None  # the relative standard error of the mean step time (`step_noise`)


@dataclasses.dataclass(frozen=True)
class BatchTuning:
    """The trials, the recommended per-replica batch size and why."""

    trials: Tuple[BatchTrial, ...]
    recommended: int
    reason: str

    def __repr__(self) -> str:
        return f"BatchTuning(recommended={self.recommended}, tried={[t.batch_size for t in self.trials]})"

    def _repr_pretty_(self, printer, cycle):  # IPython / Jupyter: the table, not the fields
        printer.text(self.table())

    def rows(self) -> List[dict]:
        return [dataclasses.asdict(t) for t in self.trials]

    def table(self) -> str:
        """The trials as aligned text, the recommendation marked."""
        lines = [f"{'batch/replica':>13}  {'global':>7}  {'examples/s':>11}  {'ms/step':>8}  outcome"]
        for t in self.trials:
            rate = f"{t.examples_per_sec:,.0f}" if t.examples_per_sec else "-"
            step = f"{t.step_time_ms:.1f}" if t.step_time_ms else "-"
            mark = "  <- recommended" if t.batch_size == self.recommended and t.outcome == "measured" else ""
            lines.append(f"{t.batch_size:>13}  {t.global_batch_size:>7}  {rate:>11}  {step:>8}  {t.outcome}{mark}")
        return "\n".join(lines + [self.reason])


def candidates(multiple: int, start: int, limit: int) -> List[int]:
    """Per-replica batches to try: `start` rounded up to `multiple`, then doubling, up to `limit`."""
    first = max(multiple, math.ceil(start / multiple) * multiple)
    out = []
    size = first
    while size <= limit:
        out.append(size)
        size *= 2
    return out


def tune_batch_size(
    config: RunConfig,
    runtime=None,
    *,
    model=None,
    data=None,
    start: Optional[int] = None,
    max_batch_size: Optional[int] = None,
    warmup_steps: int = 2,
    steps: int = 5,
    min_gain: Optional[float] = 0.05,
    time_budget_s: float = 60.0,
    on_trial: Optional[Callable[[Tuple[BatchTrial, ...], int], None]] = None,
) -> BatchTuning:
    """Try growing per-replica batch sizes on `config`'s model and data; recommend the fastest that fits.

    Batches are multiples of 8 (128 on a TPU, the matrix unit's side), doubling from
    `start` (default: the multiple). The search stops at an out-of-memory error, when
    a batch gains less than `min_gain` over the best so far, before a batch that
    would leave an epoch fewer than MIN_STEPS_PER_EPOCH steps or exceed
    `max_batch_size`, or after `time_budget_s`.
    The recommendation is the smallest batch within `min_gain` of the fastest
    (`min_gain=None`: try every size up to memory or the limit, recommend the fastest), or within the
    measurement's own noise where that is larger: on a shared CPU a few steps vary by more than `min_gain`, and a
    difference smaller than that spread is not a gain (the reason says how noisy it was).

    Args:
        config: the run's settings (model, dataset, precision, optimizer...); its batch size is not used.
        runtime: a `Runtime`; None connects as the config says.
        model, data: the run's own model and data, as `train()` takes them.
        on_trial: called before each size with the trials so far and the size about to be tried (progress).

    Raises:
        ConfigError: batched data (its batch is its own) or arguments out of range.
    """
    from tpukit.config import PaddingWarning
    from tpukit.data.types import UnorderedDataWarning
    from tpukit.training.run import Run

    _check_arguments(warmup_steps, steps, min_gain)
    run = Run(config, runtime, (), None, None, inputs=(model, data, None, None))  # the recipe train() runs
    with contextlib.ExitStack() as held, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnorderedDataWarning)  # batched data is refused just below
        warnings.simplefilter("ignore", PaddingWarning)  # about the config's batch, which is not tried
        run.prepare(held, writes=False)
    runtime, source = run.runtime, run.source
    if not source.ordered:
        raise ConfigError(
            "tune_batch_size: the data is already batched, so its batch size is its own; pass arrays "
            "or an unbatched dataset."
        )
    multiple = runtime.lane_width or 8  # a TPU's matrix unit is as wide as its lanes
    limit, why = _limit(len(source.train), runtime.replicas, multiple, max_batch_size)
    sizes = candidates(multiple, start or multiple, limit)
    if not sizes:
        check_one_batch(
            len(source.train),
            multiple,
            runtime.replicas,
            where="tune_batch_size",
            has=f"the data has {len(source.train)} training examples, and the smallest batch tried is "
            f"{multiple} per replica",
        )
    trials, began, flat = [], time.perf_counter(), 0
    for size in sizes:
        if on_trial is not None:
            on_trial(tuple(trials), size)
        trial = _trial(run, size, warmup_steps, steps)
        trials.append(trial)
        best = max((t.examples_per_sec for t in trials[:-1] if t.examples_per_sec), default=None)
        if trial.outcome != "measured":
            break
        gained = min_gain is None or best is None or trial.examples_per_sec >= best * (1 + min_gain)
        flat = 0 if gained else flat + 1
        if flat == PATIENCE or time.perf_counter() - began > time_budget_s:
            break
    return _recommend(tuple(trials), min_gain, runtime.replicas, limit, why, flat == PATIENCE)


def _check_arguments(warmup_steps, steps, min_gain) -> None:
    """ConfigError, in one line, for tune_batch_size's own arguments out of range."""
    for name, value, low in (("warmup_steps", warmup_steps, 1), ("steps", steps, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"tune_batch_size: {name} must be an integer >= {low}. Received: {name}={value!r}.")
    if min_gain is not None and (isinstance(min_gain, bool) or not 0 <= min_gain < 1):
        raise ConfigError(
            f"tune_batch_size: min_gain must be a fraction in [0, 1) or None. Received: min_gain={min_gain!r}."
        )


def _trial(run, size: int, warmup: int, steps: int) -> BatchTrial:
    """Time one batch size with the run's own recipe (`Run.trial`); an out-of-memory error is a result, not a
    crash."""
    timers = []

    def timer(global_batch: int, per_epoch: int):
        timers.append(_StepTimer(warmup, warmup + steps, global_batch, per_epoch))
        return timers[-1].callback()

    global_batch = global_batch_of(size, run.runtime.replicas)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a built model is cloned for every trial: said once by train(), not here
            run.trial(size, timer, warmup + steps)
    except Exception as e:  # noqa: BLE001 - out of memory is an outcome; anything else is raised again
        if not _out_of_memory(e):
            raise
        return BatchTrial(size, global_batch, outcome="out of memory")
    finally:
        gc.collect()
    seconds, timed = timers[-1].meter.timed()
    return BatchTrial(
        size,
        global_batch,
        examples_per_sec=timers[-1].meter.run_rate(),
        step_time_ms=1000 * seconds / timed if timed else None,
        noise=step_noise(timers[-1].ends),
    )


def step_noise(ends: List[float]) -> Optional[float]:
    """The relative standard error of the mean step time, from the steps' end times (None under 3 steps): how
    far the trial's examples/s could be off by chance."""
    steps = [b - a for a, b in zip(ends, ends[1:])]
    if len(steps) < 2 or sum(steps) <= 0:
        return None
    mean = sum(steps) / len(steps)
    spread = math.sqrt(sum((s - mean) ** 2 for s in steps) / (len(steps) - 1))
    return spread / mean / math.sqrt(len(steps))


class _StepTimer:
    """Times the steps after the warm-up with `tpukit.observe.meter.Meter` (the one definition of examples/s, with
    the warm-up where a run has its compiling first step) and stops training after `total` steps."""

    def __init__(self, warmup: int, total: int, global_batch: int, per_epoch: int):
        from tpukit.observe.meter import Meter

        self.warmup, self.total, self.per_epoch = warmup, total, per_epoch
        self.meter = Meter(global_batch, per_epoch, 0)
        self.ends: List[float] = []  # the timed steps' end times, for their spread
        self.epoch = 0
        self.lock = threading.Lock()

    def callback(self):
        from tpukit.training.callbacks import StepSafe

        timer = self

        class Timer(StepSafe):
            """Reads a clock under a lock: no device sync between steps, as in a run."""

            def on_epoch_begin(self, epoch, logs=None):
                with timer.lock:
                    timer.epoch = epoch
                    timer.meter.epoch(epoch, time.perf_counter())

            def on_train_batch_end(self, batch, logs=None):
                now = time.perf_counter()
                with timer.lock:
                    done = timer.epoch * timer.per_epoch + batch + 1
                    if done >= timer.warmup:
                        timer.meter.step(batch + 1, now)
                        timer.ends.append(now)
                    if done >= timer.total:
                        self.stop_training()

        return Timer()


def _out_of_memory(error: BaseException) -> bool:
    """TensorFlow's ResourceExhaustedError, XLA's RESOURCE_EXHAUSTED (JAX), or Python's MemoryError."""
    text = f"{type(error).__name__}: {error}"
    return (
        isinstance(error, MemoryError)
        or "ResourceExhausted" in text
        or "RESOURCE_EXHAUSTED" in text
        or "out of memory" in text.lower()
    )


def _limit(examples: int, replicas: int, multiple: int, max_batch_size: Optional[int]) -> Tuple[int, str]:
    """The largest per-replica batch worth trying, and what sets it.

    A batch so big that an epoch is a handful of steps is fast per example and
    useless for training (digits: 1024 gave one step per epoch), so the search
    keeps MIN_STEPS_PER_EPOCH steps, unless the data cannot fill even one
    smallest batch that way (then one step per epoch is the limit).
    """
    by_steps = examples // (replicas * MIN_STEPS_PER_EPOCH)
    if by_steps >= multiple:
        limit, why = (
            by_steps,
            (f"an epoch of the {examples:,} training examples would have fewer than {MIN_STEPS_PER_EPOCH} steps"),
        )
    else:
        limit, why = examples // replicas, f"one global batch would exceed the {examples:,} training examples"
    if max_batch_size is not None and max_batch_size < limit:
        limit, why = max_batch_size, f"it would exceed max_batch_size={max_batch_size}"
    return limit, why


def _recommend(trials, min_gain, replicas, limit, why, flattened) -> BatchTuning:
    measured = [t for t in trials if t.examples_per_sec]
    if not measured:
        raise MemoryError(
            f"tune_batch_size: even {trials[0].batch_size} per replica ran out of memory; use a smaller "
            "model or a lower precision."
        )
    fastest = max(measured, key=lambda t: t.examples_per_sec)
    # Two trials' rates differ by chance by about twice their standard error: a gain must beat that too.
    noise = 2 * max((t.noise for t in measured if t.noise), default=0.0)
    margin = max(min_gain or 0, noise)
    pick = min(
        (t for t in measured if t.examples_per_sec >= fastest.examples_per_sec / (1 + margin)),
        key=lambda t: t.batch_size,
    )
    last = trials[-1]
    if last.outcome == "out of memory":
        ended = f"{last.batch_size} per replica ran out of memory"
    elif flattened:
        ended = f"{trials[-PATIENCE].batch_size} and {last.batch_size} per replica gained less than {min_gain:.0%}"
    elif last.batch_size * 2 > limit:
        ended = f"at {last.batch_size * 2} per replica {why}"
    else:
        ended = "the time budget ran out"
    closest = (
        "the fastest measured"
        if pick is fastest
        else f"within {margin:.0%} of the fastest ({fastest.batch_size}: {fastest.examples_per_sec:,.0f}/s)"
    )
    picked_global = global_batch_of(pick.batch_size, replicas)
    reason = (
        f"Recommended: batch_size={pick.batch_size} per replica (global {picked_global}), "
        f"{pick.examples_per_sec:,.0f} examples/s, {closest}; the search stopped because {ended}."
    )
    if noise:
        reason += (
            f" Step times varied: rates measured over a few steps differ by up to about {noise:.0%} by "
            f"chance{', so smaller gains count as none' if noise > (min_gain or 0) else ''}."
        )
    return BatchTuning(trials, pick.batch_size, reason)
