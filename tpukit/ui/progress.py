"""Live progress for the panel: a Keras callback that reports at most every so often, by wall time.

A panel must not slow training down: its budget is 2% of step time. Each
training step costs this callback one clock read and a comparison, and every
few steps (about POINTS over the run) one loss for the curves. Reports
happen on a wall-clock schedule: the text (epoch, step, examples/sec, ETA)
at most every `text_every` seconds, the loss/accuracy plot at most every
`plot_every` seconds, and, since a plot costs tens of milliseconds, never
more often than keeps the time spent drawing under `budget` of the time
elapsed (a 30 ms plot with budget 0.01 waits at least 3 s). The callback
measures what it spends, so the panel can show its own overhead.

Its step hook is `async_safe`: on JAX Keras 3 calls it from a worker
thread once the step's logs reach the host, and never waits for it. It only
records; the reports happen on the thread that runs `fit`, at the next step's
start (Colab shows no widget update made from another thread) and at each
epoch's end, so the curves lag by at most one step.

The callback reports to a `sink`, so it knows nothing of widgets:
`show_progress(Progress)` and `show_curves(points, epochs)`; `ProgressView` is
the panel's sink, `ProgressRecord` one that only keeps what it was told (the
controller's default). The controller hands the callback a `tpukit.ui.phases.RunStatus`,
which passes every report on to the view's sink and words the status line from it. Where the run is, its rate and its ETA come from
`tpukit.observe.meter.Meter`, the model the CLI's lines use too.

The curves are the steps' own losses and, at each whole epoch's end, validation:
an epoch a stop cut short draws no validation point (Keras validates it, but
the run keeps no partial epoch; resume redoes it). After a Resume they go on
from the kept epochs: as they were drawn where this kernel drew them
(`remember` / `drawn`; result.json keeps per-epoch history only), else as
each kept epoch's mean at its end, a marker apart from the per-step line.

Importing this module does not import Keras; `make_callback` builds the class
on first use.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from tpukit.observe.meter import Meter, Progress  # the one progress model
from tpukit.ui.throttle import Throttle


class ProgressRecord:
    """A sink that shows nothing and keeps the latest Progress and line (a controller without a widget view)."""

    def __init__(self):
        self.latest: Optional[Progress] = None
        self.line = ""
        self.curves = None
        self.total_steps = None  # the run's steps, as Keras counts them when fit begins (`sized`)

    def start(self, name: str, foreground: bool, loss_top: float, lead: str = "", chart: str = "accuracy") -> None:
        self.latest, self.line = None, f"{lead or 'Starting ' + name}: building the model and the input pipeline…"
        self.total_steps = None

    def sized(self, total_steps: int) -> None:
        self.total_steps = total_steps

    def waiting(self, text: str) -> None:
        self.latest, self.line = None, text

    def failed(self, text: str) -> None:
        where = f" at {self.latest.text()}" if self.latest is not None and not self.latest.done else ""
        self.line = f"Did not finish{where}: {text}"

    def show_progress(self, progress: Progress) -> None:
        self.latest, self.line = progress, progress.text()

    def show_curves(self, points, epochs) -> None:
        self.curves = (list(points), list(epochs))

    def finish(self, result) -> None:
        if self.latest is not None:
            self.latest = dataclasses.replace(self.latest, examples_per_sec=result.examples_per_sec, done=True)
            self.line = f"{result.status}: {self.latest.text()}{ended_early(result)}"


class ProgressView:
    """The Progress section's widgets (a line of text, a bar, the live curves): the sink of the callback."""

    def __init__(self, line, bar, image):
        self.line, self.bar, self.image = line, bar, image
        self.curves = None
        self.latest = None

    def start(self, name: str, foreground: bool, loss_top: float, lead: str = "", chart: str = "accuracy") -> None:
        """Before a run: reset, and draw empty axes at once (the last run's curves give way). `lead` names the run
        as the status line does ("Resuming mlp-digits from epoch 2"; default "Starting <name>"); `chart`: the right
        chart's figure, "perplexity" for a language model's run (`plots.LiveCurves`)."""
        from tpukit.ui import plots, tables

        if self.curves is None:
            self.curves = plots.LiveCurves()
        self._loss_top, self._chart = loss_top, chart
        self.image.value = self.curves.prepare(1, loss_top, chart)
        self.image.layout.width = plots.css_width(self.image.value)  # 2x pixels at their size: never stretched
        self.image.layout.max_width, self.image.layout.display = "100%", ""
        self.latest = None
        self.bar.value, self.bar.bar_style = 0, "info"
        hint = " In Colab, stop with the cell's interrupt (Ctrl+M I); the run is kept." if foreground else ""
        lead = lead or f"Starting {name}"
        self.line.value = tables.message(f"{lead}: building the model and the input pipeline…{hint}")

    def sized(self, total_steps: int) -> None:
        """Fit has begun and Keras says how many steps the run has: the axes span them, drawn now so that redraws
        during the run are cheap blits."""
        self.image.value = self.curves.prepare(total_steps, self._loss_top, self._chart)

    def waiting(self, text: str) -> None:
        """A run was asked for: the last run's line and bar give way to `text` at once (before anything slow)."""
        from tpukit.ui import tables

        self.latest = None
        self.bar.value, self.bar.bar_style = 0, "info"
        self.line.value = tables.message(text)

    def failed(self, text: str) -> None:
        """The run ended with an error: the line says so (after the last progress, if any), the bar turns red."""
        from tpukit.ui import tables

        self.bar.bar_style = "danger"
        where = f" at {self.latest.text()}" if self.latest is not None and not self.latest.done else ""
        self.line.value = tables.message(f"Did not finish{where}: {text}", "error")

    def show_progress(self, progress: Progress) -> None:
        from tpukit.ui import tables

        self.latest = progress
        self.line.value = tables.message(progress.text())
        self.bar.value = int(round(1000 * progress.fraction))

    def show_curves(self, points, epochs) -> None:
        self.image.value = self.curves.render(points, epochs)
        self.image.layout.display = ""

    def finish(self, result) -> None:
        """After a run: its status on the bar, and the engine's steady-state examples/sec in the line."""
        from tpukit.ui import tables

        self.bar.bar_style = {"completed": "success", "stopped": "warning"}.get(result.status, "danger")
        if result.status == "completed":
            self.bar.value = 1000
        if self.latest is not None:
            self.latest = dataclasses.replace(self.latest, examples_per_sec=result.examples_per_sec, done=True)
            self.line.value = tables.message(f"{result.status}: {self.latest.text()}{ended_early(result)}")


