"""The panel's view of whether a run can be resumed: the engine decides (`records.resume_check`), the panel words it.

    check = resumable.check(run_dir)
    check.ok, check.reason   # (False, "Nothing to resume: it stopped before its first whole epoch ended; ...")

It exists so the panel says what Resume can do in one voice: the check's reason, in place of the engine's own
closing word on resuming at the end of a stopped run's message. The run carries why it stopped apart from that
word (`RunResult.cause`), so nothing here reads the message's text.
"""

from __future__ import annotations

from tpukit.runs.records import ResumeCheck, RunResult, resume_check as check

__all__ = ["ResumeCheck", "check", "without_promise"]


def without_promise(run: RunResult) -> str:
    """What ended a run, without the engine's word on resuming (the panel's check says that): a stopped run's
    `cause`, else its message."""
    return run.cause or run.message or ""
