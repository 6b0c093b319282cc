"""Hide the C++ log lines that native libraries print before their logging is set up.

TensorFlow 2.21 (and gRPC, XLA) log through Abseil. Until a program calls
`absl::InitializeLog()`, Abseil writes every message to stderr whatever its
severity, so `TF_CPP_MIN_LOG_LEVEL` cannot hide "WARNING: All log messages
before absl::InitializeLog() ..." or the oneDNN banner that follows it
(seen on AMD EPYC CPUs here, twice per process). Python cannot reach those
writes: they go straight to file descriptor 2. So the quiet CLI puts a pipe
on descriptor 2, and a small filter process copies everything through except
whole lines in the form of a native log line (`I0000 00:00:1795... 8845
port.cc:153] ...`) and Abseil's pre-init warning. `--verbose` leaves stderr
alone.

The filter is a process, not a thread: when the program dies (a C++ abort,
a segfault, os._exit), what it wrote last is still read to the end and shown.
With a thread, a gloo abort's "what(): ..." lost its line end, and the next
line was glued to it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

_LINE = re.compile(rb"^(WARNING: All log messages before absl::InitializeLog\(\)|[IWE]\d{4} [\d:.]+\s+\d+ \S+:\d+\])")
# A partial line that may become one of those is held back until its end comes; anything else passes at once
# (a progress line rewritten with "\r" has no line end).
_MAYBE = re.compile(rb"^(W(A(R(N(I(N(G(:( .*)?)?)?)?)?)?)?)?|[IWE]\d{0,4}( [\d:.]*)?(\s+\d*)?( \S*)?)$", re.S)

_filter: "subprocess.Popen | None" = None
_original: "int | None" = None


def hide_native_log_lines() -> bool:
    """Filter descriptor 2 for the rest of the process (see the module docstring); False where it cannot."""
    global _filter, _original
    if _filter is not None:
        return True
    try:
        sys.stderr.flush()
        read, write = os.pipe()
        try:
            # This file as a script, without site or tpukit's package: the filter needs only the standard library.
            _filter = subprocess.Popen([sys.executable, "-S", os.path.abspath(__file__)], stdin=read, stdout=2,
                                       stderr=subprocess.DEVNULL, close_fds=True)
        finally:
            os.close(read)
        _original = os.dup(2)
        os.dup2(write, 2)
        os.close(write)
    except OSError:
        return False
    return True


def flush() -> None:
    """Let everything written so far through and stop filtering; call it before `os._exit` (no atexit there)."""
    global _filter, _original
    if _filter is None:
        return
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(_original, 2)  # this process's write end closes; the filter reads to the end once no child holds one
    os.close(_original)
    try:
        _filter.wait(2)
    except subprocess.TimeoutExpired:
        pass
    _filter = _original = None


def copy(read: int, out: int) -> None:
    """Copy `read` to `out` until its end, dropping whole native log lines."""
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


if __name__ == "__main__":  # the filter process: stdin is the pipe, stdout the real stderr
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the program; the filter reads to the end
    copy(0, 1)
