"""Whether a run can be resumed, decided as `tpukit.resume()` decides, so the panel offers Resume exactly then.

A run can be resumed when it is stopped or failed (`records.load` reports a
run recorded "running" that no process holds as stopped), it kept something
to continue from (a whole-epoch backup, or the completed run it extends), and
no process holds its lock. A completed run is not resumed: `resume(run_dir,
epochs=N)` extends it into a new run.

    check = resumable.check(run_dir)
    check.ok, check.reason   # (False, "Nothing to resume: it stopped before its first whole epoch ended; ...")

Reads only: result.json, the backup's marker (not the weights' checksum) and the lock.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Optional

# The engine's own promise at the end of a stopped run's message; the panel says instead what Resume can do.
_PROMISE = re.compile(r";?\s*resume continues from the last whole epoch\.?$")


@dataclasses.dataclass(frozen=True)
class ResumeCheck:
    """What Resume would do with one run: `ok`, and `reason`, a sentence for the person either way.

    `from_epoch` is the first epoch (counted from 1) a resume trains, when `ok`.
    """

    run_dir: str
    ok: bool
    reason: str
    status: str = ""
    from_epoch: Optional[int] = None


def check(run_dir) -> ResumeCheck:
    """Whether `tpukit.resume(run_dir)` would continue the run, and why (not)."""
    from tpukit import checkpoint, records

    run_dir = str(run_dir)
    try:
        result = records.load(run_dir)
    except FileNotFoundError:
        return ResumeCheck(run_dir, False, "Nothing to resume: the run's directory is gone.")
    except (OSError, records.RunDirError) as e:
        return ResumeCheck(run_dir, False, f"Cannot resume: {e}")
    status = result.status
    total = result.config.get("epochs")

    def no(reason: str) -> ResumeCheck:
        return ResumeCheck(run_dir, False, reason, status)

    if status == "completed":
        return no("Nothing to resume: the run completed. To train it further, extend it into a new run with "
                  "panel.resume(run, epochs=N).")
    if status == "running" or records.in_use(run_dir):
        return no("Cannot resume yet: a process is training this run now.")
    try:
        backup = checkpoint.latest(Path(run_dir, "backup"), verify=False)
    except records.RunDirError as e:  # checkpoint.BackupError: a marker or file that cannot be read
        return no(f"Cannot resume: {e}")
    if backup is not None:
        return _yes(run_dir, status, backup.epochs_done, total)
    if result.parent:
        try:
            parent = records.load(result.parent)
        except (OSError, records.RunDirError):
            parent = None
        if parent is not None and parent.status == "completed" and Path(result.parent, "model.weights.h5").is_file():
            return _yes(run_dir, status, parent.epochs_done, total)
        return no(f"Cannot resume: {result.parent}, the run this one extends, has no final weights.")
    return no(f"Nothing to resume: the run {status} before its first whole epoch ended, so no epoch was kept; "
              "Train starts a new run.")


def _yes(run_dir: str, status: str, epochs_done: int, total) -> ResumeCheck:
    of = f" of {total}" if total else ""
    return ResumeCheck(run_dir, True, f"Resume continues it from epoch {epochs_done + 1}{of}.", status,
                       epochs_done + 1)


def without_promise(message: str) -> str:
    """The engine's message for a run without its closing "resume continues ..." (the panel's check says that)."""
    return _PROMISE.sub("", message or "").strip()
