"""SIGTERM as a stop: a run ends "stopped" with its work kept, as Ctrl-C does, instead of being killed."""

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
