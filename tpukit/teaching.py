"""The notebooks' exercise checks: an unanswered or wrong answer stops the cell with one line, not a traceback.

Jupyter and Colab show an exception as a traceback, and "Run all" stops at the first cell that raises. IPython
draws an exception that has `_render_traceback_` as the lines that method returns, so an exercise left open stops
"Run all" with a single line that says which cell to fill in, and a wrong answer says what to look at.

Each exercise in the notebooks is three cells: the reader's `...`, a folded solution that fills the answer in only
when `SOLUTIONS` is on (`TPUKIT_SOLUTIONS=1`, what the tests set), and a self-check built from `answered` and
`check`. This module needs nothing beyond the standard library.
"""

from __future__ import annotations

import os

from tpukit.errors import TpukitError

SOLUTIONS = os.environ.get("TPUKIT_SOLUTIONS") == "1"


class ExerciseError(TpukitError, AssertionError):
    """A self-check that did not pass. Drawn as one line in IPython; a plain AssertionError elsewhere."""

    def _render_traceback_(self):  # IPython's hook: these lines replace the traceback
        return [f"{type(self).__name__}: {self}"]


class NotAnswered(ExerciseError):
    """The exercise cell above still holds its `...` placeholder."""


class WrongAnswer(ExerciseError):
    """The answer was given and does not match what the self-check measured."""


def answered(value, hint: str):
    """Returns `value`, or stops the self-check with `hint` while it is still the `...` placeholder."""
    if value is ...:
        raise NotAnswered(f"not answered yet: replace the `...` in the exercise cell above. Hint: {hint}")
    return value


def measured_until(measure, agrees, attempts: int = 3):
    """Calls `measure()` up to `attempts` times; returns the first result `agrees` accepts, else the last one.

    A timing self-check compares the reader's figure with its own measurement, and a shared machine (Colab's
    too) can be busy while one of them measures and calm while the other does. So the self-check measures again
    before it calls a figure wrong, and a figure measured in a calm moment or a busy one both pass.
    """
    for _ in range(attempts):
        result = measure()
        if agrees(result):
            break
    return result


def check(ok, message: str) -> None:
    """Stops the self-check with `message` (what to look at again) unless `ok`."""
    if not ok:
        raise WrongAnswer(f"not quite: {message}")
