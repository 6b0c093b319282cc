"""The panel's view of whether a run can be resumed: the engine decides (`records.resume_check`), the panel words it.

    check = resumable.check(run_dir)
    check.ok, check.reason   # (False, "Nothing to resume: it stopped before its first whole epoch ended; ...")
"""

from __future__ import annotations

import re

from tpukit.runs.records import ResumeCheck, resume_check as check

__all__ = ["ResumeCheck", "check", "without_promise"]

# The engine's own word on resuming, at the end of a stopped run's message; the panel says instead what Resume can do.
_PROMISE = re.compile(r";?\s*(resume continues from the last whole epoch|it stopped before its first whole epoch "
                      r"ended, so nothing was kept to resume)\.?$")


def without_promise(message: str) -> str:
    """The engine's message for a run without its closing "resume continues ..." (the panel's check says that)."""
    return _PROMISE.sub("", message or "").strip()
