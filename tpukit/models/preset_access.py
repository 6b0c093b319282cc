"""Why a pretrained preset could not be had, in one line that says what to do: no network, no credentials, terms not
accepted, or a Keras too old for the installed KerasHub.

KerasHub reports most of these as one sentence: a preset whose `config.json` could not be fetched "has no
config.json" whether the machine is offline, Kaggle refused a gated model (403) or the name is wrong (its
`check_file_exists` turns each into a missing file). So tpukit asks the question itself once loading failed: can the
host be reached, are there credentials (`credentials.find`), did the chain of errors say 401 or 403, and names the
one fix. Credentials are only looked for, never read into a message, a note or a file: the lines name the variables,
not their values. `listed_presets` reads the names KerasHub offers, for the panel's model field.
"""

from __future__ import annotations

import os
import socket
from typing import Callable, Optional, Tuple

from tpukit.models import credentials, preset_files

HOSTS = {"kaggle": "www.kaggle.com", "hf": "huggingface.co"}
# What the download libraries' errors say when the network is missing (requests, httpx, urllib3, socket; kagglehub and
# huggingface_hub raise through them), and when the hub refused the file.
_OFFLINE = (
    "name or service not known",
    "temporary failure in name resolution",
    "failed to resolve",
    "network is unreachable",
    "max retries exceeded",
    "connection refused",
    "nodename nor servname",
    "offline mode is enabled",
    "check your connection",
    "timed out",
)
_REFUSED = ("403", "401", "forbidden", "unauthorized", "consent", "not accessible", "gated", "accept its terms")
_LIBRARIES = {"kaggle": ("kagglehub",), "hf": ("huggingface_hub",)}  # what KerasHub downloads through
SETUP_HUB = "tpukit.colab.setup(hub=True), first in a fresh runtime"


def hub_of(source: str) -> Optional[str]:
    """ "kaggle" or "hf": where `source` downloads from (a bare KerasHub name is a Kaggle handle); None for a directory
    or another scheme."""
    if source.startswith("hf://"):
        return "hf"
    if source.startswith("kaggle://") or ("://" not in source and not os.path.exists(source)):
        return "kaggle"
    return None


def not_a_preset_dir(path: str, files) -> str:
    """The line for a model named by a path that is not a preset directory: what is missing there (of `files`, what
    every preset directory holds)."""
    expected = (
        "a KerasHub preset directory is what save_to_preset writes (config.json, metadata.json, the weights "
        "and the tokenizer's assets)"
    )
    full = os.path.expanduser(path)
    if not os.path.exists(full):
        return f"model={path!r}: no such directory; {expected}."
    if not os.path.isdir(full):
        return f"model={path!r} is a file, not a directory; {expected}."
    missing = [f for f in files if not os.path.isfile(os.path.join(full, f))]
    if len(missing) < len(files):  # some of a preset's files are there: a preset cut short, not another directory
        return preset_files.incomplete(path, " and no ".join(missing))
    return f"model={path!r}: the directory has no {' and no '.join(missing)}, so it is not a preset; {expected}."


def offline_line(source: str, environ=None) -> str:
    """The line for a preset that must be downloaded on a machine without a network: what is on disk instead."""
    here = preset_files.on_disk(environ)
    if here:
        instead = "presets on this machine: " + ", ".join(f"model={p!r}" for p in here)
    else:
        instead = (
            "no preset is on this machine (kagglehub's and Hugging Face's caches hold none): where there is a "
            "network, load it and save_to_preset(DIR), bring DIR here and pass model=DIR; or train a zoo model"
        )
    return f"cannot download preset {source!r}: no network ({HOSTS[hub_of(source)]} cannot be reached); {instead}."


