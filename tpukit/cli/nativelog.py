"""Hide the C++ log lines that native libraries print before their logging is set up.

TensorFlow 2.21 (and gRPC, XLA) log through Abseil. Until a program calls
`absl::InitializeLog()`, Abseil writes every message to stderr whatever its
severity, so `TF_CPP_MIN_LOG_LEVEL` cannot hide "WARNING: All log messages
before absl::InitializeLog() ..." or the oneDNN banner that follows it
(seen on AMD EPYC CPUs here, twice per process). Python cannot reach those
writes: they go straight to file descriptor 2. So the quiet CLI puts a pipe
on descriptor 2 and drops whole lines in the form of a native log line
(`I0000 00:00:1795... 8845 port.cc:153] ...`) and Abseil's pre-init warning.
`--verbose` leaves stderr alone.

Who filters: the process that was started. It forks; the child runs the
program with descriptor 2 on the pipe, and the parent copies the pipe to the
real stderr, waits for the child, reads what is left in the pipe and exits
with the child's status (or dies by the child's signal). So the last line is
on stderr before anyone sees the exit status, whatever ends the program:
a return, `os._exit`, a C++ abort, a segfault. A filter beside the program
(a thread, or a child process) loses that race: a thread died with an abort
and lost its last line end, and a filter process was still writing when the
exit status of a fast failure arrived (8 runs in 10 of `train --resume
/nonexistent/run` with stderr in a file: nothing there yet).

The parent passes on the signals sent to it (SIGTERM, SIGHUP, SIGUSR1/2, and
SIGINT from `kill`); a Ctrl-C at the terminal already reaches the child, which
is in the same process group. If the parent is killed (SIGKILL), the kernel
kills the child too (PR_SET_PDEATHSIG). Linux only; elsewhere stderr is left
alone.
"""

from __future__ import annotations

import os
import select
import signal
import sys

from tpukit.native_lines import Filter, read_chunk

# Passed on to the program. SIGINT only when sent by a process: the terminal's Ctrl-C reaches the program itself.
_FORWARD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_WAIT = _FORWARD + (signal.SIGCHLD,)  # held in the filter, taken with sigtimedwait; SIGCHLD: the program ended
_SI_KERNEL = 0x80  # si_code of a signal the kernel generated (the terminal's Ctrl-C), as opposed to kill()
_PR_SET_PDEATHSIG = 1
_POLL_S = 0.05

# Loaded, these run thread pools of their own, which `threading` does not count: a fork then copies a lock one of them
# may hold, and the child can wait on it for ever (seen: main() called inside a test session where TensorFlow was
# loaded; the forked child hung on a futex, and the filter waited on it).
_THREADED = ("tensorflow", "jax", "torch")
_filtering = False
_early: list = []  # signals Python caught between the swap of handlers and the fork


def _remember(signum, frame) -> None:
    _early.append(signum)


def hide_native_log_lines() -> bool:
    """Filter descriptor 2 for the rest of the program (see the module docstring); False where it cannot.

    Call it early, before any thread starts: the calling process becomes the filter and this returns in a
    forked child.
    """
    global _filtering
    if _filtering:
        return True
    import threading

    if (
        not sys.platform.startswith("linux")
        or not hasattr(signal, "sigtimedwait")
        or threading.current_thread() is not threading.main_thread()
        or threading.active_count() > 1
        or any(name in sys.modules for name in _THREADED)
    ):
        return False  # a fork with other threads running could deadlock the program (a lock held in one)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        read, write = os.pipe()
    except OSError:
        return False
    parent = os.getpid()
    # From here to the fork a signal is held (blocked: the filter takes it from the kernel) or, if Python caught
    # it just before, remembered; either way the filter passes it on. None raises KeyboardInterrupt in the filter.
    handlers = {sig: signal.getsignal(sig) for sig in _FORWARD}
    for sig, handler in handlers.items():
        if handler is not signal.SIG_IGN:  # an ignored signal stays ignored, in the program too
            signal.signal(sig, _remember)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WAIT)
    try:
        child = os.fork()
    except OSError:
        child = -1
    if child > 0:
        os.close(write)
        _supervise(child, read)  # never returns
    for sig, handler in handlers.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if child < 0:
        os.close(read)
        os.close(write)
        for sig in _early:
            signal.raise_signal(sig)
        _early.clear()
        return False
    _early.clear()  # the filter passes these on
    os.close(read)
    os.dup2(write, 2)
    os.close(write)
    _die_with(parent)
    _filtering = True
    return True


def say(line: str, stream=None) -> None:
    """Write `line` and its line end to stderr in one write.

    `print` writes its end on its own, and with PYTHONUNBUFFERED (set in many CI and container images) that is a
    second system call: a SIGTERM between the two (the launcher stopping a worker as it reports) left the line
    without its end, and the next process's line ran on after it.
    """
    stream = stream or sys.stderr
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def flush() -> None:
    """Write out Python's buffers; call it before `os._exit` (no atexit there). The filter reads the rest."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _die_with(parent: int) -> None:
    """Have the kernel SIGKILL this program when the filter dies (a SIGKILL to the pid its caller holds)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the prctl
        os._exit(137)


def _supervise(child: int, read: int) -> None:
    """The filter: copy the pipe to stderr until `child` ends, then leave as it did."""
    filt = Filter(2)
    open_ = True
    while True:
        waiting = []
        if open_:
            ready, _, _ = select.select([read], [], [], _POLL_S)
            if ready:
                open_ = filt.feed(read_chunk(read))
        else:  # the pipe's end came first: wait for the program's exit (SIGCHLD) or a signal to pass on
            waiting.append(signal.sigtimedwait(_WAIT, _POLL_S))
        while waiting[-1:] != [None]:
            waiting.append(signal.sigtimedwait(_WAIT, 0))
        for sig in _early + [i.si_signo for i in waiting if i is not None and _passed_on(i)]:
            _send(child, sig)
        _early.clear()
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            break
    if open_:  # everything the program wrote is in the pipe now; a child of its own may still hold it open
        os.set_blocking(read, False)
        while True:
            try:
                chunk = os.read(read, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not filt.feed(chunk):
                break
    filt.feed(b"")
    _leave(status)


def _passed_on(info) -> bool:
    """Whether the program should get this signal from the filter (not the terminal's Ctrl-C: it has that one)."""
    return info.si_signo != signal.SIGCHLD and not (info.si_signo == signal.SIGINT and info.si_code == _SI_KERNEL)


def _send(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _leave(status: int) -> None:
    """Exit as the child did: its status, or killed by its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        except (ImportError, OSError, ValueError):
            pass
        try:
            signal.signal(sig, signal.SIG_DFL)  # SIGKILL's cannot be set (nor blocked)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal that does not kill (SIGCHLD-like) ends here
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
