"""Whether a preset directory on disk is whole: each file KerasHub will read is there and readable, said in one line
that names the file.

Why: KerasHub reads a preset's files one by one as it builds, and a missing or damaged one surfaces as whatever the
reader that met it raised: a damaged config.json as the tokenizer's JSONDecodeError ("its tokenizer did not load"),
a missing model.weights.h5 as "`model.weights.json` doesn't exist" (the sharded index it then looks for), a
truncated one as h5py's "file signature not found". Checking the directory first, before any run directory exists,
names the file and what a preset directory holds. `loading_problem` names the file for what still fails inside
KerasHub (an HDF5 file cut short after its first bytes).
"""

from __future__ import annotations

import json
import os
import re
from typing import Optional

WEIGHTS, SHARDED = "model.weights.h5", "model.weights.json"
TOKENIZER_ASSETS = os.path.join("assets", "tokenizer")
# The JSON files save_to_preset writes (task.json and preprocessor.json for a task; tokenizer.json for its tokenizer).
_JSON = ("config.json", "metadata.json", "tokenizer.json", "preprocessor.json", "task.json")
HOLDS = (
    "a preset directory holds config.json, metadata.json, model.weights.h5 (or a sharded model.weights.json), "
    "tokenizer.json and assets/tokenizer/, as save_to_preset writes them"
)
_HDF5 = b"\x89HDF\r\n\x1a\n"
_MISSING_IN_KERASHUB = re.compile(r"`([^`]+)` doesn't exist in preset directory")


def incomplete(path: str, missing: str) -> str:
    return f"preset {path!r} is incomplete: it has no {missing}; {HOLDS}: copy it whole again, or save it again."


def _damaged(path: str, name: str, why: str) -> str:
    return (
        f"preset {path!r}: its {name} is damaged ({why}); copy the preset again from where it came, or save it again "
        "with save_to_preset."
    )


def _is_hdf5(file: str) -> bool:
    """Whether `file` starts as an HDF5 file does (its signature at 0, or after a user block of 512 * 2**k bytes)."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        offset = 0
        while offset + len(_HDF5) <= size:
            f.seek(offset)
            if f.read(len(_HDF5)) == _HDF5:
                return True
            offset = 512 if offset == 0 else offset * 2
    return False


def _json_problem(path: str, name: str) -> Optional[str]:
    try:
        with open(os.path.join(path, name), encoding="utf-8") as f:
            value = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        return _damaged(path, name, f"not JSON: {str(e).splitlines()[0]}")
    if not isinstance(value, dict):
        return _damaged(path, name, f"a JSON {type(value).__name__}, where a preset's files hold an object")
    return None


def _shards_problem(path: str) -> Optional[str]:
    """A sharded preset's index names its weight files: each must be there."""
    with open(os.path.join(path, SHARDED), encoding="utf-8") as f:
        index = json.load(f)
    names = set(index.get("weight_map", {}).values()) if isinstance(index.get("weight_map"), dict) else set()
    gone = sorted(n for n in names if not os.path.isfile(os.path.join(path, n)))
    return incomplete(path, f"{gone[0]} (one of the weight files {SHARDED} lists)") if gone else None


def problem(path: str) -> Optional[str]:
    """The one line that says what is missing or damaged in the preset directory `path`, or None where each file
    KerasHub reads is there and starts as it should (config.json and metadata.json are the registry's test that it
    is a preset directory at all: `preset_access.not_a_preset_dir`)."""
    for name in _JSON:
        if os.path.isfile(os.path.join(path, name)):
            found = _json_problem(path, name)
            if found:
                return found
    if os.path.isfile(os.path.join(path, SHARDED)):
        return _shards_problem(path)
    weights = os.path.join(path, WEIGHTS)
    if not os.path.isfile(weights):
        return incomplete(path, WEIGHTS)
    if not _is_hdf5(weights):
        size = os.path.getsize(weights)
        return _damaged(path, WEIGHTS, f"{size} bytes that are not an HDF5 file" if size else "an empty file")
    if not os.path.isfile(os.path.join(path, "tokenizer.json")):
        return incomplete(path, "tokenizer.json (a causal language model is trained on text its tokenizer reads)")
    assets = os.path.join(path, TOKENIZER_ASSETS)
    if not (os.path.isdir(assets) and os.listdir(assets)):
        return incomplete(path, "assets/tokenizer/ (the tokenizer's vocabulary)")
    return None


def loading_problem(path: str, error: BaseException) -> Optional[str]:
    """The line for what KerasHub raised while reading the preset directory `path` where it names a file: one it
    did not find, or a weights file h5py could not read; None for any other failure."""
    text = str(error)
    missing = _MISSING_IN_KERASHUB.search(text)
    if isinstance(error, FileNotFoundError) and missing:
        return incomplete(path, missing.group(1))
    if isinstance(error, OSError) and any(word in text for word in ("open file", "truncated", "signature", "HDF5")):
        return _damaged(path, WEIGHTS, f"h5py: {text.splitlines()[0] if text else type(error).__name__}")
    return None


def cache_roots(environ=None) -> tuple:
    """(kagglehub's cache, Hugging Face's hub cache): `$KAGGLEHUB_CACHE`, else `~/.cache/kagglehub`; `$HF_HUB_CACHE`,
    else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`."""
    environ = os.environ if environ is None else environ
    home = os.path.expanduser("~")
    kaggle = environ.get("KAGGLEHUB_CACHE") or os.path.join(home, ".cache", "kagglehub")
    hf_home = environ.get("HF_HOME") or os.path.join(home, ".cache", "huggingface")
    return kaggle, environ.get("HF_HUB_CACHE") or os.path.join(hf_home, "hub")


def hf_cached(source: str, environ=None) -> bool:
    """Whether Hugging Face's cache holds a snapshot of the `hf://OWNER/NAME` repository."""
    repo = source.removeprefix("hf://").strip("/").replace("/", "--")
    return os.path.isdir(os.path.join(cache_roots(environ)[1], f"models--{repo}", "snapshots"))


def on_disk(environ=None, limit: int = 3) -> list:
    """Preset directories already on this machine's disk, for a line that cannot download one: KerasHub presets in
    kagglehub's cache (models/OWNER/MODEL/keras/VARIATION/VERSION) and in Hugging Face's (each repository's
    snapshots), newest first, at most `limit`."""
    import glob

    kaggle, hf = cache_roots(environ)
    patterns = [os.path.join(kaggle, "models", *["*"] * 5), os.path.join(hf, "models--*", "snapshots", "*")]
    found = [p for pattern in patterns for p in glob.glob(pattern)]
    found = [p for p in found if all(os.path.isfile(os.path.join(p, f)) for f in ("config.json", "metadata.json"))]
    return sorted(found, key=os.path.getmtime, reverse=True)[:limit]
