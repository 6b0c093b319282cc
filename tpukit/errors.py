"""Error text in one line: what went wrong, without the traceback a user cannot act on."""

from __future__ import annotations


def one_line(error: BaseException, limit: int = 200) -> str:
    """`TypeName: first line of the message`, cut at `limit` characters."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:limit]}" if text else type(error).__name__
