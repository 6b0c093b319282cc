"""Small HTML views of engine results for the panel's HTML widgets: runtime, runs, profile summary.

Plain functions from engine values to escaped HTML strings; no widgets, so
they are easy to test and work the same under ipywidgets 7 and 8.
"""

from __future__ import annotations

import html
import re
from typing import Iterable, List, Optional, Sequence

from tpukit import precision as precisions

# line-height: an HTML widget sets 28 px lines (a widget's height), which would make every row 33 px tall.
_TABLE = '<table style="border-collapse:collapse;font-size:12px;line-height:1.4">'
_CELL = 'style="padding:2px 6px;border-bottom:1px solid #ddd;text-align:{align}"'


_NUMBER = re.compile(r"^[➜ ]*[-+]?[\d,]*\.?\d+\s*%?$|^–$")  # 12,345 / 3.5 / 40% / – (none) / ➜ 64


def table(
    header: Sequence[str], rows: Iterable[Sequence[object]], highlight: Optional[int] = None, nowrap: int = 0
) -> str:
    """An HTML table; numbers (also formatted ones) are right-aligned, everything is escaped.

    Args:
        highlight: the index of a row to show in bold on a light background (a recommendation).
        nowrap: how many leading columns never wrap (names and numbers; a last note column may).
    """
    rows = [list(row) for row in rows]
    numeric = [all(_is_number(row[i]) for row in rows) if rows else False for i in range(len(header))]
    out = [
        _TABLE,
        "<tr>"
        + "".join(
            f"<th {_CELL.format(align='right' if numeric[i] else 'left')[:-1]}"
            f'{";white-space:nowrap" if i < nowrap else ""}">{html.escape(h)}</th>'
            for i, h in enumerate(header)
        )
        + "</tr>",
    ]
    for r, row in enumerate(rows):
        cells = "".join(
            f"<td {_CELL.format(align='right' if numeric[i] else 'left')[:-1]}"
            f'{";white-space:nowrap" if i < nowrap else ""}">{html.escape(_fmt(value))}</td>'
            for i, value in enumerate(row)
        )
        style = ' style="font-weight:600;background:#fff3e0"' if r == highlight else ""
        out.append(f"<tr{style}>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def _is_number(value) -> bool:
    if isinstance(value, bool):
        return False
    return value is None or isinstance(value, (int, float)) or bool(_NUMBER.match(str(value)))


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
    why = rt.backend_reason  # KERAS_BACKEND in the environment, the config, ...
    rows = [
        ("kind", kind),
        ("backend", f"{rt.backend} ({why})" if why else rt.backend),
        ("replicas", rt.replicas),
        ("devices", ", ".join(rt.devices)),
        ("hardware", ", ".join(names) or "–"),
        ("precision", f"{rt.precision}: {rt.precision_reason}"),
    ]
    if rt.multi_process:
        rows.append(("workers", rt.workers))
    rows += [(f"skipped {kind_.upper()}", why) for kind_, why in rt.skipped]
    return table(("", ""), rows)


def chip(rt, state: str = "") -> str:
    """The header's status: what is connected ("CPU · tensorflow · 8 replicas (simulated)"), or `state`."""
    if rt is None:
        text, colour = state or "not connected", "#666"
    else:
        text = " · ".join(
            [
                rt.kind.upper() + (f" {rt.chip_name}" if rt.chip_name else ""),
                rt.backend,
                f"{rt.replicas} replica" + ("s" if rt.replicas != 1 else "") + (" (simulated)" if rt.simulated else ""),
            ]
            + ([f"{rt.workers} workers"] if rt.multi_process else [])
        )
        colour = "#1b5e20"
    return (
        f'<span style="margin:0 10px;padding:2px 8px;border-radius:10px;border:1px solid {colour};'
        f'color:{colour};font-size:12px;white-space:nowrap">{html.escape(text)}</span>'
    )


RUNS_HEADER = ("#", "run", "status", "model / data", "precision", "batch", "examples/s", "validation", "fingerprint")


def runs(rows: List[dict], notes: Sequence[str] = ()) -> str:
    """The runs table from `records.compare` rows, with a note per run (its message, whether it can be resumed).

    Fits a notebook's output column beside JupyterLab's file browser (845 px at 1280x800): the columns that tell
    runs apart, in short forms, none of them wrapping; the weights' fingerprint cut to 8 characters (the whole one
    in its tooltip); a run's note on a line of its own under the run, across the table, where it may wrap.
    `records.compare` and Compare's chart keep every field.
    """
    if not rows:
        return '<span style="color:#666">No runs yet in this kernel.</span>'
    body = []
    for i, row in enumerate(rows):
        precision = row.get("precision")
        mode = precisions.find(precision)  # its short form (bf16), the full policy name in the tooltip
        fingerprint = row.get("fingerprint")
        body.append(
            (
                (i + 1, None),
                (row.get("run"), None),
                (row.get("status"), None),
                _model_cell(row),
                (mode.key if mode else precision, precision),
                (
                    f"{row.get('batch_size')} × {row.get('replicas') or 1}"
                    if (row.get("replicas") or 1) > 1
                    else row.get("batch_size"),
                    None,
                ),
                (
                    row.get("examples_per_sec"),
                    f"{row['tokens_per_sec']:,.0f} tokens/s" if row.get("tokens_per_sec") else None,
                ),
                (_validation(row), None),
                (
                    (fingerprint[:8] if fingerprint else "–") + (" det" if row.get("deterministic") else ""),
                    f"weights' fingerprint {fingerprint}" + (" (deterministic run)" if row.get("deterministic") else "")
                    if fingerprint
                    else None,
                ),
            )
        )
    numeric = [all(_is_number(row[i][0]) for row in body) for i in range(len(RUNS_HEADER))]

    def cell(tag, value, i, title=None, border=True):
        style = _CELL.format(align="right" if numeric[i] else "left")[:-1] + ";white-space:nowrap"
        if not border:
            style = style.replace("border-bottom:1px solid #ddd", "border-bottom:none")
        tip = f' title="{html.escape(title)}"' if title else ""
        return f'<{tag} {style}"{tip}>{html.escape(_fmt(value))}</{tag}>'

    out = [_TABLE, "<tr>" + "".join(cell("th", h, i) for i, h in enumerate(RUNS_HEADER)) + "</tr>"]
    for r, row in enumerate(body):
        note = notes[r] if r < len(notes) else ""
        out.append("<tr>" + "".join(cell("td", v, i, t, border=not note) for i, (v, t) in enumerate(row)) + "</tr>")
        if note:
            out.append(
                f'<tr><td></td><td colspan="{len(RUNS_HEADER) - 1}" style="padding:0 6px 3px;'
                f'border-bottom:1px solid #ddd;color:#555;white-space:normal">{html.escape(note)}</td></tr>'
            )
    out.append("</table>")
    return '<div style="overflow-x:auto;max-width:100%">' + "".join(out) + "</div>"


def _model_cell(row: dict):
    """(the model / data cell, its tooltip): a preset directory by its folder's name (the whole path in the
    tooltip; a URL stays whole), and for a language model its LoRA rank and row length, which tell its runs apart."""
    model, dataset = row.get("model"), row.get("dataset")
    local = isinstance(model, str) and model.startswith(("/", "./", "../", "~"))  # not kaggle://, hf://
    name = model.rstrip("/").rsplit("/", 1)[-1] if local else model
    if row.get("tokens_per_sec"):
        rank = row.get("lora_rank")
        name = f"{name} ({f'LoRA r{rank}' if rank else 'full'}, {row.get('sequence_length')} tokens)"
    return f"{name} / {dataset}", (model if name != model else None)


def compared(shown: str, differed: Sequence[str]) -> str:
    """The line above Compare's chart: which runs it shows, and the settings that differed between them."""
    what = ("settings that differed: " + "; ".join(differed)) if differed else "no setting differed"
    return (
        f'<div style="font-size:12px;line-height:1.4;margin:6px 0 2px"><b>Compared</b>: {html.escape(shown)}. '
        f"{html.escape(what[0].upper() + what[1:])}.</div>"
    )


def validation_key(row: dict) -> Optional[str]:
    """The run's validation figure: val_accuracy where it has one, else another accuracy (a preference run's
    val_reward_accuracy), else its first other validation metric, else val_loss (a regression model of the user's
    has no accuracy); None without validation."""
    if isinstance(row.get("val_accuracy"), (int, float)):
        return "val_accuracy"
    names = [k for k in row if k.startswith("val_") and k != "val_loss" and isinstance(row[k], (int, float))]
    names.sort(key=lambda k: not k.endswith("accuracy"))  # stable: an accuracy first, the others as they came
    return names[0] if names else ("val_loss" if isinstance(row.get("val_loss"), (int, float)) else None)


def _validation(row: dict) -> str:
    key = validation_key(row)
    if key == "val_accuracy":
        return f"{row[key]:.1%}"
    if key and key.endswith("accuracy"):
        return f"{key[4:].replace('_', ' ')} {row[key]:.1%}"
    return f"{key[4:]} {row[key]:.4g}" if key else "–"


TOP_OPS = 5  # in the panel's table (the chart under it has 6; profiling.summarize keeps them all)


def profile(summary) -> str:
    """Step time, input verdict and top ops of a `ProfileSummary`."""
    if summary.step_time_ms is None:
        step = "no step markers in this capture"
    else:
        step = (
            f"{summary.step_time_ms:.2f} ms average (min {summary.step_time_ms_min:.2f}, "
            f"max {summary.step_time_ms_max:.2f}) over {len(summary.steps)} steps"
        )
    facts = table(
        ("", ""),
        [
            ("capture", summary.path),
            ("hardware", summary.hardware_type or "unknown"),
            ("step time", step),
            ("input pipeline", summary.input_verdict),
            ("next step", summary.recommendation or "–"),
        ],
    )
    ops = table(
        ("self time (us)", "share", "category", "op"),
        [(op.self_time_us, f"{op.self_time_percent:.1f}%", op.category, op.name) for op in summary.top_ops[:TOP_OPS]],
    )
    return facts + "<div style='margin-top:6px'><b>Top ops by self time</b></div>" + ops


def message(text: str, kind: str = "info") -> str:
    """A one-line status: info (grey), ok (green) or error (red)."""
    colour = {"info": "#444", "ok": "#1b5e20", "error": "#b00020"}.get(kind, "#444")
    return f'<span style="color:{colour}">{html.escape(text)}</span>' if text else ""


def tuning(result) -> str:
    """The batch-size trials of `tpukit.tune_batch_size`, the recommended one marked, and why."""
    rows, pick = [], None
    for i, t in enumerate(result.trials):
        chosen = t.batch_size == result.recommended and t.outcome == "measured"
        pick = i if chosen else pick
        rows.append(
            (
                t.batch_size,
                t.global_batch_size,
                f"{t.examples_per_sec:,.0f}" if t.examples_per_sec else "–",
                f"{t.step_time_ms:.1f}" if t.step_time_ms else "–",
                "recommended" if chosen else t.outcome,
            )
        )
    return table(("batch / replica", "global batch", "examples/s", "ms/step", ""), rows, highlight=pick) + message(
        result.reason
    )


def short_error(error: BaseException, limit: int = 300) -> str:
    """One line for an exception (`tpukit.errors.one_line`), for the panel's status."""
    from tpukit.errors import one_line

    return one_line(error, limit)
