"""A capture's events read straight from its `.xplane.pb`, for when xprof's converter cannot run here.

The XSpace format (tsl/profiler/protobuf/xplane.proto) is decoded from the
protobuf wire format by hand, so this works with any protobuf, or none, and
without TensorFlow: it gives what the trace itself holds (the step markers and
the XLA ops on the thread lines) as trace-viewer-like events, which `xprof`
turns into a `ProfileSummary` without xprof's own analyses.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any, Dict, Iterator, List, Optional, Tuple

__all__ = ["HloInstruction", "hlo_instructions", "trace_events"]

# Field numbers of xplane.proto.
_SPACE_PLANES = 1
_PLANE_ID, _PLANE_NAME, _PLANE_LINES, _PLANE_EVENT_METADATA, _PLANE_STAT_METADATA = 1, 2, 3, 4, 5
_LINE_ID, _LINE_NAME, _LINE_TIMESTAMP_NS, _LINE_EVENTS = 1, 2, 3, 4
_EVENT_METADATA_ID, _EVENT_OFFSET_PS, _EVENT_DURATION_PS, _EVENT_STATS = 1, 2, 3, 4
_STAT_METADATA_ID = 1
_STAT_DOUBLE, _STAT_UINT64, _STAT_INT64, _STAT_STR, _STAT_BYTES, _STAT_REF = 2, 3, 4, 5, 6, 7
_METADATA_ID, _METADATA_NAME = 1, 2
_EVENT_METADATA_STATS = 5
# Field numbers of xla/service/hlo.proto and xla/xla_data.proto (OpMetadata).
_HLO_PROTO_MODULE = 1
_MODULE_COMPUTATIONS = 3
_COMPUTATION_INSTRUCTIONS, _COMPUTATION_ID, _COMPUTATION_ROOT_ID = 2, 5, 6
_INSTRUCTION_NAME, _INSTRUCTION_OPCODE, _INSTRUCTION_SHAPE, _INSTRUCTION_METADATA = 1, 2, 3, 7
_SHAPE_DIMENSIONS = 3
_INSTRUCTION_ID, _INSTRUCTION_OPERANDS, _INSTRUCTION_CALLED = 35, 36, 38
_OP_TYPE, _OP_NAME = 1, 2
# The XSpace stat that holds a compiled module's HloProto, on the "/host:metadata" plane.
_HLO_PROTO_STAT = "Hlo Proto"


def _varint(data: bytes, i: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(data: bytes) -> Iterator[Tuple[int, int, Any]]:
    """(field number, wire type, value) of one message: ints for varints and fixed, bytes for length-delimited."""
    i, end = 0, len(data)
    while i < end:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _metadata_names(entry: bytes) -> Tuple[int, str]:
    """(id, name) of one map<int64, X*Metadata> entry."""
    key, name = 0, ""
    for number, _, value in _fields(entry):
        if number == 1:
            key = _signed(value)
        elif number == 2:
            for n, _, v in _fields(value):
                if n == _METADATA_NAME:
                    name = _text(v)
    return key, name


def _stat(data: bytes, stat_names: Dict[int, str]) -> Tuple[str, Any]:
    name, value = "", None
    for number, wire, raw in _fields(data):
        if number == _STAT_METADATA_ID:
            name = stat_names.get(_signed(raw), "")
        elif number == _STAT_DOUBLE and wire == 1:
            value = struct.unpack("<d", raw)[0]
        elif number == _STAT_UINT64:
            value = raw
        elif number == _STAT_INT64:
            value = _signed(raw)
        elif number in (_STAT_STR, _STAT_BYTES):
            value = _text(raw)
        elif number == _STAT_REF:
            value = stat_names.get(raw, "")
    return name, value


def _name_and_args(name: str) -> Tuple[str, Dict[str, Any]]:
    """A TraceMe name that still carries its arguments ("train#step_num=3,_r=1#") as (name, args)."""
    if "#" not in name:
        return name, {}
    head, _, rest = name.partition("#")
    args = {}
    for part in rest.rstrip("#").split(","):
        key, eq, value = part.partition("=")
        if eq:
            args[key] = int(value) if value.lstrip("-").isdigit() else value
    return head, args


def trace_events(path: str) -> List[Dict[str, Any]]:
    """The capture's events as trace-viewer "X" events: name, pid (plane), tid (line), ts and dur in
    microseconds, args (the event's stats by name).

    Raises:
        ValueError: the file is not an XSpace.
    """
    with open(path, "rb") as f:
        space = f.read()
    events: List[Dict[str, Any]] = []
    for number, wire, plane in _fields(space):
        if number != _SPACE_PLANES:
            continue
        if wire != 2:
            raise ValueError("not an XSpace")
        plane_id, event_names, stat_names, lines = 0, {}, {}, []
        for n, _, value in _fields(plane):
            if n == _PLANE_ID:
                plane_id = _signed(value)
            elif n == _PLANE_EVENT_METADATA:
                key, name = _metadata_names(value)
                event_names[key] = name
            elif n == _PLANE_STAT_METADATA:
                key, name = _metadata_names(value)
                stat_names[key] = name
            elif n == _PLANE_LINES:
                lines.append(value)
        for line in lines:
            line_id, timestamp_ns, raw_events = 0, 0, []
            for n, _, value in _fields(line):
                if n == _LINE_ID:
                    line_id = _signed(value)
                elif n == _LINE_TIMESTAMP_NS:
                    timestamp_ns = _signed(value)
                elif n == _LINE_EVENTS:
                    raw_events.append(value)
            for raw in raw_events:
                name, offset_ps, duration_ps, args = "", 0, 0, {}
                for n, _, value in _fields(raw):
                    if n == _EVENT_METADATA_ID:
                        name = event_names.get(_signed(value), "")
                    elif n == _EVENT_OFFSET_PS:
                        offset_ps = _signed(value)
                    elif n == _EVENT_DURATION_PS:
                        duration_ps = _signed(value)
                    elif n == _EVENT_STATS:
                        key, stat = _stat(value, stat_names)
                        if key:
                            args[key] = stat
                name, encoded = _name_and_args(name)
                events.append(
                    {
                        "ph": "X",
                        "name": name,
                        "pid": plane_id,
                        "tid": line_id,
                        "ts": timestamp_ns / 1e3 + offset_ps / 1e6,
                        "dur": duration_ps / 1e6,
                        "args": {**encoded, **args},
                    }
                )
    return events


@dataclasses.dataclass(frozen=True)
class HloInstruction:
    """What a compiled module says about one of its top-level instructions (an XLA op the trace names).

    Attributes:
        opcode: e.g. "fusion", "convolution", "dot".
        op_type: The framework op it came from (TensorFlow's op type, e.g. "Conv2D"), or "".
        op_name: The framework's name for it: JAX's "jit(train_step)/jvp(conv2d)/conv_general_dilated",
            TensorFlow's "cnn_1/conv2d_1/convolution"; "" where the compiler kept none.
        fused: (opcode, op_type, op_name) of the instructions inside a fusion (or another called computation),
            parameters left out, the root first.
        inputs: op_name of the instructions it reads, where they have one.
        outputs: op_name of the instructions that read it, where they have one.
        dims: Its result's dimensions, sorted (a layout-free key: a weight and its gradient have the same);
            () for a tuple or a scalar.
        operand_dims: The sorted dimensions of what it reads (for a fusion, its fused parameters').
    """

    opcode: str
    op_type: str = ""
    op_name: str = ""
    fused: Tuple[Tuple[str, str, str], ...] = ()
    inputs: Tuple[str, ...] = ()
    outputs: Tuple[str, ...] = ()
    dims: Tuple[int, ...] = ()
    operand_dims: Tuple[Tuple[int, ...], ...] = ()


def _ints(value: Any, wire: int) -> List[int]:
    """A repeated int64 field's values: packed (length-delimited) or one varint."""
    if wire != 2:
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def _hlo_proto_stats(space: bytes) -> Dict[str, bytes]:
    """{module name with its program id, e.g. "jit_train_step(40)": serialized HloProto} of the metadata planes."""
    protos: Dict[str, bytes] = {}
    for number, _, plane in _fields(space):
        if number != _SPACE_PLANES:
            continue
        stat_names: Dict[int, str] = {}
        entries = []
        for n, _, value in _fields(plane):
            if n == _PLANE_STAT_METADATA:
                key, name = _metadata_names(value)
                stat_names[key] = name
            elif n == _PLANE_EVENT_METADATA:
                entries.append(value)
        if _HLO_PROTO_STAT not in stat_names.values():
            continue
        for entry in entries:
            for n, _, metadata in _fields(entry):
                if n != 2:
                    continue
                name, proto = "", None
                for k, _, value in _fields(metadata):
                    if k == _METADATA_NAME:
                        name = _text(value)
                    elif k == _EVENT_METADATA_STATS:
                        stat = dict((f, v) for f, _, v in _fields(value))
                        if stat_names.get(_signed(stat.get(_STAT_METADATA_ID, 0))) == _HLO_PROTO_STAT:
                            proto = stat.get(_STAT_BYTES) or stat.get(_STAT_STR)
                if name and proto:
                    protos[name] = proto
    return protos


def _op_metadata(data: bytes) -> Tuple[str, str]:
    op_type = op_name = ""
    for n, _, value in _fields(data):
        if n == _OP_TYPE:
            op_type = _text(value)
        elif n == _OP_NAME:
            op_name = _text(value)
    return op_type, op_name


def _module_instructions(proto: bytes) -> Dict[str, HloInstruction]:
    """The top-level instructions of every computation of one HloProto (the ops a trace can name), by name."""
    computations: Dict[int, List[Dict[str, Any]]] = {}
    roots: Dict[int, int] = {}
    for n, _, module in _fields(proto):
        if n != _HLO_PROTO_MODULE:
            continue
        for k, _, computation in _fields(module):
            if k != _MODULE_COMPUTATIONS:
                continue
            cid, root, instructions = 0, None, []
            for f, _, value in _fields(computation):
                if f == _COMPUTATION_ID:
                    cid = _signed(value)
                elif f == _COMPUTATION_ROOT_ID:
                    root = _signed(value)
                elif f == _COMPUTATION_INSTRUCTIONS:
                    ins: Dict[str, Any] = {
                        "name": "",
                        "opcode": "",
                        "op_type": "",
                        "op_name": "",
                        "id": 0,
                        "operands": [],
                        "called": [],
                        "dims": (),
                    }
                    for g, w, v in _fields(value):
                        if g == _INSTRUCTION_NAME:
                            ins["name"] = _text(v)
                        elif g == _INSTRUCTION_OPCODE:
                            ins["opcode"] = _text(v)
                        elif g == _INSTRUCTION_METADATA:
                            ins["op_type"], ins["op_name"] = _op_metadata(v)
                        elif g == _INSTRUCTION_SHAPE:
                            ins["dims"] = tuple(
                                sorted(d for f2, w2, v2 in _fields(v) if f2 == _SHAPE_DIMENSIONS for d in _ints(v2, w2))
                            )
                        elif g == _INSTRUCTION_ID:
                            ins["id"] = _signed(v)
                        elif g == _INSTRUCTION_OPERANDS:
                            ins["operands"].extend(_ints(v, w))
                        elif g == _INSTRUCTION_CALLED:
                            ins["called"].extend(_ints(v, w))
                    instructions.append(ins)
            roots[cid] = root
            computations[cid] = instructions
    found: Dict[str, HloInstruction] = {}
    for cid, instructions in computations.items():
        by_id = {ins["id"]: ins for ins in instructions}
        readers: Dict[int, List[int]] = {}
        for ins in instructions:
            for operand in ins["operands"]:
                readers.setdefault(operand, []).append(ins["id"])
        for ins in instructions:
            fused = []
            operand_dims = [by_id[i]["dims"] for i in ins["operands"] if i in by_id]
            for called in ins["called"]:
                operand_dims.extend(i["dims"] for i in computations.get(called, []) if i["opcode"] == "parameter")
                inner = [i for i in computations.get(called, []) if i["opcode"] != "parameter"]
                inner.sort(key=lambda i: i["id"] != roots.get(called))  # the root first
                fused.extend((i["opcode"], i["op_type"], i["op_name"]) for i in inner)
            inputs = tuple(by_id[i]["op_name"] for i in ins["operands"] if i in by_id and by_id[i]["op_name"])
            outputs = tuple(by_id[i]["op_name"] for i in readers.get(ins["id"], []) if by_id[i]["op_name"])
            found.setdefault(
                ins["name"],
                HloInstruction(
                    ins["opcode"],
                    ins["op_type"],
                    ins["op_name"],
                    tuple(fused),
                    inputs,
                    outputs,
                    ins["dims"],
                    tuple(d for d in operand_dims if d),
                ),
            )
    return found


_PROGRAM_ID = re.compile(r"\((\d+)\)$")


def hlo_instructions(path: str) -> Dict[Tuple[str, Optional[int]], Dict[str, HloInstruction]]:
    """The compiled modules a capture holds, as {(module name, program id): {instruction name: HloInstruction}}.

    XLA writes each module's HloProto into the capture's "/host:metadata"
    plane; its instructions carry the framework's op names (OpMetadata), which
    the trace's events (named by module and instruction only) lack. A capture
    without them (TensorFlow's host ops alone) gives {}.
    """
    with open(path, "rb") as f:
        space = f.read()
    modules: Dict[Tuple[str, Optional[int]], Dict[str, HloInstruction]] = {}
    for name, proto in _hlo_proto_stats(space).items():
        match = _PROGRAM_ID.search(name)
        key = (name[: match.start()], int(match.group(1))) if match else (name, None)
        try:
            modules[key] = _module_instructions(proto)
        except (IndexError, ValueError, struct.error):  # not an HloProto this reader understands: no names
            continue
    return modules
