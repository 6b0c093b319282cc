"""What a profile says, as plain values: the summary `summarize` returns, its text, its verdict and its advice.

Kept apart from reading captures (`xprof`) so that the verdict's threshold,
the sentences and the advice live in one place, free of xprof's formats, and
so that the panel's table (`tpukit.ui.tables`) has a plain model to render.
Nothing here reads a file or imports a framework.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Sequence, Tuple

__all__ = ["OpStat", "ProfileSummary", "from_measurements"]

# xprof's thresholds (input_pipeline_analysis.cc): 5% of step time waiting for
# input is moderately input-bound (20% highly); 3% in 'All Others' is notable.
_INPUT_BOUND_PERCENT = 5.0
_OTHER_NOTABLE_PERCENT = 3.0
# Below this share of the step time, the top ops leave most of the step unexplained, and the summary says so.
_COVERED_PERCENT = 50.0
_PROFILE_TAB = "TensorBoard's Profile tab"


@dataclasses.dataclass(frozen=True)
class OpStat:
    """One op's share of the profiled time.

    Attributes:
        name: A readable name, "<layer> <op>" where the trace says which
            ("conv2d_1 Conv2DBackpropFilter", "conv2d_1 conv (grad)"), kept
            distinct from the other top ops' names.
        category: The op's type (TensorFlow's, e.g. "_MklNativeConv2D") or
            kind (XLA's, e.g. "fusion").
        self_time_us: Its self time in the capture, in microseconds.
        self_time_percent: Its share of the ops' self time.
        path: The profiler's own name for it: TensorFlow's graph path, or
            `<hlo module>/<hlo op>` for an XLA op (what the trace viewer shows).
    """

    name: str
    category: str
    self_time_us: float
    self_time_percent: float
    path: str = ""


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
            Others": Python, I/O outside tf.data), or None without step
            markers or where xprof sees no op at all (XLA:CPU under JAX: its
            ops are in the trace only, and xprof counts them as "All Others").
        top_ops: Up to 10 ops with the most self time, idle time excluded:
            device ops when the capture has any, else the XLA ops in the
            trace's thread lines (XLA:CPU, under JAX and under TensorFlow with
            jit_compile) ranked with the host framework ops, else host
            framework ops alone. XLA ops are named `<hlo module>/<hlo op>`,
            their category the op's kind; in the profiled steps an XLA op also
            gets the time after it until its module's next op starts (work it
            handed to a thread pool, as XLA:CPU does under TensorFlow).
        top_ops_source: Where `top_ops` come from: "device", "host", "XLA ops
            in the trace", "XLA ops in the trace and host ops", or "" when
            there are none.
        recommendation: What to look at next, in plain text; names only
            TensorBoard's Profile tab and its tools.
        top_ops_step_percent: The top ops' self time as a percent of the
            profiled steps' time (their sum over the steps' sum), or None
            without step markers or ops. Ops that run on several threads at
            once can add up to more than 100.
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
    top_ops_step_percent: Optional[float] = None
    smaller_ops_step_percent: Optional[float] = None
    no_op_step_percent: Optional[float] = None
    input_source: str = ""

    @property
    def input_verdict(self) -> str:
        """A short verdict with its number, e.g. "not input-bound (0.3% of step time waiting for input)"."""
        if self.input_percent is None:
            return "not measured (no tf.data input pipeline in this capture)"
        word = "input-bound" if self.input_bound else "not input-bound"
        return f"{word} ({self.input_percent:.1f}% of step time {_waiting(self.input_source)})"

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
            covered = "" if self.top_ops_step_percent is None else f": {_covered_words(self.top_ops_step_percent)}"
            lines.append(f"Top ops by self time ({self.top_ops_source}){covered}")
            lines.append(f"  {'self us':>10}  {'share':>6}  {'category':<{width}}  op")
            for op in self.top_ops:
                pct = f"{op.self_time_percent:>5.1f}%"
                lines.append(f"  {op.self_time_us:>10.1f}  {pct}  {op.category[:width]:<{width}}  {op.name}")
            rest = _rest_sentence(self.top_ops_step_percent, self.smaller_ops_step_percent, self.no_op_step_percent)
            if rest:
                lines.append(f"Rest     {rest}")
        else:
            lines.append("Top ops: none with self time in this capture.")
        if self.recommendation:
            lines.append(f"Next     {self.recommendation}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def from_measurements(
    path: str,
    hardware_type: str,
    steps: Sequence[Tuple[str, float]],
    input_percent: Optional[float],
    other_percent: Optional[float],
    top_ops: Tuple[OpStat, ...],
    top_ops_source: str,
    tips: Sequence[str],
    ops_us: Optional[float] = None,
    input_source: str = "tf.data",
) -> ProfileSummary:
    """A `ProfileSummary` from what a capture measured: step times, verdict, sentences and advice follow from it.

    `tips` are xprof's findings worth passing on, already plain text. `ops_us`
    is the self time of all the ops the top ones were picked from: with it,
    the summary says where the rest of the step went. `input_source` says
    where `input_percent` was measured ("tf.data" or "trace").
    """
    input_bound = None if input_percent is None else input_percent >= _INPUT_BOUND_PERCENT
    times = [ms for _, ms in steps]
    step_us = 1000.0 * sum(times)
    top_us = sum(op.self_time_us for op in top_ops)
    covered = 100.0 * top_us / step_us if top_ops and times and step_us > 0 else None
    smaller = no_op = None
    if covered is not None and ops_us is not None:
        smaller = 100.0 * max(0.0, ops_us - top_us) / step_us
        no_op = 100.0 - covered - smaller if covered + smaller < 100.0 else None
    return ProfileSummary(
        path=path,
        hardware_type=hardware_type,
        step_time_ms=sum(times) / len(times) if times else None,
        step_time_ms_min=min(times) if times else None,
        step_time_ms_max=max(times) if times else None,
        steps=tuple(steps),
        input_percent=input_percent,
        input_bound=input_bound,
        input_conclusion=_input_sentence(input_percent, input_bound, input_source),
        other_percent=other_percent,
        top_ops=top_ops,
        top_ops_source=top_ops_source,
        recommendation=_advice(input_bound, other_percent, covered, tips, top_ops[0] if top_ops else None),
        top_ops_step_percent=covered,
        smaller_ops_step_percent=smaller,
        no_op_step_percent=no_op,
        input_source=input_source if input_percent is not None else "",
    )


def _input_sentence(percent: Optional[float], bound: Optional[bool], source: str = "tf.data") -> str:
    if percent is None:
        return "not measured: this capture has no tf.data input pipeline, the only input xprof can see."
    shown = f"{percent:.1f}% of step time {_waiting(source)}"
    if source == "trace":
        shown += " (the data iterator's next() calls in the trace)"
    if bound:
        return f"{shown}: input-bound (xprof's threshold is 5%)."
    return f"{shown}: not input-bound."


def _waiting(source: str) -> str:
    return "fetching the next batch" if source == "trace" else "waiting for input"


def _other_sentence(percent: float) -> str:
    return f"{percent:.1f}% of step time is in no traced op ('All Others': Python overhead or I/O)."


def _covered_words(percent: float) -> str:
    words = f"{percent:.0f}% of the step time"
    return words + " (ops ran on several threads at once)" if percent > 100.0 else words


def _rest_sentence(covered: Optional[float], smaller: Optional[float], no_op: Optional[float]) -> str:
    """Where the step time outside the top ops went, e.g. "12% of the step time in smaller ops, 31% in no op …";
    "" where the capture cannot tell."""
    if covered is None or smaller is None:
        return ""
    words = f"{smaller:.0f}% of the step time in smaller ops"
    if no_op is not None:
        return (
            f"{words}, {no_op:.0f}% in no op the profiler names (waiting for work or input, Python, the "
            "framework's dispatch between ops)."
        )
    if covered > 100.0:
        return words + "."  # the top ops' line says already that ops ran on several threads at once
    return f"{words}; with the top ops that is more than the step: ops ran on several threads at once."


def _advice(
    input_bound: Optional[bool],
    other_percent: Optional[float],
    covered: Optional[float],
    tips: Sequence[str],
    top: Optional[OpStat] = None,
) -> str:
    """What to look at next, naming only what the user can open: TensorBoard's Profile tab and its tools; where
    nothing stands out, the op with the most self time."""
    parts = []
    uncovered = covered is not None and covered < _COVERED_PERCENT
    if input_bound:
        parts.append(
            f"The input pipeline analysis in {_PROFILE_TAB} shows which tf.data stages take the time; "
            "prefetching, parallel map calls and caching usually help."
        )
    if uncovered:
        parts.append(f"The trace viewer in {_PROFILE_TAB} shows what the rest of the step does.")
    elif other_percent is not None and other_percent >= _OTHER_NOTABLE_PERCENT:
        parts.append(f"The trace viewer in {_PROFILE_TAB} shows what runs between the ops.")
    parts.extend(tips)
    if not any(parts) and top is not None:
        parts.append(
            f"Start with {top.name}, the op with the most self time ({top.self_time_percent:.0f}% of the "
            f"ops' time): the trace viewer in {_PROFILE_TAB} shows where it runs in each step."
        )
    return " ".join(p for p in parts if p)
