"""Reading captures: finding them on disk, and xprof's converters over the XSpace.

Everything that knows a capture's layout (`<logdir>/plugins/profile/<time>/
<host>.xplane.pb`) or xprof's output (its JSON tables, its HTML sentences, the
trace viewer's events) is here, so that `summary` holds plain values and
`capture` only asks where captures are. The XLA ops' self time in the trace,
which xprof's op stats leave out, is worked out in `xla_ops`. xprof is imported
by `summarize`, not with this module.
"""

from __future__ import annotations

import dataclasses
import glob
import html
import json
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tpukit.errors import TpukitError, one_line
from tpukit.observe.profiling import names, xla_ops, xspace
from tpukit.observe.profiling.summary import OpStat, ProfileSummary, from_measurements

__all__ = ["ProfileError", "find_captures", "summarize"]

_XPLANE_SUFFIX = ".xplane.pb"
_TOP_OPS = 10
# xprof's findings worth passing on; its input sentences are replaced by
# tpukit's own (they point at page sections the panel does not show).
_TIP_STATEMENTS = ("kernel_launch_statement", "device_collectives_statement", "precision_statement")


class ProfileError(TpukitError, ValueError):
    """`summarize` found no profile capture it can read where it was pointed. The message is one line."""


_EXPECTED = (
    f"expected an {_XPLANE_SUFFIX} file, a capture directory (<logdir>/plugins/profile/<time>) or a logdir "
    "that holds one"
)


# --- finding captures --------------------------------------------------------


def find_captures(logdir) -> List[str]:
    """Sorted paths of the `*.xplane.pb` files under `logdir/plugins/profile/*/`.

    Capture directories are named by their UTC start time, so sorted order is
    oldest first. A missing logdir gives an empty list.
    """
    pattern = os.path.join(glob.escape(os.fspath(logdir)), "plugins", "profile", "*", "*" + _XPLANE_SUFFIX)
    return sorted(glob.glob(pattern))


