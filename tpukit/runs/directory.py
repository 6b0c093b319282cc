"""Run directories on disk: their file names, atomic writes, the lock, and the checks that a path is a run.

The lowest module of `tpukit.runs`: every writer (records, epoch backups, the trained model) goes through
`atomic`, so a kill at any instant leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator, Optional

from tpukit.config import ConfigError, RunConfig
from tpukit.errors import TpukitError

try:  # Linux and macOS; on Windows runs are not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

# The layout of a run directory: the one place that names its files.
CONFIG_FILE = "config.json"
RESULT_FILE = "result.json"
WEIGHTS_FILE = "model.weights.h5"  # the final weights of a completed run
# A completed LoRA run's final weights instead: its adapters alone, in KerasHub's format (`save_lora_weights`); the
# frozen weights are the preset's, which config.json names. Keras' save_weights would merge each adapter into its
# bfloat16 kernel, where an update smaller than the kernel's rounding step is lost.
ADAPTERS_FILE = "adapters.lora.h5"
# Beside it, the adapters and their optimizer's state (`model_state.take`; a few MB), from which an extension of the
# run continues exactly as the uninterrupted run would: the adapters file alone holds no optimizer state.
ADAPTERS_STATE_FILE = "adapters.state.npz"
# What a run computed from its data once and keeps for a resume or an extension: a preference run's reference scores.
KEPT_ARRAYS_FILE = "reference.npz"
BACKUP_DIR = "backup"  # one file per whole epoch, named by backup/latest.json
STATE_SUFFIX = (
    ".state.npz"  # an epoch backup's file (tpukit.runs.model_state); older runs' backups are Keras' .weights.h5
)


def final_weights(run_dir) -> Path:
    """The file that holds (or would hold) `run_dir`'s final weights: its adapters where it kept only those."""
    adapters = Path(run_dir) / ADAPTERS_FILE
    return adapters if adapters.is_file() else Path(run_dir) / WEIGHTS_FILE


def continued_from(run_dir) -> Path:
    """The file an extension of the completed `run_dir` starts from: its adapters' state where it kept that (the
    optimizer's too), else its final weights (Keras' file holds the optimizer's state too)."""
    state = Path(run_dir) / ADAPTERS_STATE_FILE
    return state if state.is_file() else final_weights(run_dir)


@contextlib.contextmanager
def atomic(path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; once the body has written it, flush it to disk and rename it to `path`.

    The temporary name keeps the file's suffixes (Keras insists on `.weights.h5`).
    If the body fails, the temporary file is removed and `path` is untouched. An
    existing `path` that is a symlink is replaced, never followed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name.split('.')[0]}.tmp-{os.getpid()}{''.join(path.suffixes)}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync(path.parent)


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # a directory cannot be opened on Windows
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def kept_arrays(run_dir, parent=None) -> Optional[dict]:
    """The arrays `run_dir` keeps (`KEPT_ARRAYS_FILE`), else those of `parent`, the run it extends; None where
    neither has them."""
    import numpy as np

    for where in (run_dir, parent):
        path = Path(where) / KEPT_ARRAYS_FILE if where else None
        if path is not None and path.is_file():
            with np.load(str(path), allow_pickle=False) as stored:
                return {name: stored[name] for name in stored.files}
    return None


def keep_arrays(run_dir: Path, arrays: dict) -> None:
    """Write `arrays` as the run's kept arrays, atomically, where it has none yet."""
    import numpy as np

    path = Path(run_dir) / KEPT_ARRAYS_FILE
    if path.is_file():
        return
    with atomic(path) as t, open(t, "wb") as f:
        np.savez(f, **arrays)


def write_json(path: Path, obj: Any) -> None:
    """Write JSON atomically: a reader never sees half a file, even if the process dies."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=_jsonable)
    with atomic(path) as tmp:
        tmp.write_text(text)


def _jsonable(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def unwritable(folder) -> Optional[str]:
    """Why files cannot be written in `folder` (created if needed), or None when they can: a probe file is."""
    root = Path(folder)
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".tpukit-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return e.strerror or type(e).__name__
    return None


def check_logdir(logdir) -> None:
    """Create `logdir` if needed and check that a run can be written there; RunDirError in one line if not."""
    why = unwritable(logdir)
    if why:
        raise RunDirError(
            f"logdir {logdir} is not a writable directory ({why}); "
            "choose another with RunConfig(logdir=...) or --logdir."
        )


def new_run_dir(logdir: str, name: str, now: Optional[float] = None) -> Path:
    """Create and return a fresh run directory; never returns an existing one."""
    root = Path(logdir)
    root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    base = f"{stamp}-{name}"
    for i in range(1, 10_000):
        candidate = root / (base if i == 1 else f"{base}-{i}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a new run directory under {root}")


class RunDirError(TpukitError, ValueError):
    """A run directory whose files are missing or cannot be read. The message is one line and names the file."""


class NotARunDir(RunDirError):
    """A path handed to `resume` or `load` that is not a run directory: the user's input (the CLI exits 2)."""

    bad_input = True


