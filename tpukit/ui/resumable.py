"""The panel's view of whether a run can be resumed: the engine decides (`records.resume_check`), the panel words it.

    check = resumable.check(run_dir)
    check.ok, check.reason   # (False, "Nothing to resume: it stopped before its first whole epoch ended; ...")

It exists so the panel says what Resume can do in one voice: the check's reason, in place of the engine's own
closing word on resuming at the end of a stopped run's message (`without_promise`).
"""

from __future__ import annotations

import re
from typing import Any

from tpukit.runs.records import ResumeCheck, resume_check as check

__all__ = ["ResumeCheck", "check", "without_promise"]

# fallback until the engine error carries .reason (issue 20): the engine's word on resuming, as training writes it
# at the end of a stopped run's message (tpukit/training/api.py, _resume_hint).
_PROMISE = re.compile(r";?\s*(resume continues from the last whole epoch|it stopped before its first whole epoch "
                      r"ended, so nothing was kept to resume)\.?$")


def without_promise(run: Any) -> str:
    """A run's message without its closing "resume continues ..." (the panel's check says that).

    `run`: a RunResult, or its message. Where the run carries the engine's word on resuming as `.reason`, that
    is what is taken off the message's end; otherwise the words are found in the message.
    """
    message = (run if isinstance(run, str) or run is None else getattr(run, "message", "")) or ""
    reason = getattr(run, "reason", None)
    if isinstance(reason, str) and reason and message.rstrip(". ").endswith(reason.rstrip(". ")):
        return message.rstrip(". ")[: -len(reason.rstrip(". "))].rstrip("; ").strip()
    # fallback until the engine error carries .reason (issue 20)
    return _PROMISE.sub("", message).strip()