def _xplanes_for(path) -> Tuple[str, List[str]]:
    """(what was analysed, its xplane files) for a file, a capture dir or a logdir."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ProfileError(f"summarize_profile: {_EXPECTED}, as a str or pathlib.Path. Received: {path!r}.")
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if os.path.isfile(path):
        if not path.endswith(_XPLANE_SUFFIX):
            raise ProfileError(f"summarize_profile: {_EXPECTED}. Received: {path}, a file of another kind.")
        return path, [path]
    if not os.path.isdir(path):
        raise ProfileError(f"summarize_profile: {_EXPECTED}. Received: {path}, which does not exist.")
    here = sorted(glob.glob(os.path.join(glob.escape(path), "*" + _XPLANE_SUFFIX)))
    if not here:
        captures = find_captures(path)
        if not captures:
            raise ProfileError(
                f"summarize_profile: no profile capture under {path} (looked for plugins/profile/*/*{_XPLANE_SUFFIX}); "
                f"{_EXPECTED}. Profile some training steps first (RunConfig(profile=(start, stop)))."
            )
        newest = os.path.dirname(captures[-1])
        here = [c for c in captures if os.path.dirname(c) == newest]
        path = newest
    return (here[0] if len(here) == 1 else path), here


# --- reading a capture ------------------------------------------------------


def summarize(path) -> ProfileSummary:
    """Summarize a profile capture (TensorFlow's or JAX's) offline, without TensorFlow or a server.

    Step times and the step-time breakdown come from xprof's input-pipeline
    analysis (the numbers TensorBoard's overview page shows), top ops from its
    framework op stats: device ops where there are any, else the XLA ops in
    the trace (XLA:CPU runs them on the host's thread lines, under JAX and
    under TensorFlow's jit_compile, and xprof's op stats leave them out)
    ranked with the host framework ops.

    Args:
        path: An `.xplane.pb` file, a capture directory
            (`logdir/plugins/profile/<time>`), or a logdir (its newest capture).

    Returns:
        A `ProfileSummary`.

    Where xprof's converter cannot be imported (not installed, or built for
    a newer protobuf than the one here), the summary holds what the capture's
    own trace gives (step times from its step markers, XLA ops' self time) and
    its recommendation says why the rest is missing.

    Raises:
        ProfileError: There is no capture at `path`, or it could not be read.
    """
    shown, xplanes = _xplanes_for(path)
    unavailable = _converter_unavailable()
    if unavailable:
        return _summarize_trace_only(shown, xplanes, unavailable)
    analysis = _tool_data(xplanes, "input_pipeline_analyzer")
    overview = _tool_data(xplanes, "overview_page")
    step_table = _table_with(analysis, "stepnum") or _table_with(overview, "stepnum") or {}
    props = step_table.get("p", {})
    steps, input_percent, other_percent = _steps(step_table)
    if not _has_rows(_table_with(analysis, "opName")) and not input_percent:
        input_percent = None  # xprof saw no input pipeline: its 0% is not a measurement
    on_device, on_host = _op_stats(_tool_data(xplanes, "framework_op_stats"))
    events = [] if on_device else _trace_events(xplanes)
    xla = xla_ops.from_trace(events, xla_ops.hlo_instructions(xplanes)) if events else ()
    ops, source = _ranked(on_device, on_host, xla)
    top_ops = _top(ops)
    if xla and not on_host:
        # xprof's step breakdown saw no op at all (XLA:CPU under JAX): its 'All Others' holds the XLA ops' time,
        # as much of it as xprof happened not to call host compute, so it measures no overhead.
        other_percent = None
    tips = (_table_with(overview, "tip_type") or {}).get("p", {})
    statements = [props.get(k) or tips.get(k) for k in _TIP_STATEMENTS]
    input_source = "tf.data"
    if input_percent is None:
        input_percent = _input_from_trace(events)
        input_source = "trace" if input_percent is not None else ""
    return from_measurements(
        shown,
        props.get("hardware_type", ""),
        steps,
        input_percent,
        other_percent,
        top_ops,
        source,
        [_plain(s) for s in statements if s],
        ops_us=sum(op.self_time_us for op in ops),
        input_source=input_source,
    )


_LINK = re.compile(r"<a\b[^>]*?href=[\"']([^\"']*)[\"'][^>]*>(.*?)</a\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _plain(text: str) -> str:
    """xprof's HTML sentence as plain text: links become "text (url)", tags go, and
    sentences that point at page sections ("Section 3") the panel does not show are dropped."""
    text = _LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})", text)
    text = html.unescape(_TAG.sub("", text))
    sentences = _SENTENCE_END.split(" ".join(text.split()))
    return " ".join(s for s in sentences if s and not re.search(r"\bsection\b", s, re.IGNORECASE))


def _converter_unavailable() -> str:
    """Why xprof's converter cannot be used here, in a few words; "" when it can."""
    try:
        from xprof.convert import raw_to_tool_data  # noqa: F401
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] == "xprof":
            return "xprof is not installed (tpukit.colab.setup() adds it where a release fits)"
        return f"xprof's converter does not import here ({one_line(e, 160)})"
    except Exception as e:  # protobuf's VersionError: xprof generated for a newer protobuf than this one
        return f"xprof's converter does not import here ({one_line(e, 160)})"
    return ""


def _summarize_trace_only(shown: str, xplanes: List[str], why: str) -> ProfileSummary:
    """What the capture's own trace gives without xprof: step times from its step markers, XLA ops' self time."""
    events: List[Dict[str, Any]] = []
    for i, xplane in enumerate(xplanes):
        try:
            found = xspace.trace_events(xplane)
        except Exception as e:  # not an XSpace
            raise ProfileError(
                f"summarize_profile: {xplane} is not a profile capture ({one_line(e, 120)}); {_EXPECTED}."
            ) from None
        events.extend(dict(e, pid=(i, e["pid"])) for e in found)  # hosts apart
    if not events:
        raise ProfileError(
            f"summarize_profile: no events in {', '.join(xplanes)}: not a whole profile capture; {_EXPECTED}."
        )
    steps: Dict[int, float] = {}
    for event in events:
        step = event["args"].get("step_num")
        if isinstance(step, int) and event["dur"] > 0:
            steps[step] = max(steps.get(step, 0.0), event["dur"] / 1e3)
    step_events = [e for e in events if isinstance(e["args"].get("step_num"), int)]
    step_names = {e["args"]["step_num"]: e["name"] or "step" for e in step_events}
    xla = xla_ops.from_trace(events, xla_ops.hlo_instructions(xplanes))
    top_ops, source = _top_ops([], [], xla)
    ops_us = sum(op.self_time_us for op in xla)
    note = (
        f"Read from the capture's trace only: {why}, so there is no input-pipeline analysis and no "
        "framework op statistics."
    )
    fetching = _input_from_trace(events)
    summary = from_measurements(
        shown,
        "",
        [(f"{step_names[n]} {n}", ms) for n, ms in sorted(steps.items())],
        fetching,
        None,
        top_ops,
        source,
        [note],
        ops_us=ops_us,
        input_source="trace" if fetching is not None else "",
    )
    # Its advice would point at TensorBoard's Profile tab, which needs the same xprof: say what is missing instead.
    if fetching is not None:
        return dataclasses.replace(summary, recommendation=note)
    return dataclasses.replace(
        summary,
        recommendation=note,
        input_conclusion="not measured: xprof's input-pipeline analysis is unavailable here.",
    )


