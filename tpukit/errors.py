"""The base of every error and warning tpukit raises, error text in one line, and how Jupyter shows such an error.

Each error class lives beside the concept it guards (`ConfigError` with `RunConfig`, `ConnectError` with
`Runtime`), and every one derives from `TpukitError`: a caller (the CLI, the panel, a user's `except`) sorts them
by class, never by module. Each keeps the builtin base it had (`ValueError` for bad input, `RuntimeError` for the
environment), so an `except ValueError` written against it still catches it.
"""

from __future__ import annotations

import re


class TpukitError(Exception):
    """An error tpukit raises on purpose: its message is one line that says what went wrong and what to do.

    `bad_input`: the user's input is wrong (a setting, a name, the data, the model), so the CLI exits 2;
    otherwise the environment or a run's state is (exit 1). `topic`: what the CLI says before the message.
    """

    bad_input = False
    topic = ""

    def _render_traceback_(self):
        """In Jupyter: the caller's own lines and this one-line message, not tpukit's frames (`short_traceback`)."""
        return short_traceback(self)


class TpukitWarning(UserWarning):
    """A warning tpukit gives on purpose: advice a run goes on without."""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras bolds the message of an error raised in a layer
_KERAS_WRAPPER = re.compile(r"Exception encountered when calling (.+?)\.?")


def one_line(error: BaseException, limit: int = 200) -> str:
    """`TypeName: first line of the message`, cut at `limit` characters of message.

    Keras wraps an error raised in a layer as "Exception encountered when calling
    X.call()." with the error's own message on a later line: that line is shown.
    """
    lines = [line.strip() for line in _ANSI.sub("", str(error)).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    wrapped = _KERAS_WRAPPER.fullmatch(text)
    if wrapped and len(lines) > 1:
        text = f"{lines[1]} (in {wrapped.group(1)})"
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def short_traceback(error: BaseException) -> list:
    """How Jupyter shows one of tpukit's one-line errors: the caller's own lines and the message, not tpukit's frames.

    IPython shows an exception that has a `_render_traceback_` method as the lines it returns; tpukit's one-line
    errors name this function so. A bad input then shows as the line of the cell that passed it and the sentence
    that says what to fix, instead of 30 lines through tpukit's internals that the user cannot act on. A cause
    the user's own code raised (a model factory's error) is shown first, over its frames in the user's code; a cause
    raised inside an installed library (KerasHub's download, h5py) is not: the message already says it in a line,
    and its 10-15 frames of kagglehub and requests are nothing the user can act on. `%xmode Verbose` shows the whole
    traceback, tpukit's and the libraries' frames included; `%debug` walks the whole of it.
    """
    try:
        from IPython import get_ipython

        formatter = getattr(get_ipython(), "InteractiveTB", None)
    except Exception:  # no IPython: whoever asked gets plain text
        formatter = None
    try:
        if formatter is None:
            return _plain_lines(error)
        if getattr(formatter, "mode", "") in ("Verbose", "Minimal"):  # the user asked for all, or only the message
            return formatter.structured_traceback(type(error), error, error.__traceback__)
        lines = []
        cause = error.__cause__
        if cause is not None and _outside(cause.__traceback__) is not None:
            lines += _formatted(formatter, cause)
            lines += ["", "The above exception was the direct cause of the following exception:", ""]
        lines += _formatted(formatter, error)
        if "tb" in vars(formatter):  # what %debug walks, as IPython sets it for any traceback it shows: the whole
            formatter.tb = error.__traceback__
        return lines
    except Exception:  # never let the short form hide the error: Python's own text of it
        import traceback

        return [line.rstrip("\n") for line in traceback.format_exception(type(error), error, error.__traceback__)]


def _formatted(formatter, error: BaseException) -> list:
    """IPython's rendering of `error` alone (no chained cause), over its frames in the user's code (`_outside`)."""
    cause, context, suppress = error.__cause__, error.__context__, error.__suppress_context__
    error.__cause__, error.__context__, error.__suppress_context__ = None, None, True
    try:
        return formatter.structured_traceback(type(error), error, _outside(error.__traceback__))
    finally:
        error.__cause__, error.__context__, error.__suppress_context__ = cause, context, suppress


def _plain_lines(error: BaseException) -> list:
    import traceback

    tb = _outside(error.__traceback__)
    text = (
        traceback.format_exception(type(error), error, tb, chain=False)
        if tb
        else traceback.format_exception_only(type(error), error)
    )
    return "".join(text).rstrip("\n").splitlines()


def _outside(tb):
    """`tb` without the frames in tpukit's package, IPython's (its cell runner), the installed packages and the
    standard library: the frames of the user's own code; None if none is left."""
    import os
    import sys
    import sysconfig
    import types

    roots = [os.path.dirname(os.path.abspath(__file__))]
    ipython = sys.modules.get("IPython")
    if getattr(ipython, "__file__", None):
        roots.append(os.path.dirname(os.path.abspath(ipython.__file__)))
    paths = sysconfig.get_paths()
    roots += [os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths]
    roots = tuple(root + os.sep for root in roots)
    kept = []
    while tb is not None:
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(roots):
            kept.append(tb)
        tb = tb.tb_next
    shown = None
    for t in reversed(kept):
        shown = types.TracebackType(shown, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return shown