def refuse_offline(source: str, handle: Optional[str], reach: Optional[Callable[[str], bool]] = None) -> Optional[str]:
    """Before KerasHub tries (and retries, for half a minute): the no-network line for a preset that must be
    downloaded, is not in kagglehub's cache yet (`handle`: its Kaggle handle) and whose hub cannot be reached."""
    hub = hub_of(source)
    if hub is None or (handle and Arrival(handle).had) or (hub == "hf" and preset_files.hf_cached(source)):
        return None
    return None if (reach or reachable)(HOSTS[hub]) else offline_line(source)


def reachable(host: str, timeout: float = 3.0) -> bool:
    """Whether `host` answers on 443 within `timeout` seconds (a name lookup and a TCP connection, no request)."""
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def terms_page(source: str, kaggle_handle: Callable[[str], Optional[str]] = lambda name: None) -> str:
    """The page where a model's terms are accepted: Kaggle's model page, or the Hugging Face repository's."""
    if source.startswith("hf://"):
        return "https://huggingface.co/" + source[len("hf://") :].strip("/")
    handle = source if source.startswith("kaggle://") else (kaggle_handle(source) or "")
    parts = handle[len("kaggle://") :].split("/") if handle.startswith("kaggle://") else []
    if len(parts) >= 2:
        return f"https://www.kaggle.com/models/{parts[0]}/{parts[1]}"
    return f"https://www.kaggle.com/models?query={source}"


def _chain_text(error: BaseException) -> str:
    seen, parts = set(), []
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        parts.append(f"{type(error).__name__}: {error}")
        error = error.__cause__ or error.__context__
    return " | ".join(parts).lower()


def download_problem(
    source: str,
    error: BaseException,
    *,
    reach: Callable[[str], bool] = reachable,
    kaggle_handle: Callable[[str], Optional[str]] = lambda name: None,
) -> Optional[str]:
    """The one line for a preset that failed to load because of its download, or None (a local preset, or a failure
    that is not about getting the files). `reach` and `kaggle_handle` are injected by tests (no network here)."""
    hub = hub_of(source)
    if hub is None:
        return None
    said = _chain_text(error)
    host = HOSTS[hub]
    library = next(
        (
            name
            for name in _LIBRARIES[hub]
            if f"requires the `{name}` package" in said or f"no module named '{name}'" in said
        ),
        None,
    )
    if library:  # KerasHub fetches through it: a missing library is no problem of the files or the network
        return (
            offline_line(source)
            if not reach(host)
            else (
                f"cannot download preset {source!r}: {library} is not installed (KerasHub fetches {host}'s files "
                f"through it): pip install {library}, then run again."
            )
        )
    refused = any(marker in said for marker in _REFUSED)
    missing = "has no config.json" in said or "doesn't exist" in said  # KerasHub's words for any failed fetch
    offline = any(marker in said for marker in _OFFLINE)
    if not (offline or refused or missing):
        return None  # the files came; something else failed (KerasHub's own words say what)
    if offline or not reach(host):
        return offline_line(source)
    page = terms_page(source, kaggle_handle)
    found = credentials.find(hub)
    if not found:
        problem = f" ({found.problem})" if found.problem else ""
        return (
            f"preset {source!r} was refused without credentials{problem}, as gated models (Gemma, Llama) are: "
            f"{credentials.HOW[hub]}; and accept the model's terms at {page} with that account."
        )
    if refused:
        return (
            f"preset {source!r}: {host} refused the download with your credentials (403): accept the model's "
            f"terms at {page} with the same account, then run again."
        )
    return (
        f"preset {source!r}: {host} gave none of its files with your credentials: accept the model's terms at "
        f"{page} if it is gated, or check the name (KerasHub's names: keras_hub.models.CausalLM.presets)."
    )


