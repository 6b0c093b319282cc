"""Reading captures: finding them on disk, xprof's converters over the XSpace, and XLA ops' self time in the trace.

Everything that knows a capture's layout (`<logdir>/plugins/profile/<time>/
<host>.xplane.pb`) or xprof's output (its JSON tables, its HTML sentences, the
trace viewer's events) is here, so that `summary` holds plain values and
`capture` only asks where captures are. xprof is imported by `summarize`, not
with this module.
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
from tpukit.observe.profiling import names, xspace
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
    xla = _xla_ops(events, _hlo_instructions(xplanes)) if events else ()
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
    xla = _xla_ops(events, _hlo_instructions(xplanes))
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
        path = str(cells[col["operation"]]) if "operation" in col else category
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


_Modules = Dict[Tuple[str, Any], Dict[str, "xspace.HloInstruction"]]


def _hlo_instructions(xplanes: List[str]) -> _Modules:
    """The compiled modules' instructions in the captures, by (module, program id); {} where none can be read."""
    modules: _Modules = {}
    for xplane in xplanes:
        try:
            modules.update(xspace.hlo_instructions(xplane))
        except (OSError, ValueError, IndexError):  # the trace still gives the ops, by their XLA names
            continue
    return modules


def _xla_name(module: str, op: str, program_id: Any, modules: _Modules) -> str:
    """The op's readable name from its module's metadata, else `<module>/<op>`."""
    found = modules.get((module, program_id)) or next(
        (instructions for (name, _), instructions in modules.items() if name == module and op in instructions), {}
    )
    ins = found.get(op)
    if not ins:
        return f"{module}/{op}" if module else op
    suffixed = names.tf_layer_suffixes(i.op_name for i in found.values() if i.op_name and "(" not in i.op_name)
    named = names.xla_name(
        ins.opcode, ins.op_type, ins.op_name, ins.fused, ins.inputs, ins.outputs, suffixed, _weight_of(ins, found)
    )
    return named or (f"{module}/{op}" if module else op)


def _weight_of(ins: "xspace.HloInstruction", module: Dict[str, "xspace.HloInstruction"]) -> str:
    """The one layer whose forward convolution or dot reads a weight of `ins`'s result shape, for a nameless op
    (XLA:CPU's weight-gradient fusions lose their metadata); "" where none or several do."""
    if ins.op_name or any(name for _, _, name in ins.fused) or len(ins.dims) < 2:
        return ""
    layers = set()
    for other in module.values():
        for opcode, _, op_name in ((other.opcode, other.op_type, other.op_name), *other.fused):
            layer = names.forward_layer(op_name) if opcode in ("convolution", "dot") else ""
            if layer and ins.dims in other.operand_dims:
                layers.add(layer)
    return layers.pop() if len(layers) == 1 else ""


def _xla_ops(events: Sequence[Dict[str, Any]], modules: Optional[_Modules] = None) -> Tuple[OpStat, ...]:
    """The XLA ops among trace events ("X" events whose args name an `hlo_op`), most self time first.

    An op's self time is its events' time less the ops nested in them on the
    same thread, plus, within the profiled steps (the "X" events whose args
    hold a `step_num`), the time after its event during which no op of its
    module ran on any thread until the next one started. XLA:CPU under
    TensorFlow ends a convolution's (or a parallel fusion's) event when it
    hands the work to its thread pool, so that work shows as such a gap after
    it; on JAX the gaps are the runtime's dispatch, tens of microseconds.
    Shares are of all XLA ops' self time.
    """
    self_us: Dict[Tuple[str, str], float] = {}
    program = {_key(e): e["args"].get("program_id") for line in _hlo_lines(events).values() for e in line}
    for line in _hlo_lines(events).values():
        enclosing: List[Tuple[float, Tuple[str, str]]] = []  # (end, op) of the ops open at this event
        for event in line:
            start, duration = float(event.get("ts", 0)), float(event.get("dur", 0))
            key = _key(event)
            while enclosing and enclosing[-1][0] <= start:
                enclosing.pop()
            if enclosing:
                self_us[enclosing[-1][1]] -= duration
            self_us[key] = self_us.get(key, 0.0) + duration
            enclosing.append((start + duration, key))
    for key, us in _gaps_after(events).items():
        self_us[key] = self_us.get(key, 0.0) + us
    total = sum(us for us in self_us.values() if us > 0)
    ops = [
        OpStat(
            _xla_name(module, op, program.get((module, op)), modules or {}),
            re.sub(r"\.\d+$", "", op),
            us,
            100.0 * us / total,
            f"{module}/{op}" if module else op,
        )
        for (module, op), us in self_us.items()
        if us > 0
    ]
    ops.sort(key=lambda op: op.self_time_us, reverse=True)
    return tuple(ops)


def _hlo_lines(events: Sequence[Dict[str, Any]]) -> Dict[Tuple[Any, Any], List[Dict[str, Any]]]:
    """The XLA op events per thread line, in order of start (an enclosing op before the ops in it)."""
    lines: Dict[Tuple[Any, Any], List[Dict[str, Any]]] = {}
    for event in events:
        if event.get("ph") == "X" and "hlo_op" in (event.get("args") or {}):
            lines.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    for line in lines.values():
        line.sort(key=lambda e: (float(e.get("ts", 0)), -float(e.get("dur", 0))))
    return lines


def _key(event: Dict[str, Any]) -> Tuple[str, str]:
    return str(event["args"].get("hlo_module", "")), str(event["args"]["hlo_op"])


def _gaps_after(events: Sequence[Dict[str, Any]]) -> Dict[Tuple[str, str], float]:
    """Per XLA op, the microseconds in the profiled steps after its event ended during which no op of its
    module ran on any thread until the next one started (the op whose end opened the gap gets it)."""
    steps = [
        (float(e.get("ts", 0)), float(e.get("ts", 0)) + float(e.get("dur", 0)))
        for e in events
        if e.get("ph") == "X" and "step_num" in (e.get("args") or {})
    ]
    ops = sorted(
        (float(e.get("ts", 0)), float(e.get("ts", 0)) + float(e.get("dur", 0)), _key(e))
        for line in _hlo_lines(events).values()
        for e in line
    )
    gaps: Dict[Tuple[str, str], float] = {}
    for step_start, step_end in steps:
        last: Dict[str, Tuple[float, Tuple[str, str]]] = {}  # module -> (latest end so far, the op that ends then)
        for start, end, key in ops:
            if not step_start <= start < step_end:
                continue
            open_end, open_op = last.get(key[0], (start, key))
            if start > open_end:
                gaps[open_op] = gaps.get(open_op, 0.0) + start - open_end
            if end >= open_end or start > open_end:
                last[key[0]] = (end, key)
    return gaps
