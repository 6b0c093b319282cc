"""Keras callbacks the trainer adds to every fit: stop on request, record, back up, report progress.

Written the Keras way: small hooks that call private helpers, nothing created
before it is needed. This module imports Keras; `tpukit.training` loads it
only when a run starts.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

import keras

from tpukit.progress import Meter


class StopOnRequest(keras.callbacks.Callback):
    """Ends training after the current step once `flag` is set (thread-safe: a threading.Event).

    The step in flight finishes, so the weights are consistent; the run is kept.
    """

    def __init__(self, flag: threading.Event):
        super().__init__()
        self.flag = flag
        self.stopped_early = False

    def on_train_batch_end(self, batch, logs=None):
        if self.flag.is_set():
            self.stopped_early = True
            self.model.stop_training = True


def whole_epoch(seen: int, steps_per_epoch: Optional[int], model) -> bool:
    """Whether the epoch that just ended ran all its steps (Keras ends an epoch early on stop_training)."""
    return seen >= steps_per_epoch if steps_per_epoch else not model.stop_training


class EpochBackup(keras.callbacks.Callback):
    """Backs up every whole epoch with `tpukit.checkpoint` (atomic, two files deep); restores one at train begin.

    Keras calls `on_epoch_end` even when a stop request cut the epoch short.
    Saving then would mark a half epoch as done, and a resumed run would skip
    the rest of it; so a partial epoch is not saved and resume redoes it from
    its start, with the same batches, which keeps a deterministic run bitwise
    reproducible.

    `restore` is the weights file to load when training begins (after Keras has
    built the optimizer, so its state loads too); a file that does not fit the
    model raises `checkpoint.RestoreError` in one line.
    """

    def __init__(self, backup_dir: str, steps_per_epoch: Optional[int], restore: Optional[str] = None):
        super().__init__()
        self.backup_dir = backup_dir
        self.steps_per_epoch = steps_per_epoch
        self.restore = restore
        self._seen = 0

    def on_train_begin(self, logs=None):
        if self.restore:
            _load_exactly(self.model, self.restore)

    def on_epoch_begin(self, epoch, logs=None):
        self._seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self._seen = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        if whole_epoch(self._seen, self.steps_per_epoch, self.model):
            from tpukit import checkpoint

            checkpoint.write(self.backup_dir, epoch + 1, self.model.save_weights, needed=state_bytes(self.model))


def state_bytes(model) -> int:
    """About how many bytes `model.save_weights` writes: every weight and optimizer variable."""
    variables = list(model.weights)
    optimizer = getattr(model, "optimizer", None)
    variables += list(getattr(optimizer, "variables", None) or [])
    total = 0
    for v in variables:
        count = 1
        for dim in v.shape:
            count *= int(dim or 1)
        digits = "".join(c for c in str(v.dtype) if c.isdigit())
        total += count * (int(digits) // 8 if digits else 4)
    return total


def _load_exactly(model, path: str) -> None:
    """Load weights and optimizer state, or raise RestoreError: Keras only warns when some do not fit."""
    import warnings

    from tpukit import checkpoint

    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:  # as BackupAndRestore does: its state must load too
        optimizer.build(model.trainable_variables)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.load_weights(path)
            problem = next((str(w.message) for w in caught if "saving" in w.filename), None)
        except Exception as e:
            problem = f"{type(e).__name__}: {str(e).strip()}"
    if problem:
        raise checkpoint.RestoreError(
            f"{path} does not fit this model ({problem.splitlines()[0][:200].strip()}); resume needs the model the "
            "run was trained with.")


class RunRecorder(keras.callbacks.Callback):
    """Records per-epoch history and step timing; ends the run on a NaN loss.

    Only whole epochs enter the history: an epoch cut short by a stop request
    is redone on resume, so it is not counted as done.

    Step time counts from one step's end to the next within an epoch, so it
    includes the input pipeline and callback overhead but not validation.
    The first epoch (tracing and compilation) is left out of the throughput,
    unless it is the only epoch, where its first step is left out instead.
    """

    def __init__(self, examples_per_step: int, steps_per_execution: int = 1,
                 on_epoch: Optional[Callable[[int, Dict[str, float]], None]] = None, clock=time.perf_counter,
                 steps_per_epoch: Optional[int] = None):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch
        self._seen = 0
        self.examples_per_step = examples_per_step
        self.steps_per_execution = steps_per_execution
        self.on_epoch = on_epoch
        self.clock = clock
        self.epoch_rows: List[Dict[str, float]] = []
        self.step_times: Dict[int, List[float]] = {}
        self.train_begin: Optional[float] = None
        self.first_step_end: Optional[float] = None
        self.nan_step: Optional[int] = None
        self._epoch = 0
        self._last: Optional[float] = None
        self._steps = 0

    def on_train_begin(self, logs=None):
        self.train_begin = self.clock()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._seen = 0
        self._last = self.clock()
        self.step_times[epoch] = []

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        if self.first_step_end is None:
            self.first_step_end = now
        self.step_times[self._epoch].append((now - self._last) / self.steps_per_execution)
        self._last = now
        self._steps += self.steps_per_execution
        self._seen = batch + 1
        self._check_nan(logs)

    def on_epoch_end(self, epoch, logs=None):
        if not whole_epoch(self._seen, self.steps_per_epoch, self.model):
            return
        row = {"epoch": epoch, **{k: float(v) for k, v in (logs or {}).items()}}
        self.epoch_rows.append(row)
        if self.on_epoch:
            self.on_epoch(epoch, row)

    def _check_nan(self, logs):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.nan_step = self._steps
            self.model.stop_training = True

    # ---- derived figures ---------------------------------------------------
    def steady_step_times(self) -> List[float]:
        epochs = sorted(e for e, t in self.step_times.items() if t)
        if not epochs:
            return []
        if len(epochs) == 1:
            return self.step_times[epochs[0]][1:]
        return [t for e in epochs[1:] for t in self.step_times[e]]

    def step_time_ms(self) -> Optional[float]:
        times = self.steady_step_times()
        return 1000.0 * sum(times) / len(times) if times else None

    def examples_per_sec(self) -> Optional[float]:
        times = self.steady_step_times()
        return self.examples_per_step * len(times) / sum(times) if times and sum(times) > 0 else None

    def time_to_first_step(self) -> Optional[float]:
        if self.first_step_end is None or self.train_begin is None:
            return None
        return self.first_step_end - self.train_begin


class ProgressLogger(keras.callbacks.Callback):
    """Compact progress on a stream (stderr by default): a line per epoch, refreshed in place on a terminal.

    Where the run is, its examples/s and its ETA come from `tpukit.progress.Meter`, the model the panel's
    progress line uses too.
    """

    def __init__(self, epochs: int, steps_per_epoch: Optional[int], stream=None, every_s: float = 1.0,
                 clock=time.perf_counter, global_batch: int = 0):
        super().__init__()
        self.epochs = epochs
        self.steps = steps_per_epoch
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.clock = clock
        self.meter = Meter(global_batch, steps_per_epoch or 0, epochs)
        self._tty = getattr(self.stream, "isatty", lambda: False)()
        self._start = 0.0
        self._shown = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._start = self._shown = self.clock()
        self.meter.epoch(epoch, self._start)

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        self.meter.step(batch + 1, now)
        if self._tty and now - self._shown >= self.every_s:
            self._shown = now
            self.stream.write("\r" + self.meter.progress(now).text(sep="  ", metrics=logs))
            self.stream.flush()

    def on_epoch_end(self, epoch, logs=None):
        now = self.clock()
        whole = whole_epoch(self.meter.step_index, self.steps, self.model)
        line = self.meter.progress(now, done=True).text(sep="  ", metrics=logs)
        line += f"  {now - self._start:.1f}s"
        if not whole:
            line += "  (stopped: resume redoes this epoch)"
        self.stream.write(("\r" if self._tty else "") + line + "\n")
        self.stream.flush()
