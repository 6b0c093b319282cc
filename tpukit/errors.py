"""The base of every error and warning tpukit raises, and error text in one line.

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
