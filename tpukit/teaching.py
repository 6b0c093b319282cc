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


def check(ok, message: str) -> None:
    """Stops the self-check with `message` (what to look at again) unless `ok`."""
    if not ok:
        raise WrongAnswer(f"not quite: {message}")
