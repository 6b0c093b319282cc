"""Epoch backups that a kill at any instant cannot tear.

Keras' BackupAndRestore overwrites one weights file in place and writes its
epoch marker afterwards: a kill inside the write leaves a torn file, and a kill
between the two makes a resumed run train an epoch twice. Here each epoch's
weights (with the optimizer's state) go to a file of their own, written under a
temporary name, flushed and renamed; only then does the marker `latest.json`
(also renamed into place) name that file, its size and its SHA-256; only then
is the previous epoch's file removed. So the marker always names a whole file
of the epoch it says, and a resume either continues exactly or is refused in
one line saying why.

This module does not import Keras: it writes what `save` (a callable taking a
path) writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import hashlib
import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional

from tpukit.runs import directory, model_state

MARKER = "latest.json"
_LEGACY_WEIGHTS, _LEGACY_MARKER = "latest.weights.h5", "training_metadata.json"  # Keras' BackupAndRestore


class BackupError(directory.RunDirError):
    """A backup that cannot be written or read. The message is one line and says what is kept."""


class RestoreError(BackupError):
    """The weights to resume from do not fit the model, or are missing. Nothing in the run was changed."""


@dataclasses.dataclass(frozen=True)
class Backup:
    """The newest whole backup: `epochs_done` epochs, weights at `path`."""

    epochs_done: int
    path: Path


def weights_name(epochs_done: int) -> str:
    return f"epoch-{epochs_done:06d}{directory.STATE_SUFFIX}"


def room_for(folder, needed: int, what: str) -> None:
    """BackupError, before anything is written, if `folder`'s disk has less than `needed` bytes free.

    Why check first: HDF5 (under Keras' save_weights) that fails a write for want of space leaves an object
    whose reference count is broken, and the process later crashes as it exits (seen: a segfault at the end of
    a test session). A write that never starts leaves nothing broken.
    """
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # the write itself will say what is wrong
    if free < needed:
        raise BackupError(
            f"could not {what} in {folder}: the disk is full; {_kept(folder)} ({free / 2**20:.1f} MB "
            f"free, about {needed / 2**20:.1f} MB needed). Free space and resume the run."
        )


def _kept(folder: Path) -> str:
    with contextlib.suppress(BackupError, OSError):
        kept = latest(folder, verify=False)
        if kept:
            return f"the backup of epoch {kept.epochs_done} is kept"
    return "no earlier backup exists"


def size_needed(estimate: int, folder) -> int:
    """Bytes a new backup takes: the previous backup's size where there is one, else `estimate`, plus a margin."""
    with contextlib.suppress(BackupError, OSError):
        kept = latest(folder, verify=False)
        if kept:
            estimate = max(estimate, kept.path.stat().st_size)
    return int(estimate * 1.05) + 256 * 1024


def write(backup_dir, epochs_done: int, save: Callable[[str], None], needed: int = 0) -> Backup:
    """Back up after `epochs_done` whole epochs: `save(path)` writes the weights; the marker follows them.

    Args:
        needed: about how many bytes `save` writes (checked against the free space first; see `room_for`).

    Raises:
        BackupError: the disk is full or not writable; the previous backup is kept.
    """
    folder = Path(backup_dir)
    target = folder / weights_name(epochs_done)
    if folder.exists():
        room_for(folder, size_needed(needed, folder), f"back up epoch {epochs_done}")
    failure = None
    with _hush_h5py():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with directory.atomic(target) as tmp:
                save(str(tmp))
            size, digest = _digest(target)
            directory.write_json(
                folder / MARKER, {"epochs_done": epochs_done, "file": target.name, "bytes": size, "sha256": digest}
            )
        except OSError as e:
            failure = e.errno, e.strerror or str(e).strip().splitlines()[0]
        if failure:  # outside the except block, so the failed writer's frames (and its open file) can be freed
            gc.collect()
    if failure:
        why = "the disk is full" if failure[0] in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else failure[1]
        raise BackupError(
            f"could not back up epoch {epochs_done} in {folder}: {why}; {_kept(folder)}. Free space and resume the run."
        )
    for old in folder.iterdir():  # earlier epochs and temporary files a kill left behind
        if old.name not in (target.name, MARKER) and old.is_file():
            old.unlink(missing_ok=True)
    return Backup(epochs_done, target)


@contextlib.contextmanager
def _hush_h5py():
    """h5py reports a failed write a second time when it frees the file, as an 'Exception ignored' traceback
    printed straight to stderr; the write's own OSError already says it. So stderr is held during the write and
    passed on afterwards without those reports."""
    held, stderr, hook = io.StringIO(), sys.stderr, sys.unraisablehook
    sys.stderr, sys.unraisablehook = held, lambda unraisable: None
    try:
        yield
    finally:
        sys.stderr, sys.unraisablehook = stderr, hook
        text = held.getvalue()
        if "h5py" in text:
            text = "\n".join(line for line in text.splitlines() if _ours(line))
        if text.strip() and stderr is not None:
            stderr.write(text if text.endswith("\n") else text + "\n")


def _ours(line: str) -> bool:
    return not (
        line.startswith(
            (
                "Exception ignored in: 'h5py",
                "Traceback (most recent call last)",
                "  File ",
                "RuntimeError: Can't decrement id ref count",
                ", filename = ",
            )
        )
    )


def latest(backup_dir, verify: bool = True) -> Optional[Backup]:
    """The newest whole backup in `backup_dir`, or None if there is none.

    Raises:
        BackupError: the marker or the file it names is damaged (with `verify`, its size and SHA-256 are checked).
    """
    folder = Path(backup_dir)
    marker = folder / MARKER
    if not marker.exists():
        return _legacy(folder)
    try:
        record = json.loads(marker.read_text())
        epochs, name, size, digest = (record["epochs_done"], record["file"], record["bytes"], record["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BackupError(f"{marker} is damaged ({type(e).__name__}); the run cannot resume exactly.") from None
    path = folder / Path(str(name)).name
    if not path.is_file():
        raise BackupError(f"{marker} names {path.name}, which is missing; the run cannot resume exactly.")
    if verify and _digest(path) != (size, digest):
        raise BackupError(
            f"{path} does not match its record in {MARKER} (changed or torn after it was written); "
            "the run cannot resume exactly."
        )
    return Backup(int(epochs), path)


def _legacy(folder: Path) -> Optional[Backup]:
    """A backup written by Keras' BackupAndRestore (older tpukit): its marker holds the next epoch."""
    marker, weights = folder / _LEGACY_MARKER, folder / _LEGACY_WEIGHTS
    if not (marker.exists() and weights.exists()):
        return None
    try:
        return Backup(int(json.loads(marker.read_text())["epoch"]), weights)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BackupError(f"{marker} is damaged ({type(e).__name__}); the run cannot resume exactly.") from None


def _digest(path: Path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return os.path.getsize(path), h.hexdigest()


def restore_exactly(model, path: str) -> None:
    """Load weights and optimizer state, or raise RestoreError: Keras only warns when some do not fit."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:  # as BackupAndRestore does: its state must load too
        optimizer.build(model.trainable_variables)
    problem = model_state.load_into(model, path)
    if problem:
        raise RestoreError(
            f"{path} does not fit this model ({problem.splitlines()[0][:200].strip()}); resume needs "
            "the model the run was trained with."
        )
