"""Keras callbacks the trainer adds to every fit: stop on request, record, back up, report progress.

Written the Keras way: small hooks that call private helpers, nothing created
before it is needed. This module imports Keras; `tpukit.training.api` loads it
only when a run starts.

Every per-step hook here is `async_safe`: it does no device work and takes
its step reports in any order, from any thread. On JAX, Keras 3 then runs the
step hooks in a thread pool and never waits for a step's results before
dispatching the next one, as in a plain `fit`; one hook that is not
`async_safe` makes every step wait for its loss to reach the host.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
import time
from typing import Callable, Dict, Optional

import keras

from tpukit.observe.meter import Meter, kernel_stream, updates_in_place
from tpukit.runs import backups, model_state


class StepCount:
    """The steps of the current epoch done so far, counted from step reports that may come late, out of order
    and from several threads (Keras' async callbacks)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.seen = 0

    def reset(self) -> None:
        self.seen = 0

    def saw(self, batch: int) -> None:
        with self._lock:
            self.seen = max(self.seen, batch + 1)


class StepSafe(keras.callbacks.Callback):
    """A callback whose step hooks are `async_safe`: they may run in Keras' worker threads.

    Such a hook must not read `self.model`: on JAX that property syncs the training state into the model's
    variables (`jax_state_sync`), and from a worker thread it races the next step, which donates those buffers
    (seen: "Buffer has been deleted or donated" after a stop request). `stop_training()` reaches the model
    without it.
    """

    async_safe = True

    def set_model(self, model):
        super().set_model(model)
        self._fitted = model

    def stop_training(self) -> None:
        """Ask fit to stop after the current step, from any thread."""
        self._fitted.stop_training = True


class StopOnRequest(StepSafe):
    """Ends training after the current step once `flag` is set (thread-safe: a threading.Event).

    The step in flight finishes, so the weights are consistent; the run is kept.

    With async callbacks (JAX) the host can dispatch steps far ahead of the device, and a stop waits for all
    it dispatched: the 50 ms steps of a loaded CPU took 1.2 s to stop. So this callback also holds the host
    at most `AHEAD` calls of the train function ahead of the last one whose end was reported. That waits on
    Keras' own worker threads, which already bring each step's logs to the host; it adds no device sync.
    """

    AHEAD = 2  # calls of the train function in flight; enough to keep the device busy between them

    def __init__(self, flag: threading.Event):
        super().__init__()
        self.flag = flag
        self.stopped_early = False
        self._calls = threading.Condition()
        self._begun = self._ended = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._begun = self._ended = 0  # Keras waits for every step hook at an epoch's end

    def on_train_batch_begin(self, batch, logs=None):
        self._check()
        with self._calls:
            self._begun += 1
            # A timeout, not a hang, if a hook failed (Keras raises its error at the next dispatch).
            self._calls.wait_for(lambda: self._begun - self._ended <= self.AHEAD + 1, timeout=10)

    def on_train_batch_end(self, batch, logs=None):
        with self._calls:
            self._ended += 1
            self._calls.notify_all()
        self._check()

    def _check(self):
        if self.flag.is_set():
            self.stopped_early = True
            self.stop_training()


def whole_epoch(seen: int, steps_per_epoch: Optional[int], model) -> bool:
    """Whether the epoch that just ended ran all its steps (Keras ends an epoch early on stop_training)."""
    return seen >= steps_per_epoch if steps_per_epoch else not model.stop_training


class EpochBackup(StepSafe):
    """Backs up every whole epoch with `tpukit.runs.backups` (atomic, two files deep); restores one at train begin.

    A backup is the model's and optimizer's variables (`tpukit.runs.model_state`), not Keras' `save_weights`: the same
    values in 4-7 ms instead of 23-38 for the mlp, at every epoch's end.

    Keras calls `on_epoch_end` even when a stop request cut the epoch short.
    Saving then would mark a half epoch as done, and a resumed run would skip
    the rest of it; so a partial epoch is not saved and resume redoes it from
    its start, with the same batches, which keeps a deterministic run bitwise
    reproducible.

    `restore` is the weights file to load when training begins (after Keras has
    built the optimizer, so its state loads too); a file that does not fit the
    model raises `backups.RestoreError` in one line. `reads(model)` is the
    runtime's context for reading the weights (`Runtime.host_reads`).
    """

    def __init__(
        self,
        backup_dir: str,
        steps_per_epoch: Optional[int],
        restore: Optional[str] = None,
        reads: Callable = lambda model: contextlib.nullcontext(),
    ):
        super().__init__()
        self.backup_dir = backup_dir
        self.steps_per_epoch = steps_per_epoch
        self.restore = restore
        self.reads = reads
        self._count = StepCount()

    def on_train_begin(self, logs=None):
        if self.restore:
            backups.restore_exactly(self.model, self.restore)

    def on_epoch_begin(self, epoch, logs=None):
        self._count.reset()

    def on_train_batch_end(self, batch, logs=None):
        self._count.saw(batch)

    def on_epoch_end(self, epoch, logs=None):
        if whole_epoch(self._count.seen, self.steps_per_epoch, self.model):
            model = self.model  # on JAX, brings the training state back into the variables
            with self.reads(model):
                taken = model_state.take(model)  # on fit's thread, before the next step changes a variable
            backups.write(self.backup_dir, epoch + 1, taken.save, needed=taken.nbytes)


class EarlyStopping(keras.callbacks.EarlyStopping):
    """Keras' EarlyStopping, whose read of the best weights at an epoch's end (`restore_best_weights`) goes through
    `reads(model)` (`Runtime.host_reads`: across processes, weights split over their devices are gathered)."""

    def __init__(self, reads: Callable, **kwargs):
        super().__init__(**kwargs)
        self.reads = reads

    def on_epoch_end(self, epoch, logs=None):
        with self.reads(self.model):
            super().on_epoch_end(epoch, logs)


class RunRecorder(StepSafe):
    """Records each whole epoch in the run's `Recording` (which writes result.json) and the run's speed; ends the
    run on a NaN loss.

    Only whole epochs enter the history: an epoch cut short by a stop request
    is redone on resume, so it is not counted as done. The record reads the
    speed (`speed()`) at every write.

    The speed is `tpukit.observe.meter.Meter`'s, the one definition of examples/s:
    every step but the run's first (it compiles), each epoch from its start
    to its latest step's end, validation left out. The time to the first step
    (compilation included) is kept apart.

    The NaN check reads the loss Keras already brought to the host for the
    callbacks (in a worker thread on JAX), so it adds no device sync; the
    step that saw it is the last of its call of `steps_per_execution` steps.
    """

    def __init__(
        self,
        examples_per_step: int,
        record,
        clock=time.perf_counter,
        steps_per_epoch: Optional[int] = None,
        epochs: int = 0,
    ):
        super().__init__()
        self.steps_per_epoch = steps_per_epoch
        self.record = record
        record.measure(self.speed)
        self.clock = clock
        self.meter = Meter(examples_per_step, steps_per_epoch or 0, epochs)
        self.train_begin: Optional[float] = None
        self.nan_step: Optional[int] = None
        self._lock = threading.Lock()

    def on_train_begin(self, logs=None):
        self.train_begin = self.clock()

    def on_epoch_begin(self, epoch, logs=None):
        with self._lock:
            self.meter.epoch(epoch, self.clock())

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        with self._lock:
            self.meter.step(batch + 1, now)
            self._check_nan(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if not whole_epoch(self.meter.step_index, self.steps_per_epoch, self.model):
            return
        row = {"epoch": epoch, **{k: float(v) for k, v in (logs or {}).items()}}
        self.record.add_epoch(row)

    def _check_nan(self, batch, logs):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            step = self.meter.global_step - self.meter.step_index + batch + 1
            self.nan_step = step if self.nan_step is None else min(self.nan_step, step)
            self.stop_training()

    # ---- derived figures ---------------------------------------------------
    def speed(self) -> Dict[str, Optional[float]]:
        """The `RunResult` fields of the run's speed, as measured so far."""
        return {
            "examples_per_sec": self.examples_per_sec(),
            "step_time_ms": self.step_time_ms(),
            "time_to_first_step_s": self.time_to_first_step(),
        }

    def step_time_ms(self) -> Optional[float]:
        seconds, steps = self.meter.timed()
        return 1000.0 * seconds / steps if steps and seconds > 0 else None

    def examples_per_sec(self) -> Optional[float]:
        return self.meter.run_rate()

    def time_to_first_step(self) -> Optional[float]:
        first = self.meter.first_step_end()
        if first is None or self.train_begin is None:
            return None
        return first - self.train_begin


class ProgressLogger(StepSafe):
    """Progress as text on a stream, as Keras' `verbose`: one line kept per epoch, and with `live`, a line
    refreshed in place during each epoch.

    Where the run is, its examples/s and its ETA come from `tpukit.observe.meter.Meter`, the model the panel's
    progress line uses too. The live line (step/total, Keras' running metrics, examples/s, the epoch's elapsed
    time, ETA) starts with "\\r", which a terminal and a notebook's stream output show in place of the one before
    (`progress.updates_in_place`), and is written at most every `every_s` seconds, from the step hook that
    reports the latest step: no device work, no wait (`async_safe`, as every step hook here). A kernel's stream
    is not flushed for it (the kernel sends its buffer within 0.2 s by itself; a flush would wait for it).

    Args:
        epochs, steps_per_epoch, global_batch: the run's shape, for the Meter (steps None: unknown).
        stream: where to write (default stderr).
        live: refresh a line in place during each epoch (default: where the stream shows it in place).
        every_s: the least time between two refreshes of the live line.
        clock: the time, in seconds (injected by tests).
    """

    def __init__(
        self,
        epochs: int,
        steps_per_epoch: Optional[int],
        stream=None,
        every_s: float = 0.25,
        clock=time.perf_counter,
        global_batch: int = 0,
        live: Optional[bool] = None,
    ):
        super().__init__()
        self.epochs = epochs
        self.steps = steps_per_epoch
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.clock = clock
        self.meter = Meter(global_batch, steps_per_epoch or 0, epochs)
        self.live = updates_in_place(self.stream) if live is None else bool(live)
        self._flush_live = not kernel_stream(self.stream)
        self._start = 0.0
        self._shown = 0.0
        self._width = 0  # the open live line's length; 0: none open
        self._lock = threading.RLock()  # a log line written while the live line is drawn ends it (`_end_line_first`)
        self._handlers = []  # the log handlers that end the live line before they write (`on_train_begin`)

    def on_train_begin(self, logs=None):
        """A log line during the run (TensorFlow's retracing WARNING, a library's notice) ends the live line first,
        so it does not land inside it: a filter on the handlers of TensorFlow's logger and the root logger (where
        the others' records end up), removed when the run ends."""
        for logger in (logging.getLogger("tensorflow"), logging.getLogger()):
            for handler in logger.handlers:
                if handler not in self._handlers:
                    handler.addFilter(self._end_line_first)
                    self._handlers.append(handler)

    def _end_line_first(self, record) -> bool:
        self._end_line()
        return True

    def _end_line(self) -> None:
        with self._lock:
            if self._width:
                self._write("\n")

    def on_epoch_begin(self, epoch, logs=None):
        self._start = self._shown = self.clock()
        with self._lock:
            first = self.meter.first_step_end() is None
            self.meter.epoch(epoch, self._start)
            if self.live and first:  # the run's first step traces and compiles: say so while it does
                self._show(self.meter.progress(self._start).text(sep="  ") + "  first step (compiling)…", flush=True)

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        with self._lock:
            self.meter.step(batch + 1, now)
            if self.live and now - self._shown >= self.every_s and batch + 1 == self.meter.step_index:
                self._shown = now
                text = self.meter.progress(now).text(sep="  ", metrics=logs, elapsed=now - self._start)
                self._show(text, flush=self._flush_live)

    def on_epoch_end(self, epoch, logs=None):
        now = self.clock()
        whole = whole_epoch(self.meter.step_index, self.steps, self.model)
        progress = self.meter.progress(now, done=True)
        line = progress.text(sep="  ", metrics=logs, elapsed=now - self._start)
        if progress.examples_per_sec is None and self.meter.first_step_end() is not None:
            # The epoch ran as the run's one compiling call (steps per execution = its steps): no step was timed,
            # so there is no examples/s to show yet (meter.Meter leaves that call out).
            line += "  (compiling: no step timed for examples/s)"
        if not whole:
            line += "  (stopped: resume redoes this epoch)"
        with self._lock:
            self._write(self._over(line) + "\n")

    def on_train_end(self, logs=None):
        self.close()

    def close(self) -> None:
        """End an open live line, so what is printed next starts a line of its own (a run ended by Ctrl-C or an
        error never reaches `on_epoch_end`); `train()` calls it however the fit ended."""
        self._end_line()
        while self._handlers:
            self._handlers.pop().removeFilter(self._end_line_first)

    def say(self, text: str) -> None:
        """A line of its own after the epochs' lines: why the run ended before its last epoch (as Keras'
        EarlyStopping says "Epoch 4: early stopping" under fit's progress)."""
        self.close()
        with self._lock:
            self._write(text + "\n")

    # ---- writing -------------------------------------------------------------------------------------------
    def _show(self, text: str, flush: bool) -> None:
        """`text` in place of the open live line, padded over what is left of a longer one."""
        self.stream.write(self._over(text))
        self._width = len(text)
        if flush:
            self.stream.flush()

    def _over(self, text: str) -> str:
        if not self._width:
            return text
        return "\r" + text + " " * max(0, self._width - len(text))

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self._width = 0
        self.stream.flush()
