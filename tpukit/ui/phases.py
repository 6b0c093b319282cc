"""What the panel's status line says while a run goes on: the phase it is in, from the progress model.

A run goes through building (the model and the input pipeline), its first step (tracing and compiling, which
can take minutes), its epochs and steps, maybe stopping, and an end. `RunStatus` tells them apart from what
the run's progress callback reports (`tpukit.ui.progress.make_callback`): it is the callback's sink, passes
every report on to the view's own sink (the progress line, the bar, the curves) and words the phase for the
status line through `say`. So the status line and the progress line read one `Progress`, and neither can be
left behind by the other ("Starting…" at epoch 2 step 19).

During building and the first step no step report comes, so a `tick` (once a second, from the controller's
ticker thread where the page shows updates made from threads, i.e. not in Colab) says the seconds so far.
No widgets here.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

BUILDING, FIRST_STEP, TRAINING, TRAINED, STOPPING, ENDED = (
    "building",
    "first step",
    "training",
    "trained",
    "stopping",
    "ended",
)


class RunStatus:
    """A run's phase, said on the status line as it changes; the progress sink of the run's callback.

    Args:
        sink: the view's progress sink, which every report is passed on to.
        say: shows a status line (the controller's `_say`).
        name: the run's name, as the status names it.
        clock: seconds (the controller's clock).
        resumed_from: the epoch (1-based) a resume continues from; None for a new run.
        extends_to: the epochs a completed run is extended to (a resume with epochs=N); None otherwise.
        ticking: whether `tick` will be called (elapsed seconds are shown only then: a number that never
            moves would be wrong a second later).
    """

    def __init__(
        self,
        sink,
        say: Callable[[str], None],
        name: str,
        clock: Callable[[], float],
        *,
        resumed_from: Optional[int] = None,
        extends_to: Optional[int] = None,
        ticking: bool = False,
    ):
        self.sink = sink
        self.say = say
        self.name = name
        self.clock = clock
        self.resumed_from = resumed_from
        self.extends_to = extends_to
        self.ticking = ticking
        self.phase: Optional[str] = None
        self.progress = None
        self._since = 0.0
        self._said = ""
        self._lock = threading.RLock()  # a view may act on what it is told (a Stop), from inside `say`

    # ---- the words ---------------------------------------------------------------------------------------
    def lead(self) -> str:
        """How the status names the run: "Starting mlp-digits", "Resuming mlp-digits from epoch 2"."""
        if self.extends_to is not None:
            return f"Extending {self.name} to {self.extends_to} epochs, from epoch {self.resumed_from}"
        if self.resumed_from is not None:
            return f"Resuming {self.name} from epoch {self.resumed_from}"
        return f"Starting {self.name}"

    def text(self, now: Optional[float] = None) -> str:
        """The status line for the phase the run is in (at `now`, for the phases that show their seconds)."""
        phase, p = self.phase, self.progress
        seconds = f" ({int(now - self._since)} s so far)" if now is not None and now - self._since >= 1 else ""
        if phase == BUILDING:
            return f"{self.lead()}: building the model and the input pipeline…{seconds}"
        if phase == FIRST_STEP:
            where = f"{self.lead()}: first step" if self.resumed_from is not None else f"First step of {self.name}"
            return f"{where}: tracing and compiling the model…{seconds}"
        if phase == TRAINING:
            where = (
                f"Training {self.name}"
                if self.resumed_from is None
                else f"Resumed {self.name} from epoch {self.resumed_from}"
            )
            steps = f"/{p.steps}" if p.steps else ""
            return f"{where}: epoch {min(p.epoch + 1, p.epochs)}/{p.epochs}, step {p.step}{steps}"
        if phase == TRAINED:
            return f"Trained {self.name}: saving the weights and the record…"
        if phase == STOPPING:
            return f"Stopping {self.name} after the current step…"
        return self._said

    # ---- the phases, as they change ----------------------------------------------------------------------
    def building(self) -> None:
        """The run is being set up (connected): the model and the input pipeline are built."""
        with self._lock:
            if self.phase is None:
                self._enter(BUILDING)

    def stopping(self) -> None:
        """A stop was asked for: said until the run ends, whatever progress comes in meanwhile."""
        with self._lock:
            if self.phase != ENDED:
                self._enter(STOPPING)

    def tick(self) -> None:
        """Say the seconds so far, where the phase shows them."""
        with self._lock:
            if self._timed():
                self._show()

    def close(self) -> None:
        """The run has ended: nothing more is said (the controller says how it ended)."""
        with self._lock:
            self.phase = ENDED

    def _enter(self, phase: str) -> None:
        self.phase = phase
        if self._timed():
            self._since = self.clock()
        self._show()

    def _timed(self) -> bool:
        """Whether the phase shows its seconds (the clock is read only then: a step's report reads none)."""
        return self.ticking and self.phase in (BUILDING, FIRST_STEP)

    def _show(self) -> None:
        text = self.text(self.clock() if self._timed() else None)
        if text and text != self._said:
            self._said = text
            self.say(text)

    # ---- the progress sink (`tpukit.ui.progress`): passed on, and read for the phase ---------------------
    @property
    def latest(self):
        return self.sink.latest

    def start(self, name: str, foreground: bool, loss_top: float, chart: str = "accuracy") -> None:
        self.sink.start(name, foreground, loss_top, lead=self.lead(), chart=chart)
        self.building()

    def sized(self, total_steps: int) -> None:
        self.sink.sized(total_steps)

    def waiting(self, text: str) -> None:
        self.sink.waiting(text)

    def failed(self, text: str) -> None:
        self.sink.failed(text)

    def show_progress(self, progress) -> None:
        self.sink.show_progress(progress)
        with self._lock:
            self.progress = progress
            if self.phase in (STOPPING, ENDED):
                return
            if progress.done:
                self._enter(TRAINED)
            elif self.phase == TRAINING or progress.step > 0:
                self.phase = TRAINING
                self._show()
            elif self.phase != FIRST_STEP:  # fit began, and no step has ended: the first one compiles
                self._enter(FIRST_STEP)

    def show_curves(self, points, epochs) -> None:
        self.sink.show_curves(points, epochs)

    def finish(self, result) -> None:
        self.close()
        self.sink.finish(result)
