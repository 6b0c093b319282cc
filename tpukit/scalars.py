"""TensorBoard scalars without TensorFlow or TensorBoard: per-epoch metrics in TensorBoard's event-file format.

Keras' TensorBoard callback writes with `tf.summary`, so it needs TensorFlow,
which Colab's TPU runtime does not have; and the tensorboard package is not
there either (installing it would move Colab's protobuf: tensorboard 2.21 needs
protobuf 6). So where TensorFlow is missing, `EpochScalars` writes the event
files itself: the same layout as Keras (`<logdir>/train` and
`<logdir>/validation`, tags `epoch_loss`, `epoch_accuracy`, ...), each record
framed as TFRecord (length, masked CRC-32C, data, masked CRC-32C) around an
`Event` protocol buffer with a `simple_value` scalar. TensorBoard, once
installed to view them (`tpukit.colab.setup()`), reads them like its own.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Dict, Optional

import keras


class EpochScalars(keras.callbacks.Callback):
    """Writes each epoch's logs as TensorBoard scalars; `val_` metrics go to the validation run.

    A file opens on the first epoch that has something to write, and closes at the end of training.
    """

    def __init__(self, logdir: str):
        super().__init__()
        self.logdir = logdir
        self._files: Dict[str, EventFile] = {}

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self._write("train", epoch, {k: v for k, v in logs.items() if not k.startswith("val_")})
        self._write("validation", epoch, {k[4:]: v for k, v in logs.items() if k.startswith("val_")})

    def on_train_end(self, logs=None):
        self.close()

    def close(self):
        for events in self._files.values():
            events.close()
        self._files.clear()

    def _write(self, run: str, step: int, values: Dict[str, float]) -> None:
        scalars = {f"epoch_{k}": f for k, v in sorted(values.items()) if (f := _number(v)) is not None}
        if not scalars:
            return
        if run not in self._files:
            self._files[run] = EventFile(os.path.join(self.logdir, run))
        self._files[run].scalars(step, scalars)


class EventFile:
    """One `events.out.tfevents.*` file: scalars appended as Event records, flushed after each."""

    _count = 0

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        EventFile._count += 1
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.{EventFile._count}.tpukit"
        self.path = os.path.join(directory, name)
        self._file = open(self.path, "ab")
        self._record(_event(time.time(), 0, file_version="brain.Event:2"))

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        summary = b"".join(_message(1, _string(1, tag) + _float(2, value)) for tag, value in values.items())
        self._record(_event(time.time(), step, summary=summary))

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def _record(self, data: bytes) -> None:
        header = struct.pack("<Q", len(data))
        self._file.write(header + struct.pack("<I", _masked_crc(header)) + data + struct.pack("<I", _masked_crc(data)))
        self._file.flush()


# ---- the protocol buffer and record encoding (tensorboard/compat/proto/event.proto, summary.proto) ----------

def _event(wall_time: float, step: int, *, file_version: Optional[str] = None, summary: Optional[bytes] = None):
    """Event{wall_time = 1 (double), step = 2 (int64), file_version = 3 (string), summary = 5 (Summary)}."""
    out = _key(1, 1) + struct.pack("<d", wall_time) + _key(2, 0) + _varint(step)
    if file_version is not None:
        out += _string(3, file_version)
    if summary is not None:
        out += _message(5, summary)
    return out


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _string(field: int, text: str) -> bytes:
    return _message(field, text.encode())


def _message(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def _float(field: int, value: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", value)


def _crc32c_table():
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _number(value) -> Optional[float]:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