def ended_early(result) -> str:
    """ " (early stopping after epoch 2 …)" for a completed run that ended before its last epoch: the progress
    line's "epoch 2/3" then says why; "" otherwise."""
    epochs = result.config.get("epochs")
    if result.status != "completed" or not result.message or not epochs or result.epochs_done >= epochs:
        return ""
    return f" ({result.message})"


POINTS = 300  # the curves keep about this many training points: every step of a short run, a window of a long one


@dataclasses.dataclass(frozen=True)
class Drawn:
    """What a run's curves showed: its per-step points, the steps of its epochs and how many whole epochs it drew.

    result.json keeps per-epoch history only, so a run's per-step points live on in the kernel (`remember`), and
    a Resume in the same kernel draws its kept epochs as they were (`drawn`).
    """

    steps_per_epoch: int
    whole_epochs: int
    points: Tuple[Tuple[int, Optional[float], Optional[float]], ...]


_DRAWN: "collections.OrderedDict[str, Drawn]" = collections.OrderedDict()
_DRAWN_RUNS = 16  # a few hundred points each
_DRAWN_LOCK = threading.Lock()


def remember(run_dir: Optional[str], callback) -> None:
    """Keep what `callback` (a `make_callback`) drew for `run_dir`, so a Resume in this kernel draws it again."""
    if not run_dir or callback is None:
        return
    drawn = callback.drawn()
    if drawn is None:
        return
    with _DRAWN_LOCK:
        key = os.path.realpath(run_dir)
        _DRAWN.pop(key, None)
        _DRAWN[key] = drawn
        while len(_DRAWN) > _DRAWN_RUNS:
            _DRAWN.popitem(last=False)


