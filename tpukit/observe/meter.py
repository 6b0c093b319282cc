"""One progress model for every face: where a run is, how fast it goes, and when it will end.

tqdm keeps its arithmetic in a core that its terminal and notebook bars
share; tpukit does the same. A `Meter` is fed the run's epoch and step
events with a clock reading and gives a `Progress`: the CLI's text lines
(`callbacks.ProgressLogger`) and the panel's progress line and bar
(`tpukit.ui.progress`) are two views of it, so they never disagree on a rate
or an ETA.

- examples/s has one definition, here: the examples of the timed steps over
  their wall time. Every step is timed except the run's first, which
  compiles (its time is recorded apart, as the time to the first step); an
  epoch is timed from its start to its latest step's end (the run's first
  epoch from its first step's end), so a recompilation or an input pipeline
  refilling after validation counts, as on a stopwatch, while validation and
  the time between epochs do not. The live figure is the current epoch's; the
  run's (`run_rate`) is all its epochs together: the summary, result.json and
  `tune_batch_size` report it.
- The ETA is the steps left times the time per step since the run's first
  step ended (the first step compiles, so it is left out).
- A resumed run starts at its first unfinished epoch, and the step count goes
  on from the epochs it kept.
- Steps may be reported late and out of order (Keras 3 runs `async_safe`
  callbacks in a thread pool on JAX): a report of an earlier step than the
  latest only moves the latest end time, unless its clock reading is no later
  than the run's first report's (the threads raced): then it is the first step.

`text_progress` turns `train()`'s `verbose` and `progress` into where and how the text lines go (Keras'
meaning of verbose: a line updated in place, or one line per epoch, or nothing).

No Keras or TensorFlow here: the callbacks that feed a Meter live in their
own modules.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Dict, Optional, Tuple

from tpukit.config import ConfigError


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where a run is. `epoch` counts from 0, `step` within the epoch; `overhead`: the share of wall time a view
    took to show it (None: not measured)."""

    epoch: int = 0
    epochs: int = 0
    step: int = 0
    steps: int = 0
    global_step: int = 0
    examples_per_sec: Optional[float] = None
    eta_s: Optional[float] = None
    loss: Optional[float] = None
    accuracy: Optional[float] = None
    overhead: Optional[float] = None
    done: bool = False

    @property
    def fraction(self) -> float:
        """How much of the run is done, 0..1."""
        total = self.epochs * self.steps
        return min(1.0, (self.epoch * self.steps + self.step) / total) if total else 0.0

    def text(
        self, sep: str = "  ·  ", metrics: Optional[Dict[str, Any]] = None, elapsed: Optional[float] = None
    ) -> str:
        """One line: epoch, step, loss, accuracy, examples/s, elapsed, ETA (and the view's overhead where measured).

        `metrics`: Keras' logs, shown in place of loss and accuracy (the CLI shows validation metrics too).
        `elapsed`: the seconds the epoch has taken so far, shown as "7.5s", or "40ms" under a tenth of a second
        (the text lines show it; None: not shown).
        """
        steps = f"/{self.steps}" if self.steps else ""
        parts = [f"epoch {min(self.epoch + 1, self.epochs)}/{self.epochs}", f"step {self.step}{steps}"]
        if metrics is not None:
            parts += [f"{k} {float(v):.4f}" for k, v in metrics.items() if _is_number(v)]
        else:
            parts += [f"{k} {v:.4f}" for k, v in (("loss", self.loss), ("accuracy", self.accuracy)) if v is not None]
        if self.examples_per_sec:
            parts.append(f"{self.examples_per_sec:,.0f} examples/s")
        if elapsed is not None:
            parts.append(seconds(elapsed))
        if self.eta_s is not None and not self.done:
            parts.append(f"ETA {duration(self.eta_s)}")
        if self.overhead is not None:
            parts.append(f"this display cost {100 * self.overhead:.2f}% of the run's time")
        return sep.join(parts)


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def updates_in_place(stream) -> bool:
    """Whether `stream` shows a line that starts with a carriage return in place of the one before: a terminal,
    or a Jupyter kernel's stdout or stderr (JupyterLab, Notebook, Colab and VS Code treat "\\r" in stream output
    as a terminal does, as Keras' Progbar and tqdm's text bar rely on).

    A question about the stream, not about the front end: it is asked of the stream's type, so no IPython is
    imported, and a file or a pipe (a log, the CLI's stderr under a test) gets whole lines only.
    """
    if kernel_stream(stream):
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def kernel_stream(stream) -> bool:
    """Whether `stream` is a Jupyter kernel's output stream (ipykernel's OutStream, which Colab runs too)."""
    return type(stream).__module__.split(".")[0] == "ipykernel"


VERBOSE = ("auto", 0, 1, 2)


@dataclasses.dataclass(frozen=True)
class TextProgress:
    """A run's progress text: the stream it goes to, and whether a line is refreshed in place during each epoch
    (`callbacks.ProgressLogger`)."""

    stream: Any
    live: bool


