"""The panel's job runner: one long action (a training run, a tuning) at a time, and the log of its failures.

It exists so the controller's actions only say what a job does: here is where it runs (the caller's thread
in Colab, a daemon thread elsewhere), how it is waited for and stopped, and how an unexpected error becomes
one line for the status with its traceback in `<logdir>/tpukit-panel.log`. No widgets, no engine calls.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, Optional, Tuple

from tpukit.errors import TpukitError
from tpukit.ui.state import PanelBusy

ERROR_LOG = "tpukit-panel.log"  # in the logdir (else the temp dir): tracebacks of unexpected errors


class Job:
    """One action that runs for a while (a training run), in the foreground or a thread."""

    def __init__(self, name: str, work: Callable[[], Any]):
        self.name = name
        self.work = work
        self.result = None
        self.error: Optional[str] = None
        self.active = True
        self.stoppable = True  # False once training has ended (the profile and TensorBoard may still be shown)
        self.done = threading.Event()


class Runner:
    """Runs one job at a time and keeps the stop event the job's training watches.

    Args:
        explain: (error, action) -> the one line to show for an error the job raised.
        failed: shows that line (the job has failed).
        ended: called once a job has ended, however it ended (the controls change).
    """

    def __init__(
        self, explain: Callable[[BaseException, str], str], failed: Callable[[str], None], ended: Callable[[], None]
    ):
        self.job: Optional[Job] = None
        self.stop_event = threading.Event()  # a fresh one for each job; training ends after the step it is set
        self._lock = threading.Lock()
        self._explain, self._failed, self._ended = explain, failed, ended

    @property
    def running(self) -> bool:
        job = self.job
        return job is not None and job.active

    def ensure_idle(self, what: str) -> None:
        job = self.job
        if job is not None and job.active:
            raise PanelBusy(f"Cannot {what}: '{job.name}' is still going on. Wait for it, or press Stop.")

    def claim(self, name: str, work: Callable[[], Any]) -> Job:
        """The new current job (not started yet); PanelBusy if one is going on."""
        with self._lock:
            self.ensure_idle(name)
            job = self.job = Job(name, work)
            self.stop_event = threading.Event()
        return job

    def launch(self, job: Job, wait: bool, foreground: bool):
        """Run `job`: in this thread when `foreground` (Colab), else in a thread. Returns its result when it
        has ended (foreground, or `wait`), else None."""
        if foreground:
            self.run(job)
            return job.result
        threading.Thread(target=self.run, args=(job,), name=f"tpukit-panel-{job.name}", daemon=True).start()
        if wait:
            job.done.wait()
            return job.result
        return None

    def run(self, job: Job) -> None:
        try:
            job.result = job.work()
        except KeyboardInterrupt:  # Colab's interrupt outside fit (fit itself ends the run as "stopped")
            job.error = f"{job.name} interrupted before training began; nothing was kept."
            self._failed(job.error)
        except Exception as e:
            job.error = self._explain(e, job.name.replace(" ", "_"))
            self._failed(job.error)
        finally:
            job.active = False
            self._ended()
            job.done.set()

    def wait(self, timeout: Optional[float] = None):
        """Wait for the current job to end; returns its result (None if it failed or there is none)."""
        job = self.job
        if job is None:
            return None
        if not job.done.wait(timeout):
            raise TimeoutError(f"{job.name} still running after {timeout} s")
        return job.result

    def stop(self) -> bool:
        """Ask the job's training to end after its current step; False if no stoppable job is going on."""
        job = self.job
        if job is None or not job.active or not job.stoppable:
            return False
        self.stop_event.set()
        return True


class Ticker:
    """Calls `tick` every `every` seconds in a daemon thread until `stop()`: the seconds a phase has taken, on a
    page that shows updates made from threads (not Colab's)."""

    def __init__(self, tick: Callable[[], None], every: float = 1.0):
        self._stopped = threading.Event()
        self._tick, self._every = tick, every
        self._thread = threading.Thread(target=self._run, name="tpukit-panel-ticker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - a clock on the status line is not worth a failed run
                return

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)


class ErrorLog:
    """Failures as one line each; an unexpected one (not tpukit's own) leaves its traceback in a log file."""

    def __init__(self):
        self.path: Optional[str] = None  # the file the latest traceback was written to

    def explain(self, error: BaseException, action: str, logdir: str) -> str:
        """The one line to show for `error`. Unless it is tpukit's own (and says all), its traceback goes to
        the log file, which the line names."""
        if isinstance(error, TpukitError) and error.__cause__ is None:
            return short_error(error)
        line = short_error(error, limit=200)
        path, problem = self.write(error, action, logdir)
        if path is None:
            return f"{line} (the traceback could not be written: {problem})"
        return f"{line} (full traceback in {path})"

    def write(self, error: BaseException, action: str, logdir: str) -> Tuple[Optional[str], str]:
        """Append `error`'s traceback to `<logdir>/tpukit-panel.log`, else the temp dir's; returns (path, problem)."""
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        entry = f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} panel.{action} ---\n{text}\n"
        problem = ""
        for folder in (os.path.abspath(logdir), tempfile.gettempdir()):
            path = os.path.join(folder, ERROR_LOG)
            try:
                os.makedirs(folder, exist_ok=True)
                with open(path, "a", encoding="utf-8") as f:
                    f.write(entry)
            except OSError as e:
                problem = short_error(e)
                continue
            self.path = path
            return path, ""
        return None, problem


def short_error(error: BaseException, limit: int = 300) -> str:
    from tpukit.ui import tables

    return tables.short_error(error, limit=limit)