def _tool_json(xplanes: List[str], tool: str, params: Optional[Dict[str, Any]] = None) -> Any:
    from xprof.convert import raw_to_tool_data

    try:
        data = raw_to_tool_data.xspace_to_tool_data(xplanes, tool, params or {})
        if isinstance(data, tuple):
            data = data[0]
        values = json.loads(data) if data else None
    except Exception as e:  # a file that is not an XSpace: xprof's own error, whatever its type
        raise ProfileError(
            f"summarize_profile: {', '.join(xplanes)} is not a profile capture xprof can read "
            f"({one_line(e, 120)}); {_EXPECTED}."
        ) from None
    if not values:
        raise ProfileError(
            f"summarize_profile: xprof found no {tool} data in {', '.join(xplanes)}: not a whole "
            f"profile capture; {_EXPECTED}."
        )
    return values


def _tool_data(xplanes: List[str], tool: str) -> List[Dict[str, Any]]:
    tables = _tool_json(xplanes, tool)
    return tables if isinstance(tables, list) else [tables]


def _table_with(tables: List[Dict[str, Any]], column: str) -> Optional[Dict[str, Any]]:
    for table in tables:
        if isinstance(table, dict) and column in _column_ids(table):
            return table
    return None


def _has_rows(table: Optional[Dict[str, Any]]) -> bool:
    return bool(table and table.get("rows"))


def _column_ids(table: Dict[str, Any]) -> List[str]:
    return [c.get("id", "") for c in table.get("cols", [])]


def _cells(row: Dict[str, Any]) -> List[Any]:
    return [(c or {}).get("v") for c in row.get("c", [])]


def _steps(table: Dict[str, Any]) -> Tuple[List[Tuple[str, float]], Optional[float], Optional[float]]:
    """(name, ms) per step, and the percents of step time spent waiting for input and in 'All Others'."""
    ids = _column_ids(table)
    if "stepnum" not in ids:
        return [], None, None
    name_i = ids.index("stepnum")
    time_i = ids.index("stepTimeMs") if "stepTimeMs" in ids else None
    shares = {key: ids.index(key) for key in ("infeedTimeMs", "otherTimeMs") if key in ids}
    steps, spent = [], dict.fromkeys(shares, 0.0)
    for row in table.get("rows", []):
        cells = _cells(row)
        if time_i is not None:
            ms = cells[time_i]
        else:  # no total column: the numeric columns are the step's breakdown
            ms = sum(v for i, v in enumerate(cells) if i != name_i and isinstance(v, (int, float)))
        if not isinstance(ms, (int, float)):
            continue
        steps.append((str(cells[name_i]), float(ms)))
        for key, i in shares.items():
            if isinstance(cells[i], (int, float)):
                spent[key] += cells[i]
    total = sum(ms for _, ms in steps)
    percent = {key: 100.0 * spent[key] / total if total > 0 else None for key in shares}
    return steps, percent.get("infeedTimeMs"), percent.get("otherTimeMs")


def _has_idle(table: Dict[str, Any]) -> bool:
    ids = _column_ids(table)
    if "type" not in ids:
        return False
    i = ids.index("type")
    return any(_cells(row)[i] == "IDLE" for row in table.get("rows", []))


# TensorFlow ops that launch an XLA cluster: their time is the XLA ops', which
# the trace gives op by op.
_XLA_LAUNCH_OPS = frozenset({"XlaLaunch", "XlaLaunchV2", "_XlaRun", "TfrtXlaLaunch"})


def _top_ops(on_device: List[OpStat], on_host: List[OpStat], xla: Sequence[OpStat]) -> Tuple[Tuple[OpStat, ...], str]:
    """The top ops and where they come from: device ops where there are any, else the XLA ops ranked
    with the host ops, else host ops; ((), "") when there are none."""
    ops, source = _ranked(on_device, on_host, xla)
    return _top(ops), source