def listed_presets() -> Tuple[str, ...]:
    """The preset names of KerasHub's causal language models, for a chooser to offer: read from the installed
    keras-hub's preset tables (each family's `*_presets.py`, plain dicts, beside its `*_causal_lm.py`) without
    importing it, since importing KerasHub imports Keras, which fixes the backend before Connect chooses it.
    () where keras-hub is not installed. The layout holds from keras-hub 0.26 to 0.32; a run still resolves a name
    through KerasHub itself (`pretrained.named`)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("keras_hub")
    if spec is None or not spec.origin:
        return ()
    names = []
    for family in sorted((Path(spec.origin).parent / "src" / "models").glob("*/*_causal_lm.py")):
        for table in sorted(family.parent.glob("*_presets.py")):
            found: dict = {}
            exec(compile(table.read_text(), str(table), "exec"), found)  # a module of dict literals, nothing else
            names += [
                n
                for value in found.values()
                if isinstance(value, dict)
                for n, v in value.items()
                if isinstance(v, dict)
            ]
    return tuple(dict.fromkeys(names))


def installed_version(distribution: str) -> Optional[str]:
    """The installed version of `distribution` (None: not installed)."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def keras_too_old_here() -> Optional[str]:
    """`keras_too_old` for the installed keras and keras-hub, read from the packages' metadata (None: consistent, or
    one of them is not installed)."""
    from importlib import metadata

    hub, keras = installed_version("keras-hub"), installed_version("keras")
    if hub is None or keras is None:
        return None
    return keras_too_old(metadata.requires("keras-hub"), keras, hub)


def keras_too_old(requires, keras_version: str, hub_version: str) -> Optional[str]:
    """The one line for a Keras older than the installed KerasHub declares (`requires`: its requirement strings, as
    `importlib.metadata.requires` gives them), or None where it is new enough or says nothing."""
    from packaging.requirements import Requirement

    for text in requires or ():
        requirement = Requirement(text)
        if (
            requirement.name == "keras"
            and requirement.marker is None
            and requirement.specifier
            and not requirement.specifier.contains(keras_version, prereleases=True)
        ):
            return (
                f"keras-hub {hub_version} needs keras{requirement.specifier} and keras {keras_version} is "
                f"installed: pip install 'keras{requirement.specifier}' and restart Python (on Colab's TPU runtime: "
                f"{SETUP_HUB})."
            )
    return None


class Arrival:
    """Where a Kaggle preset's files came from, told by looking before and after the load: kagglehub's own cache
    folder for the handle (`$KAGGLEHUB_CACHE`, else `~/.cache/kagglehub`, then `models/OWNER/MODEL/FRAMEWORK/
    VARIATION`), and Colab's cache mount (`$COLAB_CACHE_MOUNT_FOLDER`, else `/kaggle/input`), from which kagglehub
    serves a model Colab keeps without downloading it. KerasHub fetches the files through kagglehub and says
    neither; a run's notes then say which happened."""

    def __init__(self, handle: str, environ=None):
        environ = os.environ if environ is None else environ
        root = preset_files.cache_roots(environ)[0]
        parts = handle.removeprefix("kaggle://").strip("/").split("/")
        self.local = os.path.join(root, "models", *parts[:4])  # any version of the variation
        self.mount = environ.get("COLAB_CACHE_MOUNT_FOLDER") or "/kaggle/input"
        self.had = os.path.isdir(self.local)

    @classmethod
    def of(cls, source: str, kaggle_handle: Callable[[str], Optional[str]]) -> Optional["Arrival"]:
        """The arrival to watch for `source` (a `kaggle://` handle or a KerasHub name with one), else None."""
        if hub_of(source) != "kaggle":
            return None
        handle = source if source.startswith("kaggle://") else kaggle_handle(source)
        return cls(handle) if handle else None

    def say(self) -> Optional[str]:
        """After the load: downloaded now, already on disk, or served from Colab's cache (None: cannot tell)."""
        if self.had:
            return f"its files were on disk already ({self.local}, kagglehub's cache): nothing downloaded"
        if os.path.isdir(self.local):
            return f"downloaded from Kaggle into {self.local}"
        if os.path.isdir(self.mount) and os.listdir(self.mount):
            return f"served from Colab's Kaggle cache ({self.mount}): nothing downloaded"
        return None