def text_progress(verbose, stream) -> Optional[TextProgress]:
    """Where and how a run writes its progress text, from `train()`'s `verbose` and `progress` (None: silent).

    Raises:
        ConfigError: `verbose` is none of "auto", 0, 1, 2.
    """
    if verbose not in VERBOSE:  # True and False count as 1 and 0, as in Keras
        raise ConfigError(
            f"verbose must be one of 'auto', 0, 1, 2 (as Keras' fit). Received: verbose={verbose!r}",
            value=verbose,
            expected="'auto', 0, 1 or 2",
            choices=VERBOSE,
        )
    if verbose == 0:
        return None
    stream = stream if stream is not None else sys.stdout  # read now: a notebook kernel replaces sys.stdout
    return TextProgress(stream, live=verbose != 2 and updates_in_place(stream))


def seconds(value: float) -> str:
    """'7.5s', or '40ms' under a tenth of a second (never '0.0s')."""
    if value >= 0.1:
        return f"{value:.1f}s"
    return f"{max(1, round(1000 * value))}ms" if value >= 0.0005 else "<1ms"


def duration(seconds: float) -> str:
    """'42s', or '3m 05s' from a minute on."""
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Meter:
    """Counts a run's steps against a clock and says where it is (see the module docstring).

    Args:
        global_batch: examples per step, for the rate.
        steps: steps per epoch (0 when unknown: no ETA then).
        epochs: epochs in the run.

    >>> m = Meter(global_batch=10, steps=4, epochs=2)
    >>> m.epoch(0, now=0.0); m.step(1, now=1.0); m.step(2, now=1.5); m.step(3, now=2.0)
    >>> p = m.progress(now=2.0); (p.global_step, p.examples_per_sec, p.eta_s)
    (3, 20.0, 2.5)
    """

    def __init__(self, global_batch: int, steps: int, epochs: int):
        self.global_batch = global_batch
        self.steps = steps or 0
        self.epochs = epochs
        self.epoch_index = 0
        self.step_index = 0  # steps done in this epoch
        self.global_step = 0
        self.started = False  # the first epoch seen: a resumed run's step count starts after its kept epochs
        self.rate: Optional[float] = None
        self._first: Optional[Tuple[float, int]] = None  # (time, global step) after the run's first step
        self._mark: Optional[Tuple[float, int]] = None  # (time, global step) this epoch's timing starts from
        self._done = (0.0, 0)  # (seconds, steps) timed in the epochs before this one
        self._last = 0.0  # the time the latest step ended

    def epoch(self, epoch: int, now: float) -> None:
        """An epoch begins (Keras counts from 0)."""
        self._fold()
        if not self.started:
            self.started = True
            self.global_step = epoch * self.steps
        self.epoch_index, self.step_index = epoch, 0
        # The run's first epoch is timed from its first step's end (that step compiles); later ones from their start.
        self._mark = (now, self.global_step) if self._first is not None else None

    def step(self, step: int, now: float) -> None:
        """`step` steps of this epoch are done (1-based, as Keras' batch index + 1)."""
        self._last = max(self._last, now)
        if step <= self.step_index:
            self._late(step, now)
            return
        self.global_step += step - self.step_index
        self.step_index = step
        if self._first is None:
            self._first = (now, self.global_step)
        if self._mark is None:
            self._mark = (now, self.global_step)

    def _late(self, step: int, now: float) -> None:
        """A report of an earlier step than the latest. Where it read the clock no later than the run's first
        report did (two pool threads raced for the meter), it is the run's first step after all: the timing and
        the time to the first step start from it. Otherwise (its hook ran late) it only moved the latest end."""
        earlier = self.global_step - (self.step_index - step)
        if self._first is None or earlier >= self._first[1] or now > self._first[0]:
            return
        if self._mark == self._first:
            self._mark = (now, earlier)
        self._first = (now, earlier)

    def timed(self) -> Tuple[float, int]:
        """(seconds, steps) of the run's timed steps so far: see the module docstring."""
        seconds, steps = self._done
        if self._mark is not None and self.global_step > self._mark[1]:
            seconds, steps = seconds + self._last - self._mark[0], steps + self.global_step - self._mark[1]
        return seconds, steps

    def run_rate(self) -> Optional[float]:
        """The run's examples/s: every timed step of every epoch so far (None before two steps)."""
        seconds, steps = self.timed()
        return steps * self.global_batch / seconds if steps and seconds > 0 else None

    def first_step_end(self) -> Optional[float]:
        """When the run's first step ended (None before it)."""
        return self._first[0] if self._first else None

    def _fold(self) -> None:
        self._done = self.timed()
        self._mark = None

    def progress(
        self,
        now: float,
        *,
        loss: Optional[float] = None,
        accuracy: Optional[float] = None,
        done: bool = False,
        overhead: Optional[float] = None,
    ) -> Progress:
        """Where the run is at `now`, with the rate and ETA as of its latest step."""
        if self._mark is not None and self.global_step > self._mark[1] and self._last > self._mark[0]:
            self.rate = (self.global_step - self._mark[1]) * self.global_batch / (self._last - self._mark[0])
        eta = None
        if self.steps and self._first is not None and self.global_step > self._first[1]:
            per_step = (self._last - self._first[0]) / (self.global_step - self._first[1])
            remaining = (self.epochs - self.epoch_index - 1) * self.steps + (self.steps - self.step_index)
            eta = max(0.0, remaining * per_step)
        return Progress(
            epoch=self.epoch_index,
            epochs=self.epochs,
            step=self.step_index,
            steps=self.steps,
            global_step=self.global_step,
            examples_per_sec=self.rate,
            eta_s=eta,
            loss=loss,
            accuracy=accuracy,
            overhead=overhead,
            done=done,
        )