def drawn(run_dir: Optional[str]) -> Optional[Drawn]:
    """What this kernel drew for `run_dir` (None: nothing, as in a new kernel)."""
    if not run_dir:
        return None
    with _DRAWN_LOCK:
        return _DRAWN.get(os.path.realpath(run_dir))


def make_callback(
    sink,
    *,
    global_batch: int,
    clock: Callable[[], float] = time.perf_counter,
    text_every: float = 0.5,
    plot_every: float = 1.0,
    budget: float = 0.01,
    earlier: Optional[Dict[str, List[float]]] = None,
    before: Optional[Drawn] = None,
    figure: str = "accuracy",
):
    """A Keras callback that reports a run's progress to `sink` (see the module docstring).

    Args:
        figure: the metric the curves' accuracy line shows (`ModelSource.chart`; "reward_accuracy" for a
            preference run).
        earlier: a resumed run's history (per-epoch metrics, as `RunResult.history`): its kept epochs start the
            curves, and the step axis goes on from them. An epoch drawn only from it shows its mean train loss
            and accuracy as a marker at its end (as Keras' history and TensorBoard's epoch scalars have them),
            never joined to the per-step line.
        before: what this kernel drew for the resumed run (`drawn(run_dir)`): its kept epochs' per-step points,
            drawn again as they were.
    """
    return _callback_class()(
        sink,
        global_batch=global_batch,
        clock=clock,
        text_every=text_every,
        plot_every=plot_every,
        budget=budget,
        earlier=earlier,
        before=before,
        figure=figure,
    )


_CLASS = None


def _callback_class():
    global _CLASS
    if _CLASS is None:
        _CLASS = _build_class()
    return _CLASS


def _build_class():
    import keras

    class PanelProgress(keras.callbacks.Callback):
        """Reports progress to a sink on a wall-clock schedule; each step costs one clock read (`_Tracker` does it:
        the hooks only pass the calls on)."""

        async_safe = True  # the step hook records under a lock; reports happen on fit's own thread

        progress = property(lambda self: self._tracker.progress, doc="The latest Progress reported.")
        sink = property(lambda self: self._tracker.sink, doc="What the reports go to.")
        meter = property(lambda self: self._tracker.meter, doc="Where the run is, its rate and ETA.")
        points = property(lambda self: self._tracker.points, doc="The curves' per-step (step, loss, accuracy).")
        epoch_ends = property(lambda self: self._tracker.epoch_ends, doc="The curves' (step, metrics) at epoch ends.")

        def __init__(self, sink, **options):
            super().__init__()
            self._tracker = _Tracker(sink, params=lambda: self.params, stopping=self._stopping, **options)

        def _stopping(self) -> bool:
            return getattr(self.model, "stop_training", False)  # `self.model` syncs a JAX model: only where needed

        def on_train_begin(self, logs=None):
            self._tracker.train_begin()

        def on_epoch_begin(self, epoch, logs=None):
            self._tracker.epoch_begin(epoch)

        def on_train_batch_begin(self, batch, logs=None):
            self._tracker.batch_begin()

        def on_train_batch_end(self, batch, logs=None):
            self._tracker.batch_end(batch, logs)

        def on_epoch_end(self, epoch, logs=None):
            self._tracker.epoch_end(logs)

        def on_train_end(self, logs=None):
            self._tracker.train_end(logs)

        def drawn(self) -> Optional[Drawn]:
            """What the curves hold now, for `remember`."""
            return self._tracker.drawn()

    PanelProgress.__module__ = __name__
    return PanelProgress


