"""Profile a window of training steps and read the capture back as a small summary.

`ProfileCallback` starts the TensorFlow profiler for an inclusive window of
global training steps and marks each step with a `Trace(step_num=...)`, so
TensorBoard's profile overview shows step times (Keras' own
`TensorBoard(profile_batch=...)` captures carry no step markers and the
overview says "No step marker observed"). `summarize` turns a capture into a
`ProfileSummary` (step times, input-bound verdict, top ops) using xprof, the
package behind TensorBoard's profile tab, without starting a server.

Importing this module does not import TensorFlow or Keras: the callback class
is built on first use of `ProfileCallback`, and xprof is imported by
`summarize`.

Example:

    cb = ProfileCallback("logs", start=10, stop=14)
    try:
        model.fit(x, y, epochs=2, callbacks=[cb])
    finally:
        cb.close()
    print(summarize(cb.files[0]).to_text())
"""

from __future__ import annotations

import dataclasses
import glob
import html
import json
import os
import re
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "OpStat",
    "ProfileCallback",
    "ProfileError",
    "ProfileSummary",
    "ProfilerBusyWarning",
    "find_captures",
    "summarize",
]

_XPLANE_SUFFIX = ".xplane.pb"
_TOP_OPS = 10


class ProfileError(ValueError):
    """`summarize` found no profile capture it can read where it was pointed. The message is one line."""


_EXPECTED = (f"expected an {_XPLANE_SUFFIX} file, a capture directory (<logdir>/plugins/profile/<time>) or a logdir "
             "that holds one")


class ProfilerBusyWarning(RuntimeWarning):
    """Another profiler session was running, so ProfileCallback did not profile."""


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


# --- the callback ------------------------------------------------------------


class _JaxProfiler:
    """jax.profiler, with JAX's step marker (what the profile plugin reads as a step)."""

    def __init__(self):
        import jax

        self.jax = jax
        self.busy = (RuntimeError,)
        self.failed = (RuntimeError, OSError)

    def start(self, logdir):
        self.jax.profiler.start_trace(logdir)

    def stop(self):
        self.jax.profiler.stop_trace()

    def step(self, n):
        return self.jax.profiler.StepTraceAnnotation("train", step_num=n)


class _TfProfiler:
    """TensorFlow's profiler, with `Trace(step_num=n)` step markers."""

    def __init__(self):
        import tensorflow as tf

        self.tf = tf
        self.busy = (tf.errors.AlreadyExistsError, RuntimeError)
        self.failed = (tf.errors.OpError,)

    def start(self, logdir):
        self.tf.profiler.experimental.start(logdir)

    def stop(self):
        self.tf.profiler.experimental.stop()

    def step(self, n):
        return self.tf.profiler.experimental.Trace("train", step_num=n, _r=1)


