"""Error text in one line: what went wrong, without the traceback a user cannot act on."""

from __future__ import annotations

import re

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
