"""A capture's events read straight from its `.xplane.pb`, for when xprof's converter cannot run here.

The XSpace format (tsl/profiler/protobuf/xplane.proto) is decoded from the
protobuf wire format by hand, so this works with any protobuf, or none, and
without TensorFlow: it gives what the trace itself holds (the step markers and
the XLA ops on the thread lines) as trace-viewer-like events, which `xprof`
turns into a `ProfileSummary` without xprof's own analyses.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, List, Tuple

__all__ = ["trace_events"]

# Field numbers of xplane.proto.
_SPACE_PLANES = 1
_PLANE_ID, _PLANE_NAME, _PLANE_LINES, _PLANE_EVENT_METADATA, _PLANE_STAT_METADATA = 1, 2, 3, 4, 5
_LINE_ID, _LINE_NAME, _LINE_TIMESTAMP_NS, _LINE_EVENTS = 1, 2, 3, 4
_EVENT_METADATA_ID, _EVENT_OFFSET_PS, _EVENT_DURATION_PS, _EVENT_STATS = 1, 2, 3, 4
_STAT_METADATA_ID = 1
_STAT_DOUBLE, _STAT_UINT64, _STAT_INT64, _STAT_STR, _STAT_BYTES, _STAT_REF = 2, 3, 4, 5, 6, 7
_METADATA_ID, _METADATA_NAME = 1, 2


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
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
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
                events.append({"ph": "X", "name": name, "pid": plane_id, "tid": line_id,
                               "ts": timestamp_ns / 1e3 + offset_ps / 1e6, "dur": duration_ps / 1e6,
                               "args": {**encoded, **args}})
    return events
