"""Hide the C++ log lines that native libraries print before their logging is set up.

TensorFlow 2.21 (and gRPC, XLA) log through Abseil. Until a program calls
`absl::InitializeLog()`, Abseil writes every message to stderr whatever its
severity, so `TF_CPP_MIN_LOG_LEVEL` cannot hide "WARNING: All log messages
before absl::InitializeLog() ..." or the oneDNN banner that follows it
(seen on AMD EPYC CPUs here, twice per process). Python cannot reach those
writes: they go straight to file descriptor 2. So the quiet CLI puts a pipe
on descriptor 2 and a thread copies everything through except whole lines in
the form of a native log line (`I0000 00:00:1795... 8845 port.cc:153] ...`)
and Abseil's pre-init warning. `--verbose` leaves stderr alone.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading

_LINE = re.compile(rb"^(WARNING: All log messages before absl::InitializeLog\(\)|[IWE]\d{4} [\d:.]+\s+\d+ \S+:\d+\])")
# A partial line that may become one of those is held back until its end comes; anything else passes at once
# (a progress line rewritten with "\r" has no line end).
_MAYBE = re.compile(rb"^(W(A(R(N(I(N(G(:( .*)?)?)?)?)?)?)?)?|[IWE]\d{0,4}( [\d:.]*)?(\s+\d*)?( \S*)?)$", re.S)


def hide_native_log_lines() -> bool:
    """Filter descriptor 2 for the rest of the process (see the module docstring); False where it cannot."""
    try:
        sys.stderr.flush()
        original = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
    except OSError:
        return False
    thread = threading.Thread(target=_copy, args=(read, original), name="tpukit-stderr", daemon=True)
    thread.start()

    def restore():  # whatever is still in the pipe comes out, then descriptor 2 is the real one again
        global _restore
        _restore = None
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(original, 2)  # the pipe's last write end closes: the thread reads to its end
        thread.join(2)

    global _restore
    _restore = restore
    atexit.register(flush)
    return True


_restore = None


def flush() -> None:
    """Let everything written so far through, and stop filtering; call it before `os._exit` (atexit is skipped)."""
    if _restore is not None:
        _restore()


def _copy(read: int, out: int) -> None:
    pending = b""
    while True:
        try:
            chunk = os.read(read, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            if pending:
                _write(out, pending)
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        kept = b"".join(line + b"\n" for line in lines if not _LINE.match(line))
        if pending and not _MAYBE.match(pending):
            kept, pending = kept + pending, b""
        if kept:
            _write(out, kept)


def _write(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass
