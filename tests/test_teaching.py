"""tpukit.teaching: the notebooks' self-checks. The measurements are injected: no test here times anything."""

import pytest

from tpukit.teaching import NotAnswered, WrongAnswer, answered, check, measured_until


def _figures(*values):
    """A measurement that returns `values` in turn, and counts its calls."""
    calls = []

    def measure():
        calls.append(None)
        return values[len(calls) - 1]

    return measure, calls


def test_a_figure_measured_in_a_busy_moment_passes_when_a_later_measurement_agrees():
    measure, calls = _figures(0.45, 0.47, 0.61)
    assert measured_until(measure, lambda got: abs(0.62 - got) <= 0.2) == 0.45
    assert len(calls) == 1
    measure, calls = _figures(0.95, 0.91, 0.50)  # the self-check's own first two were the busy ones
    assert measured_until(measure, lambda got: abs(0.45 - got) <= 0.2) == 0.50
    assert len(calls) == 3


def test_a_wrong_figure_is_measured_three_times_and_the_last_figure_is_what_the_reader_sees():
    measure, calls = _figures(0.45, 0.50, 0.48, 0.99)
    assert measured_until(measure, lambda got: abs(1.0 - got) <= 0.2) == 0.48
    assert len(calls) == 3


def test_the_checks_stop_with_one_line():
    with pytest.raises(NotAnswered, match=r"^not answered yet: .*Hint: divide"):
        answered(..., "divide")
    assert answered(0.5, "divide") == 0.5
    with pytest.raises(WrongAnswer) as caught:
        check(False, "K=136 takes 0.45 of K=256's time")
    assert caught.value._render_traceback_() == ["WrongAnswer: not quite: K=136 takes 0.45 of K=256's time"]