def _build_callback_class():
    import keras

    class ProfileCallback(keras.callbacks.Callback):
        """Profile an inclusive window of global training steps, with step markers.

        Steps are counted from 0 across epochs: the n-th call of the train
        function in a `fit` is step n. The profiler starts before step `start`
        and stops after step `stop`, or when training ends, or on `close()`.
        Each profiled step runs inside `tf.profiler.experimental.Trace("train",
        step_num=n)`, which is what gives TensorBoard its step-time graph.

        If another profiler session is running, the callback warns once
        (`ProfilerBusyWarning`) and profiles nothing: it only ever stops the
        profiler it started.

        Args:
            logdir: Directory the capture goes to, under
                `logdir/plugins/profile/<time>/<host>.xplane.pb`.
            start: First step to profile (0-based).
            stop: Last step to profile, inclusive.

        Attributes:
            files: The `.xplane.pb` files written, filled once a capture stopped.
        """

        def __init__(self, logdir, start: int, stop: int):
            super().__init__()
            _check_window(logdir, start, stop)
            self.logdir = os.path.abspath(os.fspath(logdir))  # immune to later chdir
            self.start = start
            self.stop = stop
            self.files: List[str] = []
            self._step = 0
            self._trace = None
            self._profiling = False
            self._before: Dict[str, int] = {}
            self._warned = False
            self._backend = None

        @property
        def backend(self):
            """The profiler of the Keras backend (JAX or TensorFlow), made on first use."""
            if self._backend is None:
                self._backend = _JaxProfiler() if _on_jax() else _TfProfiler()
            return self._backend

        def on_train_begin(self, logs=None):
            self._step = 0

        def on_train_batch_begin(self, batch, logs=None):
            if self._step == self.start:
                self._start_profiler()
            if self._profiling:
                self._enter_trace()

        def on_train_batch_end(self, batch, logs=None):
            self._exit_trace()
            if self._profiling and self._step >= self.stop:
                self.close()
            self._step += 1

        def on_train_end(self, logs=None):
            self.close()

        def close(self):
            """End the open step trace and stop the profiler if this callback started it.

            Safe to call more than once, and from a `finally` after an interrupt.
            """
            self._exit_trace()
            if self._profiling:
                self._profiling = False
                self._stop_profiler()

        @property
        def profiling(self) -> bool:
            """Whether this callback's profiler session is running now."""
            return self._profiling

        def _start_profiler(self):
            self._before = _mtimes(find_captures(self.logdir))
            try:
                self.backend.start(self.logdir)
            except self.backend.busy:
                if not self._warned:
                    self._warned = True
                    warnings.warn(
                        f"Another profiler is already running, so steps {self.start}-{self.stop} "
                        f"are not profiled into {self.logdir}. Stop the other session "
                        "(e.g. TensorBoard(profile_batch=...)) to profile here.",
                        ProfilerBusyWarning,
                        stacklevel=2,
                    )
                return
            self._profiling = True

        def _stop_profiler(self):
            try:
                self.backend.stop()
            except self.backend.failed as e:  # e.g. the logdir is not writable
                message = f"The profile of {self.logdir} could not be saved: {getattr(e, 'message', e)}"
                warnings.warn(message, RuntimeWarning, stacklevel=3)
            after = _mtimes(find_captures(self.logdir))
            new = [p for p, t in after.items() if self._before.get(p) != t]
            self.files.extend(sorted(p for p in new if p not in self.files))

        def _enter_trace(self):
            self._trace = self.backend.step(self._step)
            self._trace.__enter__()

        def _exit_trace(self):
            trace, self._trace = self._trace, None
            if trace is not None:
                trace.__exit__(None, None, None)

    ProfileCallback.__module__ = __name__
    ProfileCallback.__qualname__ = "ProfileCallback"
    return ProfileCallback


def _on_jax() -> bool:
    """Keras runs on JAX: capture with jax.profiler (Keras' TensorBoard callback cannot profile there)."""
    import keras

    return keras.backend.backend() == "jax"


def _check_window(logdir, start, stop) -> None:
    path = os.fspath(logdir) if isinstance(logdir, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path:
        raise ValueError(f"Expected logdir to be a non-empty path. Received: logdir={logdir!r}")
    for name, value in (("start", start), ("stop", stop)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"Expected {name} to be a step number >= 0. Received: {name}={value!r}")
    if stop < start:
        raise ValueError(f"Expected start <= stop (an inclusive window). Received: start={start}, stop={stop}")


def _mtimes(paths: Sequence[str]) -> Dict[str, int]:
    out = {}
    for p in paths:
        try:
            out[p] = os.stat(p).st_mtime_ns
        except OSError:
            pass
    return out


def __getattr__(name: str) -> Any:
    # ProfileCallback subclasses keras.callbacks.Callback; build it on first use
    # so that importing this module stays free of TensorFlow.
    if name == "ProfileCallback":
        cls = _build_callback_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | {"ProfileCallback"})


# --- the summary -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OpStat:
    """One op's share of the profiled time."""

    name: str
    category: str
    self_time_us: float
    self_time_percent: float


