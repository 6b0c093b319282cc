"""Small HTML views of engine results for the panel's HTML widgets: runtime, runs, profile summary.

Plain functions from engine values to escaped HTML strings; no widgets, so
they are easy to test and work the same under ipywidgets 7 and 8.
"""

from __future__ import annotations

import html
from typing import Iterable, List, Sequence

_TABLE = '<table style="border-collapse:collapse;font-size:12px">'
_CELL = 'style="padding:2px 8px;border-bottom:1px solid #ddd;text-align:{align}"'


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """An HTML table; numbers are right-aligned, everything is escaped."""
    out = [_TABLE, "<tr>" + "".join(f"<th {_CELL.format(align='left')}>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for value in row:
            align = "right" if isinstance(value, (int, float)) and not isinstance(value, bool) else "left"
            cells.append(f"<td {_CELL.format(align=align)}>{html.escape(_fmt(value))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4f}"
    return str(value)


def runtime(rt) -> str:
    """What `connect()` found: kind, devices, replicas, backend, recommended precision, skipped kinds."""
    kind = rt.kind.upper() + (" (simulated replicas on logical CPU devices)" if rt.simulated else "")
    names = sorted({f.get("name", "") for f in rt.device_facts if f.get("name")})
    rows = [("kind", kind), ("backend", rt.backend), ("replicas", rt.replicas),
            ("devices", ", ".join(rt.devices)), ("hardware", ", ".join(names) or "–"),
            ("precision", f"{rt.precision}: {rt.precision_reason}")]
    if rt.workers > 1:
        rows.append(("workers", rt.workers))
    rows += [(f"skipped {kind_.upper()}", why) for kind_, why in rt.skipped]
    return table(("", ""), rows)


RUN_COLUMNS = ("run", "status", "model", "dataset", "precision", "batch_size", "replicas", "deterministic",
               "examples_per_sec", "step_time_ms", "accuracy", "val_accuracy", "loss", "fingerprint")


def runs(rows: List[dict], notes: Sequence[str] = ()) -> str:
    """The runs table from `records.compare` rows, with a note per run (its message, whether it can be resumed)."""
    if not rows:
        return '<span style="color:#666">No runs yet in this kernel.</span>'
    header = ["#", *RUN_COLUMNS, "note"]
    body = [[i + 1, *(row.get(c) for c in RUN_COLUMNS), notes[i] if i < len(notes) else ""]
            for i, row in enumerate(rows)]
    return table(header, body)


def profile(summary) -> str:
    """Step time, input verdict and top ops of a `ProfileSummary`."""
    if summary.step_time_ms is None:
        step = "no step markers in this capture"
    else:
        step = (f"{summary.step_time_ms:.2f} ms average (min {summary.step_time_ms_min:.2f}, "
                f"max {summary.step_time_ms_max:.2f}) over {len(summary.steps)} steps")
    facts = table(("", ""), [("capture", summary.path), ("hardware", summary.hardware_type or "unknown"),
                             ("step time", step), ("input pipeline", summary.input_verdict),
                             ("next step", summary.recommendation or "–")])
    ops = table(("self time (us)", "share", "category", "op"),
                [(op.self_time_us, f"{op.self_time_percent:.1f}%", op.category, op.name) for op in summary.top_ops])
    return facts + "<div style='margin-top:6px'><b>Top ops by self time</b></div>" + ops


def message(text: str, kind: str = "info") -> str:
    """A one-line status: info (grey), ok (green) or error (red)."""
    colour = {"info": "#444", "ok": "#1b5e20", "error": "#b00020"}.get(kind, "#444")
    return f'<span style="color:{colour}">{html.escape(text)}</span>' if text else ""


def tuning(result) -> str:
    """The batch-size trials of `tpukit.tune_batch_size`, the recommended one marked, and why."""
    rows = [(("➜ " if t.batch_size == result.recommended and t.outcome == "measured" else "") + str(t.batch_size),
             t.global_batch_size, f"{t.examples_per_sec:,.0f}" if t.examples_per_sec else "–",
             f"{t.step_time_ms:.1f}" if t.step_time_ms else "–", t.outcome) for t in result.trials]
    return table(("batch / replica", "global batch", "examples/s", "ms/step", "outcome"), rows) + message(
        result.reason)


def short_error(error: BaseException, limit: int = 300) -> str:
    """One line for an exception (`tpukit.errors.one_line`), for the panel's status."""
    from tpukit.errors import one_line

    return one_line(error, limit)