def _ranked(on_device: List[OpStat], on_host: List[OpStat], xla: Sequence[OpStat]) -> Tuple[List[OpStat], str]:
    """All the ops `_top_ops` ranks, and where they come from."""
    if on_device:
        return list(on_device), "device"
    if not xla:
        return list(on_host), "host" if on_host else ""
    on_host = [op for op in on_host if op.category not in _XLA_LAUNCH_OPS]
    if not on_host:
        return list(xla), "XLA ops in the trace"
    # Shares of all the ops listed together (xprof's host shares are of host op time only).
    ops = list(xla) + on_host
    total = sum(op.self_time_us for op in ops)
    return (
        [dataclasses.replace(op, self_time_percent=100.0 * op.self_time_us / total) for op in ops],
        "XLA ops in the trace and host ops",
    )


def _top(ops: List[OpStat]) -> Tuple[OpStat, ...]:
    """The ops with the most self time, their names told apart where two read the same."""
    top = sorted(ops, key=lambda op: op.self_time_us, reverse=True)[:_TOP_OPS]
    told_apart = names.distinct([op.name for op in top], [op.path or op.name for op in top])
    return tuple(dataclasses.replace(op, name=name) for op, name in zip(top, told_apart))


def _op_stats(tables: List[Dict[str, Any]]) -> Tuple[List[OpStat], List[OpStat]]:
    """(device ops, host ops) from xprof's framework op stats, idle time left out."""
    # xprof gives the op table twice, with and without IDLE time; shares are
    # more telling without it.
    candidates = [t for t in tables if isinstance(t, dict) and "total_self_time" in _column_ids(t)]
    if not candidates:
        return [], []
    table = next((t for t in candidates if not _has_idle(t)), candidates[0])
    ids = _column_ids(table)
    col = {name: ids.index(name) for name in ids}
    on_device, on_host = [], []
    rows = table.get("rows", [])
    strip = names.tf_layer_suffixes(str(_cells(row)[col["operation"]]) for row in rows) if "operation" in col else False
    for row in rows:
        cells = _cells(row)
        where = cells[col["host_or_device"]] if "host_or_device" in col else "Host"
        category = str(cells[col["type"]]) if "type" in col else ""
        self_time = float(cells[col["total_self_time"]] or 0.0)
        if category == "IDLE" or self_time <= 0:
            continue
        share_key = "device_total_self_time_percent" if where == "Device" else "host_total_self_time_percent"
        share = cells[col[share_key]] if share_key in col else 0.0
        path = (str(cells[col["operation"]]) if "operation" in col else "") or category  # unnamed: by its type
        (on_device if where == "Device" else on_host).append(
            OpStat(names.tf_name(path, category, strip), category, self_time, 100.0 * float(share or 0.0), path)
        )
    return on_device, on_host


def _trace_events(xplanes: List[str]) -> List[Dict[str, Any]]:
    """The trace viewer's events: XLA:CPU runs its ops on the host's thread lines (xprof's op stats leave them out)."""
    # use_saved_result=False: newer xprof otherwise caches the trace next to the capture.
    trace = _tool_json(xplanes, "trace_viewer", {"use_saved_result": False})
    return trace.get("traceEvents", []) if isinstance(trace, dict) else []


# Python's tracer names a call of the builtin next() so; a Keras fit on JAX fetches each batch with it, in the step.
_NEXT_CALL = "$builtins next"


def _input_from_trace(events: Sequence[Dict[str, Any]]) -> Optional[float]:
    """Percent of the profiled steps' time spent fetching the next batch: the outermost next() calls that
    Python's tracer recorded on each step's own thread, inside the step (Keras on JAX calls next() on its data
    iterator there). None where the trace holds no such call (no Python tracer, or no step markers)."""
    steps = [e for e in events if e.get("ph") == "X" and "step_num" in (e.get("args") or {})]
    calls: Dict[Tuple[Any, Any], List[Tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("name") == _NEXT_CALL:
            start = float(e.get("ts", 0))
            calls.setdefault((e.get("pid"), e.get("tid")), []).append((start, start + float(e.get("dur", 0))))
    fetching = stepping = 0.0
    for step in steps:
        start = float(step.get("ts", 0))
        end = start + float(step.get("dur", 0))
        stepping += end - start
        outer_end = start
        for call_start, call_end in sorted(calls.get((step.get("pid"), step.get("tid")), [])):
            if start <= call_start and call_end <= end and call_start >= outer_end:  # not inside a counted one
                fetching += call_end - call_start
                outer_end = call_end
    if not fetching or stepping <= 0:
        return None
    return 100.0 * fetching / stepping