@dataclasses.dataclass(frozen=True)
class ProfileSummary:
    """What a capture says about step time, input and ops, as plain values and plain text.

    Every text field is plain text (no HTML), and the input verdict follows
    from `input_percent` alone, with xprof's threshold (5% of step time).

    Attributes:
        path: The `.xplane.pb` file analysed (or the capture directory, when
            it holds one file per host).
        hardware_type: xprof's name for the hardware, e.g. "CPU_ONLY", "GPU", "TPU".
        step_time_ms: Average step time, or None if the capture has no step markers.
        step_time_ms_min: Fastest step.
        step_time_ms_max: Slowest step.
        steps: (step name, milliseconds) per profiled step, e.g. ("train 3", 2.4).
        input_percent: Percent of step time spent waiting for input, or None
            when the capture cannot tell (no tf.data input pipeline in it, as
            on JAX).
        input_bound: True at 5% or more of step time waiting for input, False
            below, None when not measured.
        input_conclusion: One sentence on input that states the number and the verdict.
        other_percent: Percent of step time xprof attributes to no op ("All
            Others": Python, I/O outside tf.data), or None without step markers.
        top_ops: Up to 10 ops with the most self time, idle time excluded:
            device ops when the capture has any, else host framework ops, else
            the XLA ops in the trace's thread lines (XLA:CPU under JAX).
        top_ops_source: Where `top_ops` come from: "device", "host", "XLA ops
            in the trace", or "" when there are none.
        recommendation: What to look at next, in plain text; names only
            TensorBoard's Profile tab and its tools.
    """

    path: str
    hardware_type: str
    step_time_ms: Optional[float]
    step_time_ms_min: Optional[float]
    step_time_ms_max: Optional[float]
    steps: Tuple[Tuple[str, float], ...]
    input_percent: Optional[float]
    input_bound: Optional[bool]
    input_conclusion: str
    other_percent: Optional[float]
    top_ops: Tuple[OpStat, ...]
    top_ops_source: str
    recommendation: str

    @property
    def input_verdict(self) -> str:
        """A short verdict with its number, e.g. "not input-bound (0.3% of step time waiting for input)"."""
        if self.input_percent is None:
            return "not measured (no tf.data input pipeline in this capture)"
        word = "input-bound" if self.input_bound else "not input-bound"
        return f"{word} ({self.input_percent:.1f}% of step time waiting for input)"

    def to_dict(self) -> Dict[str, Any]:
        """The summary as JSON-safe built-ins (tuples become lists)."""
        d = dataclasses.asdict(self)
        d["steps"] = [[name, ms] for name, ms in self.steps]
        d["top_ops"] = [dataclasses.asdict(op) for op in self.top_ops]
        return d

    def to_text(self) -> str:
        """A short readable report: step time, input verdict, top ops, what to look at next."""
        lines = [f"Profile  {self.path}", f"Hardware {self.hardware_type or 'unknown'}"]
        if self.step_time_ms is None:
            lines.append("Step time: no step markers in this capture (profile training steps with ProfileCallback).")
        else:
            lines.append(
                f"Step time {self.step_time_ms:.2f} ms average "
                f"(min {self.step_time_ms_min:.2f}, max {self.step_time_ms_max:.2f}) over {len(self.steps)} steps"
            )
        lines.append(f"Input    {self.input_conclusion}")
        if self.other_percent is not None and self.other_percent >= _OTHER_NOTABLE_PERCENT:
            lines.append(f"Other    {_other_sentence(self.other_percent)}")
        if self.top_ops:
            width = min(40, max(len("category"), *(len(op.category) for op in self.top_ops)))
            lines.append(f"Top ops by self time ({self.top_ops_source})")
            lines.append(f"  {'self us':>10}  {'share':>6}  {'category':<{width}}  op")
            for op in self.top_ops:
                pct = f"{op.self_time_percent:>5.1f}%"
                lines.append(f"  {op.self_time_us:>10.1f}  {pct}  {op.category[:width]:<{width}}  {op.name}")
        else:
            lines.append("Top ops: none with self time in this capture.")
        if self.recommendation:
            lines.append(f"Next     {self.recommendation}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


# xprof's thresholds (input_pipeline_analysis.cc): 5% of step time waiting for
# input is moderately input-bound (20% highly); 3% in 'All Others' is notable.
_INPUT_BOUND_PERCENT = 5.0
_OTHER_NOTABLE_PERCENT = 3.0
# xprof's findings worth passing on; its input sentences are replaced by
# tpukit's own (they point at page sections the panel does not show).
_TIP_STATEMENTS = ("kernel_launch_statement", "device_collectives_statement", "precision_statement")
_PROFILE_TAB = "TensorBoard's Profile tab"


def summarize(path) -> ProfileSummary:
    """Summarize a profile capture (TensorFlow's or JAX's) offline, without TensorFlow or a server.

    Step times and the step-time breakdown come from xprof's input-pipeline
    analysis (the numbers TensorBoard's overview page shows), top ops from its
    framework op stats or, where those have none (XLA:CPU under JAX), from the
    XLA ops in the trace.

    Args:
        path: An `.xplane.pb` file, a capture directory
            (`logdir/plugins/profile/<time>`), or a logdir (its newest capture).

    Returns:
        A `ProfileSummary`.

    Raises:
        ProfileError: There is no capture at `path`, or xprof could not read it.
        ImportError: xprof is not installed.
    """
    shown, xplanes = _xplanes_for(path)
    analysis = _tool_data(xplanes, "input_pipeline_analyzer")
    overview = _tool_data(xplanes, "overview_page")
    step_table = _table_with(analysis, "stepnum") or _table_with(overview, "stepnum") or {}
    props = step_table.get("p", {})
    steps, input_percent, other_percent = _steps(step_table)
    if not _has_rows(_table_with(analysis, "opName")) and not input_percent:
        input_percent = None  # xprof saw no input pipeline: its 0% is not a measurement
    top_ops, source = _top_ops(_tool_data(xplanes, "framework_op_stats"))
    if not top_ops:
        top_ops, source = _xla_ops_from_trace(xplanes)
    tips = (_table_with(overview, "tip_type") or {}).get("p", {})
    input_bound = None if input_percent is None else input_percent >= _INPUT_BOUND_PERCENT
    times = [ms for _, ms in steps]
    return ProfileSummary(
        path=shown,
        hardware_type=props.get("hardware_type", ""),
        step_time_ms=sum(times) / len(times) if times else None,
        step_time_ms_min=min(times) if times else None,
        step_time_ms_max=max(times) if times else None,
        steps=tuple(steps),
        input_percent=input_percent,
        input_bound=input_bound,
        input_conclusion=_input_sentence(input_percent, input_bound),
        other_percent=other_percent,
        top_ops=top_ops,
        top_ops_source=source,
        recommendation=_advice(input_bound, other_percent, [props.get(k) or tips.get(k) for k in _TIP_STATEMENTS]),
    )


def _input_sentence(percent: Optional[float], bound: Optional[bool]) -> str:
    if percent is None:
        return "not measured: this capture has no tf.data input pipeline, the only input xprof can see."
    if bound:
        return f"{percent:.1f}% of step time waiting for input: input-bound (xprof's threshold is 5%)."
    return f"{percent:.1f}% of step time waiting for input: not input-bound."


def _other_sentence(percent: float) -> str:
    return f"{percent:.1f}% of step time is in no traced op ('All Others': Python overhead or I/O)."


def _advice(input_bound: Optional[bool], other_percent: Optional[float], statements: Sequence[Optional[str]]) -> str:
    """What to look at next, naming only what the user can open: TensorBoard's Profile tab and its tools."""
    parts = []
    if input_bound:
        parts.append(
            f"The input pipeline analysis in {_PROFILE_TAB} shows which tf.data stages take the time; "
            "prefetching, parallel map calls and caching usually help."
        )
    if other_percent is not None and other_percent >= _OTHER_NOTABLE_PERCENT:
        parts.append(f"The trace viewer in {_PROFILE_TAB} shows what runs between the ops.")
    parts.extend(_plain(s) for s in statements if s)
    return " ".join(p for p in parts if p)


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


def _tool_json(xplanes: List[str], tool: str, params: Optional[Dict[str, Any]] = None) -> Any:
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError as e:
        raise ImportError(f"summarize() needs the xprof package (pip install xprof): {e}") from e
    try:
        data = raw_to_tool_data.xspace_to_tool_data(xplanes, tool, params or {})
        if isinstance(data, tuple):
            data = data[0]
        values = json.loads(data) if data else None
    except Exception as e:  # a file that is not an XSpace: xprof's own error, whatever its type
        from tpukit.errors import one_line

        raise ProfileError(f"summarize_profile: {', '.join(xplanes)} is not a profile capture xprof can read "
                           f"({one_line(e, 120)}); {_EXPECTED}.") from None
    if not values:
        raise ProfileError(f"summarize_profile: xprof found no {tool} data in {', '.join(xplanes)}: not a whole "
                           f"profile capture; {_EXPECTED}.")
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


def _top_ops(tables: List[Dict[str, Any]]) -> Tuple[Tuple[OpStat, ...], str]:
    """Framework ops from xprof's op stats: (ops, "device" or "host"), or ((), "") when it has none."""
    # xprof gives the op table twice, with and without IDLE time; shares are
    # more telling without it.
    candidates = [t for t in tables if isinstance(t, dict) and "total_self_time" in _column_ids(t)]
    if not candidates:
        return (), ""
    table = next((t for t in candidates if not _has_idle(t)), candidates[0])
    ids = _column_ids(table)
    col = {name: ids.index(name) for name in ids}
    rows = []
    for row in table.get("rows", []):
        cells = _cells(row)
        where = cells[col["host_or_device"]] if "host_or_device" in col else "Host"
        category = str(cells[col["type"]]) if "type" in col else ""
        self_time = float(cells[col["total_self_time"]] or 0.0)
        if category == "IDLE" or self_time <= 0:
            continue
        share_key = "device_total_self_time_percent" if where == "Device" else "host_total_self_time_percent"
        share = cells[col[share_key]] if share_key in col else 0.0
        name = str(cells[col["operation"]]) if "operation" in col else category
        rows.append((where, OpStat(name, category, self_time, 100.0 * float(share or 0.0))))
    on_device = [op for where, op in rows if where == "Device"]
    chosen = on_device or [op for _, op in rows]
    chosen.sort(key=lambda op: op.self_time_us, reverse=True)
    return tuple(chosen[:_TOP_OPS]), ("device" if on_device else "host") if chosen else ""


def _xla_ops_from_trace(xplanes: List[str]) -> Tuple[Tuple[OpStat, ...], str]:
    """XLA ops from the trace: XLA:CPU runs them on the host's thread lines (xprof's op stats leave them out)."""
    # use_saved_result=False: newer xprof otherwise caches the trace next to the capture.
    trace = _tool_json(xplanes, "trace_viewer", {"use_saved_result": False})
    ops = _xla_ops(trace.get("traceEvents", []) if isinstance(trace, dict) else [])
    return ops, ("XLA ops in the trace" if ops else "")


def _xla_ops(events: Sequence[Dict[str, Any]]) -> Tuple[OpStat, ...]:
    """The top XLA ops among trace events ("X" events whose args name an `hlo_op`).

    Self time is an op's time less the ops nested in it on the same thread;
    shares are of all XLA ops' self time.
    """
    threads: Dict[Tuple[Any, Any], List[Dict[str, Any]]] = {}
    for event in events:
        if event.get("ph") == "X" and "hlo_op" in (event.get("args") or {}):
            threads.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    self_us: Dict[Tuple[str, str], float] = {}
    for line in threads.values():
        line.sort(key=lambda e: (float(e.get("ts", 0)), -float(e.get("dur", 0))))
        enclosing: List[Tuple[float, Tuple[str, str]]] = []  # (end, op) of the ops open at this event
        for event in line:
            start, duration = float(event.get("ts", 0)), float(event.get("dur", 0))
            key = (str(event["args"].get("hlo_module", "")), str(event["args"]["hlo_op"]))
            while enclosing and enclosing[-1][0] <= start:
                enclosing.pop()
            if enclosing:
                self_us[enclosing[-1][1]] -= duration
            self_us[key] = self_us.get(key, 0.0) + duration
            enclosing.append((start + duration, key))
    total = sum(us for us in self_us.values() if us > 0)
    ops = [
        OpStat(f"{module}/{op}" if module else op, re.sub(r"\.\d+$", "", op), us, 100.0 * us / total)
        for (module, op), us in self_us.items()
        if us > 0
    ]
    ops.sort(key=lambda op: op.self_time_us, reverse=True)
    return tuple(ops[:_TOP_OPS])
