"""The log lines native libraries print before their logging is set up, and a filter that drops them.

TensorFlow (and gRPC, XLA) log through Abseil. Until a program calls `absl::InitializeLog()`, Abseil writes
every message to file descriptor 2 whatever its severity, so `TF_CPP_MIN_LOG_LEVEL` cannot hide "WARNING: All
log messages before absl::InitializeLog() ..." or the oneDNN banner that follows it (twice per import of
TensorFlow, on the CPUs seen here). In Jupyter the kernel copies descriptor 2 into the cell, where they show in
red as if something had failed. Python cannot reach those writes, so `dropped_from_stderr` puts a pipe on
descriptor 2 while TensorFlow is imported and copies every other line through. The CLI filters its whole run
with the same `Filter` (`tpukit.cli.nativelog`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading

LINE = re.compile(rb"^(WARNING: All log messages before absl::InitializeLog\(\)|[IWE]\d{4} [\d:.]+\s+\d+ \S+:\d+\])")
# A partial line that may become one of those is held back until its end comes; anything else passes at once
# (a progress line rewritten with "\r" has no line end).
MAYBE = re.compile(rb"^(W(A(R(N(I(N(G(:( .*)?)?)?)?)?)?)?)?|[IWE]\d{0,4}( [\d:.]*)?(\s+\d*)?( \S*)?)$", re.S)


class Filter:
    """Copies bytes to descriptor `out`, dropping whole native log lines."""

    def __init__(self, out: int):
        self.out = out
        self.pending = b""

    def feed(self, chunk: bytes) -> bool:
        """Take `chunk` (b"": the end); False at the end."""
        if not chunk:
            if self.pending:
                write(self.out, self.pending)
                self.pending = b""
            return False
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        kept = b"".join(line + b"\n" for line in lines if not LINE.match(line))
        if self.pending and not MAYBE.match(self.pending):
            kept, self.pending = kept + self.pending, b""
        if kept:
            write(self.out, kept)
        return True


def write(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass


@contextlib.contextmanager
def dropped_from_stderr():
    """Inside, native log lines written to descriptor 2 are dropped and everything else passes (Linux only)."""
    try:
        if not sys.platform.startswith("linux"):
            raise OSError("not Linux")
        original = os.dup(2)
    except OSError:
        yield
        return
    read, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    lines = Filter(original)

    def pump():
        while lines.feed(read_chunk(read)):
            pass

    copier = threading.Thread(target=pump, name="tpukit-native-lines", daemon=True)
    copier.start()
    try:
        yield
    finally:
        os.dup2(original, 2)  # the pipe's last write end closes: the copier reads its end and stops
        copier.join(timeout=5)
        if not copier.is_alive():
            os.close(read)
        os.close(original)


def read_chunk(fd: int) -> bytes:
    """What the pipe holds now (b"": its end, or an error)."""
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""
