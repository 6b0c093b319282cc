"""The record of a run while it trains: what stays, what grows, and result.json rewritten at each change.

A run opens its `Recording` once its directory exists; the Keras callback that watches the epochs
(`training.callbacks.RunRecorder`) adds each whole epoch to it and so writes it; the run ends it with its
status. The history has one shape, {metric: [value per epoch]}, as `RunResult.history`, and only whole
epochs enter it. `measure` registers what the run measures as it goes (speed, compilations), read at
every write, so a killed run's result.json says how far it got and how fast.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from tpukit.runs import records
from tpukit.runs.records import RunResult

History = Dict[str, List[float]]


def epochs_in(history: History) -> int:
    """How many whole epochs a history holds."""
    return len(next(iter(history.values()), ()))


def first_epochs(history: History, n: int) -> History:
    """The first `n` epochs of a history (what a resume continues from)."""
    return {k: list(v[:n]) for k, v in history.items()}


class Recording:
    """The run in `run_dir`, recorded as it trains; `save(status)` writes it and returns the `RunResult`.

    Args:
        run_dir: the run's directory (result.json goes there).
        history: the epochs kept before this execution (a resume's, an extension's parent's), else {}.
        notes: the run's notes, a list the run goes on appending to (why each choice, what it did).
        **fixed: the fields of `RunResult` that stay for the whole run (config, runtime, data, parent, ...).
    """

    def __init__(self, run_dir, history: History, notes: List[str], **fixed: Any):
        self.run_dir = str(run_dir)
        self.history = first_epochs(history, epochs_in(history))
        self.notes = notes
        self.fixed = fixed
        self._measures: List[Callable[[], Dict[str, Any]]] = []

    @property
    def epochs_done(self) -> int:
        return epochs_in(self.history)

    def measure(self, fields: Callable[[], Dict[str, Any]]) -> None:
        """Read `fields()` (a dict of RunResult fields: examples_per_sec, compiles, ...) at every write."""
        self._measures.append(fields)

    def add_epoch(self, row: Dict[str, float]) -> None:
        """Append a whole epoch's metrics (`row`: Keras' logs and the "epoch" index) and write the record. A metric
        missing on one side is None there, so the columns stay aligned."""
        done = self.epochs_done
        for key, value in row.items():
            if key != "epoch":
                self.history.setdefault(key, [None] * done).append(value)
        for values in self.history.values():
            if len(values) == done:
                values.append(None)
        self.save("running")

    def keep_epochs(self, n: int) -> None:
        """Drop the epochs after the first `n` (a run that ended badly keeps those its backups can continue)."""
        self.history = first_epochs(self.history, n)

    def result(self, status: str, message: str = "", **final: Any) -> RunResult:
        """The record as a `RunResult`; `final` adds what only the end knows (why it stopped, test metrics,
        fingerprint, MFU, profile files)."""
        fields = dict(self.fixed, run_dir=self.run_dir, status=status, message=message, notes=tuple(self.notes),
                      history=first_epochs(self.history, self.epochs_done), epochs_done=self.epochs_done)
        if self.epochs_done:
            fields["final_metrics"] = {k: v[-1] for k, v in self.history.items()}
        for measured in self._measures:
            fields.update(measured())
        fields.update(final)
        return RunResult(**fields)

    def save(self, status: str, message: str = "", **final: Any) -> RunResult:
        """Write result.json (atomically) with `status`, and return what was written."""
        result = self.result(status, message, **final)
        records.save_result(result)
        return result