class RunInUse(RunDirError):
    """Another process (or another train() in this one) is working on the run directory."""


LOCK_NAME = ".lock"


@contextlib.contextmanager
def locked(run_dir) -> Iterator[None]:
    """Hold the run directory's lock for the body; RunInUse if someone else holds it.

    The lock is an OS file lock (flock): the kernel drops it when its process
    ends, however it ends, so it never outlives a killed run.
    """
    if fcntl is None:  # pragma: no cover
        yield
        return
    path = Path(run_dir) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
            raise RunInUse(
                f"{run_dir} is in use by process {holder}: one process trains a run at a time; wait for "
                "it to end or stop it."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def sweep_temporaries(run_dir) -> None:
    """Remove the temporary files a killed writer left (call with the run's lock held: no one else writes)."""
    for tmp in Path(run_dir).rglob(".*.tmp-*"):
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)


def in_use(run_dir) -> bool:
    """Whether a live process holds the run directory's lock."""
    path = Path(run_dir) / LOCK_NAME
    if fcntl is None or not path.is_file():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def check_contained(run_dir) -> None:
    """RunDirError if the run directory is a symlink or holds one: resume writes there and must stay inside it."""
    root = Path(run_dir)
    if root.is_symlink():
        raise RunDirError(
            f"{run_dir} is a symlink; resume works on the run directory itself. "
            f"Received: {run_dir} -> {os.readlink(root)}"
        )
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            if path.is_symlink():
                raise RunDirError(
                    f"{path} is a symlink (to {os.readlink(path)}); tpukit does not write through links "
                    "out of a run directory. Remove it to resume."
                )


def read_object(path: Path) -> dict:
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as e:
        raise RunDirError(f"{path} cannot be read ({type(e).__name__}): the run's record is damaged.") from None
    if not isinstance(values, dict):
        raise RunDirError(f"{path} holds a JSON {type(values).__name__}, not the object tpukit wrote.")
    return values


def check_run_dir(run_dir, what: str) -> None:
    """RunDirError, in one line, unless `run_dir` is a path (str or os.PathLike) to a directory with a config.json.

    For the calls that take a run directory (`what`: "resume", "load"), before they read or create anything.
    """
    if isinstance(run_dir, bool) or not isinstance(run_dir, (str, os.PathLike)) or not os.fspath(run_dir):
        shown = (
            repr(run_dir)
            if isinstance(run_dir, (str, bytes, int, float, type(None)))
            else f"a {type(run_dir).__name__} object"
        )
        raise NotARunDir(
            f"{what}() takes the path of a run directory (a str or pathlib.Path, as result.run_dir "
            f"gives). Received: {shown}."
        )
    path = Path(run_dir)
    if not path.exists():
        raise NotARunDir(
            f"{what}(): {run_dir} does not exist; expected a run directory (<logdir>/<run>, as "
            "result.run_dir or list_runs() give)."
        )
    if not path.is_dir():
        inside = f" (pass {path.parent}, the directory it is in)" if path.name in (CONFIG_FILE, RESULT_FILE) else ""
        raise NotARunDir(f"{what}(): {run_dir} is a file, not a run directory{inside}.")
    if not (path / CONFIG_FILE).is_file():
        raise NotARunDir(f"{what}(): {run_dir} is not a tpukit run directory (no config.json).")


def load_config(run_dir):
    """The RunConfig in `run_dir`/config.json. Raises FileNotFoundError, or ConfigError for a damaged file."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a tpukit run directory (no config.json)")
    try:
        return RunConfig.from_json(path.read_text())
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}", **e.facts()) from None


def recorded(run_dir) -> dict:
    """result.json of `run_dir` as a dict (config.json's values under "config" when the run never wrote one), with
    the status as it stands: a run recorded as running that no process holds was killed, and is "stopped".

    Raises:
        FileNotFoundError: not a run directory (no config.json).
        RunDirError: result.json or config.json is not readable JSON of the expected form.
    """
    run_dir = Path(run_dir)
    result_path = run_dir / RESULT_FILE
    if result_path.exists():
        values = read_object(result_path)
    else:
        config_path = run_dir / CONFIG_FILE
        if not config_path.exists():
            raise FileNotFoundError(f"{run_dir} is not a tpukit run directory (no config.json)")
        values = {"run_dir": str(run_dir), "status": "running", "config": read_object(config_path)}
    if values.get("status") == "running" and (run_dir / LOCK_NAME).exists() and not in_use(run_dir):
        cause = "the process ended while the run was training (killed?)"
        values = {
            **values,
            "status": "stopped",
            "cause": cause,
            "message": f"{cause}; resume continues from the last whole epoch",
        }
    return values