class _Tracker:
    """What `PanelProgress` does, framework-free: records each step, reports to `sink` when due, keeps the curves.

    `params` gives the callback's Keras params (steps, epochs) as they are now; `stopping` whether the model was
    told to stop (read only where the steps are unknown).
    """

    def __init__(
        self,
        sink,
        *,
        params,
        stopping,
        global_batch,
        clock,
        text_every,
        plot_every,
        budget,
        earlier,
        before=None,
        figure="accuracy",
    ):
        self.sink = sink
        self.figure = figure
        self._params = params
        self._stopping = stopping
        self.global_batch = global_batch
        self.clock = clock
        self.text = Throttle(text_every, budget / 4)
        self.plot = Throttle(plot_every, budget)
        self.earlier = earlier or {}
        self.before = before
        self._whole = 0  # the whole epochs the curves hold (kept and run)
        self.points: List[Tuple[int, Optional[float], Optional[float]]] = []
        self._mean_at = (0, 0.0, 0.0)
        self.epoch_ends: List[Tuple[int, Dict[str, float]]] = []
        self.progress = Progress()
        self._lock = threading.Lock()
        self._pending: List[Tuple[int, Dict]] = []  # (step in the epoch, logs) recorded, not yet drawn
        self._logs: Dict = {}
        self._reset()

    def _reset(self):
        self._begin = self.clock()
        self.meter = Meter(self.global_batch, *self._shape())
        self._stride = 1
        self._pointed = 0  # the global step of the latest point
        self._drawn = 0  # the latest step of this epoch drawn

    # ---- what the Keras hooks call ---------------------------------------
    def train_begin(self):
        self._reset()
        self.points, self.epoch_ends, self._whole = [], [], 0
        steps, epochs = self._shape()
        self._stride = max(1, steps * epochs // POINTS)
        if steps:  # Keras' own count: nothing plans the run twice to size the axes
            self.sink.sized(steps * epochs)

    def epoch_begin(self, epoch):
        self._mean_at = (0, 0.0, 0.0)  # (step in the epoch, running loss, running accuracy) at the last point
        if not self.meter.started:  # a resumed run starts at its first unfinished epoch: the axis goes on
            self._seed_earlier(epoch)
        with self._lock:
            self.meter.epoch(epoch, self.clock())
            self._pending, self._drawn = [], 0

    def batch_begin(self):
        now = self.clock()
        if self.text.due(now):
            self._report(now)

    def batch_end(self, batch, logs):
        now = self.clock()
        with self._lock:
            self.meter.step(batch + 1, now)
            self._pending.append((batch + 1, self._as_accuracy(logs)))

    def _as_accuracy(self, logs):
        """`logs` with the run's own figure (`figure`: reward_accuracy for a preference run) as its accuracy line."""
        if self.figure == "accuracy" or not logs:
            return logs
        return {**logs, "accuracy": logs.get(self.figure), "val_accuracy": logs.get("val_" + self.figure)}

    def epoch_end(self, logs):
        logs = self._as_accuracy(logs)
        self._draw_pending()
        # Keras ends an epoch cut short by a stop with validation too; the run keeps no such epoch (resume
        # redoes it, the record and the status line end at the last whole one), so neither do the curves.
        # The train line has the epoch's steps, so only validation is an epoch's point.
        if self._whole_epoch():
            self._whole += 1
            self.epoch_ends.append(
                (self.meter.global_step, {k: _metric(logs, k) for k in (logs or {}) if k.startswith("val_")})
            )
        now = self.clock()
        if self.text.due(now):
            self._report(now, logs)

    def train_end(self, logs):
        self._report(self.clock(), logs, force_plot=True, done=True)

    def drawn(self) -> Optional[Drawn]:
        steps = self._shape()[0]
        return Drawn(steps, self._whole, tuple(self.points)) if steps else None

    # ---- helpers ---------------------------------------------------------
    def _window(self, step, logs):
        """(loss, accuracy) of the steps since the last point: Keras logs running means over the epoch, which
        would draw a jump at every epoch start; a mean's difference gives the window's own mean (exact for
        equal batches, as tpukit's whole batches are)."""
        before, loss_before, acc_before = self._mean_at
        loss, accuracy = _metric(logs, "loss"), _metric(logs, "accuracy")
        self._mean_at = (step, loss, accuracy)
        if step <= before:
            return loss, accuracy
        return _window_mean(loss, loss_before, step, before), _window_mean(accuracy, acc_before, step, before)

    def _shape(self) -> Tuple[int, int]:
        params = self._params() or {}
        return int(params.get("steps") or 0), int(params.get("epochs") or 0)

    def _whole_epoch(self) -> bool:
        """Whether the epoch that ended ran all its steps (as `training.callbacks.whole_epoch`; the model is
        read only where the steps are unknown)."""
        steps = self._shape()[0]
        return self.meter.step_index >= steps if steps else not self._stopping()

    def _seed_earlier(self, epochs_kept: int) -> None:
        """The resumed run's kept epochs where the axis has them: the per-step points this kernel drew of them,
        and for any it did not draw (a new kernel), their means from the history, as markers at their ends."""
        steps = self._shape()[0]
        before = self.before if self.before is not None and self.before.steps_per_epoch == steps else None
        seen = min(epochs_kept, before.whole_epochs) if before is not None and steps else 0
        if seen:
            self.points.extend(p for p in before.points if p[0] <= seen * steps)
        for i in range(epochs_kept):
            values = {k: v[i] for k, v in self.earlier.items() if isinstance(v, list) and i < len(v)}
            if i < seen:  # its steps are drawn: the epoch's point is its validation
                values = {k: v for k, v in values.items() if k.startswith("val_")}
            if values:
                self.epoch_ends.append(((i + 1) * steps, values))
        self._whole = epochs_kept
        self._pointed = epochs_kept * steps

    def _draw_pending(self):
        """The recorded steps, in order, into the curve's points: the loss of every step, or of every few in
        a long run."""
        with self._lock:
            pending, self._pending = sorted(self._pending, key=lambda p: p[0]), []
            start = self.meter.global_step - self.meter.step_index  # the global step this epoch began at
        for step, logs in pending:
            if step <= self._drawn:
                continue  # reported twice
            self._drawn = step
            if (start + step) // self._stride > self._pointed // self._stride:
                self._pointed = start + step
                self.points.append((start + step, *self._window(step, logs)))
            self._logs = logs or {}

    def _report(self, now, logs=None, force_plot=False, done=False):
        self._draw_pending()
        logs = self._logs if logs is None else logs
        overhead = (self.text.spent + self.plot.spent) / max(now - self._begin, 1e-9)
        with self._lock:
            self.progress = self.meter.progress(
                now, loss=_metric(logs, "loss"), accuracy=_metric(logs, "accuracy"), done=done, overhead=overhead
            )
        self.sink.show_progress(self.progress)
        after_text = self.clock()
        self.text.done(now, after_text - now)
        if force_plot or self.plot.due(after_text):
            self.sink.show_curves(self.points, self.epoch_ends)
            self.plot.done(after_text, self.clock() - after_text)


def _window_mean(mean: Optional[float], mean_before: Optional[float], step: int, before: int) -> Optional[float]:
    """The mean of steps before+1..step, from the running means over 1..step and 1..before."""
    if mean is None or mean_before is None:
        return mean
    return (step * mean - before * mean_before) / (step - before)


def _metric(logs, key) -> Optional[float]:
    value = (logs or {}).get(key)
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None
