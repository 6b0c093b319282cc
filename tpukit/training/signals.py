"""SIGTERM as a stop: a run ends "stopped" with its work kept, as Ctrl-C does, instead of being killed.

And Ctrl-C that sticks: a library that catches every exception while it loads (seen once in CI: a SIGINT sent
during start-up, and the run trained to the end) would otherwise swallow the user's interrupt.
"""

from __future__ import annotations

import contextlib
import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM outside the training loop (or a second one), raised where Python next runs, as Ctrl-C is."""


@contextlib.contextmanager
def sigterm_stops(run):
    """While a run executes in the main thread, SIGTERM ends it "stopped" with its work kept, instead of killing it.

    Inside fit, the first SIGTERM sets the stop flag, so the step in flight ends and the run stops cleanly (an
    exception raised in the middle of TensorFlow's Python code can leave it unstable); outside fit, or a second
    time, it raises `Terminated`.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if run.fitting and not run.terminated:
            run.terminated = True
            run.stop.set()
        else:
            raise Terminated(f"terminated by signal {signum} (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


_interrupts = {"count": 0}  # SIGINTs seen while `interrupts_stick` is in force and not yet acted upon


def _count_and_interrupt(signum, frame):
    _interrupts["count"] += 1
    raise KeyboardInterrupt


def interrupts_stick() -> None:
    """For the rest of a command-line process: Ctrl-C raises KeyboardInterrupt as Python's own handler does, and is
    remembered, so that `raise_if_interrupted` can raise it again where a library swallowed it.

    Not in a notebook: there the kernel owns SIGINT, and the user presses the button again.
    """
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    ):
        signal.signal(signal.SIGINT, _count_and_interrupt)


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt if Ctrl-C came since `interrupts_stick` and nothing acted on it yet.

    The run calls it as training starts: an interrupt that reached tpukit's own code earlier already ended it.
    """
    if _interrupts["count"]:
        _interrupts["count"] = 0
        raise KeyboardInterrupt
