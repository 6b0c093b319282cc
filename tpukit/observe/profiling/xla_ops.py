"""XLA ops' self time from a capture's trace events, named from the compiled modules' metadata.

xprof's op stats leave out the XLA ops that XLA:CPU runs on the host's thread
lines (under JAX, and under TensorFlow's jit_compile), so their self time is
worked out here from the trace events alone: nesting on a thread, and the gaps
in which a module's work runs on the thread pool. Kept apart from `xprof`, which
reads xprof's tables, because this needs none of them: the same arithmetic
serves the converter's trace viewer events and the events `xspace` decodes where
the converter cannot run.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tpukit.observe.profiling import names, xspace
from tpukit.observe.profiling.summary import OpStat

__all__ = ["from_trace", "hlo_instructions"]

_Modules = Dict[Tuple[str, Any], Dict[str, "xspace.HloInstruction"]]


def hlo_instructions(xplanes: List[str]) -> _Modules:
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


def from_trace(events: Sequence[Dict[str, Any]], modules: Optional[_Modules] = None) -> Tuple[OpStat, ...]:
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
