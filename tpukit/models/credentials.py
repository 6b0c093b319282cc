"""Where the credentials for a gated preset are, in every form the download libraries read them: one place to ask.

KerasHub downloads from Kaggle through kagglehub and from Hugging Face through huggingface_hub, and each reads its
credentials from several places: environment variables (Kaggle's `KAGGLE_USERNAME` and `KAGGLE_KEY`, or the single
`KAGGLE_API_TOKEN` Kaggle's settings page now issues; `HF_TOKEN`), token files (`~/.kaggle/kaggle.json`,
`~/.kaggle/access_token`, huggingface_hub's `token` file), a `kagglehub.login()` earlier in the session, and on
Colab its Secrets (the key icon), which a notebook reads only once it is given access. `find(hub)` looks in each and
says where it found them, or why none could be used (a secret without notebook access is the common one), never
their values. `use(found)` puts Colab Secrets into this process's environment, where the libraries look first.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Callable, Optional, Tuple

# (names that together are credentials) for each hub, in the order the libraries try them
ENVIRONMENT = {
    "kaggle": (("KAGGLE_USERNAME", "KAGGLE_KEY"), ("KAGGLE_API_TOKEN",)),
    "hf": (("HF_TOKEN",), ("HUGGING_FACE_HUB_TOKEN",)),
}
# every variable that holds credentials or says where they are (what a test clears to start from none)
VARIABLES = (
    *(n for sets in ENVIRONMENT.values() for names in sets for n in names),
    "KAGGLE_CONFIG_DIR",
    "HF_HOME",
    "HF_TOKEN_PATH",
)
NAMES = {"kaggle": "Kaggle", "hf": "Hugging Face"}
HOW = {
    "kaggle": "set KAGGLE_API_TOKEN (Kaggle > Settings > API > Create New Token), or KAGGLE_USERNAME and KAGGLE_KEY; "
    "on Colab add them to Secrets (the key icon) with Notebook access on; or call kagglehub.login()",
    "hf": "set HF_TOKEN (huggingface.co > Settings > Access Tokens); on Colab add it to Secrets (the key icon) with "
    "Notebook access on; or run huggingface-cli login",
}


@dataclasses.dataclass(frozen=True)
class Found:
    """Credentials for `hub`: `where` they are (None: not found), `problem` (why some could not be used), and
    `secrets`, the Colab Secrets' names that hold them (which `use` copies into the environment)."""

    hub: str
    where: Optional[str] = None
    problem: Optional[str] = None
    secrets: Tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.where is not None

    def describe(self) -> str:
        """One line: where the credentials are, or why none and how to give them (names only, never values)."""
        name = NAMES[self.hub]
        if self.where:
            return f"{name} credentials: {self.where}"
        return f"no {name} credentials" + (f" ({self.problem})" if self.problem else "") + f": {HOW[self.hub]}."


def find(hub: str, *, colab_secret: Optional[Callable[[str], str]] = None, home: Optional[str] = None) -> Found:
    """Where the credentials for `hub` ("kaggle" or "hf") are, looked for as its download library does: the
    environment, a login earlier in this session, the token files, then Colab's Secrets. `colab_secret` reads one
    secret (default: `google.colab.userdata.get` on Colab, none elsewhere); `home` is the home folder (tests)."""
    home = home or os.path.expanduser("~")
    for names in ENVIRONMENT[hub]:
        if all(os.environ.get(n) for n in names):
            return Found(hub, f"{' and '.join(names)} in the environment")
    if hub == "kaggle" and _kagglehub_login():
        return Found(hub, "kagglehub.login() in this session")
    for path in _token_files(hub, home):
        if os.path.isfile(path):
            return Found(hub, path.replace(home, "~", 1) if path.startswith(home + os.sep) else path)
    return _colab_secrets(hub, colab_secret if colab_secret is not None else _colab_reader())


def use(found: Found, *, colab_secret: Optional[Callable[[str], str]] = None) -> None:
    """Copy credentials found in Colab's Secrets into this process's environment, where kagglehub and
    huggingface_hub look first; nothing for credentials found elsewhere (the libraries find those themselves)."""
    read = colab_secret if colab_secret is not None else _colab_reader()
    for name in found.secrets:
        if read is not None and not os.environ.get(name):
            os.environ[name] = read(name)


def _kagglehub_login() -> bool:
    """Whether `kagglehub.login()` (or `set_kaggle_credentials`) set credentials in this process: kagglehub keeps them
    in its config module, which exists only once kagglehub was imported."""
    config = sys.modules.get("kagglehub.config")
    return bool(getattr(config, "_kaggle_credentials", None))


def _token_files(hub: str, home: str):
    if hub == "kaggle":
        folders = [
            os.environ.get("KAGGLE_CONFIG_DIR"),
            os.path.join(home, ".kaggle"),
            os.path.join(home, ".config", "kaggle"),
        ]
        return [os.path.join(f, name) for f in folders if f for name in ("kaggle.json", "access_token")]
    hf_home = os.environ.get("HF_HOME") or os.path.join(home, ".cache", "huggingface")
    return [os.environ.get("HF_TOKEN_PATH") or os.path.join(hf_home, "token")]


def _colab_reader() -> Optional[Callable[[str], str]]:
    """Colab's `userdata.get` (raises SecretNotFoundError or NotebookAccessError), or None outside Colab."""
    if "google.colab" not in sys.modules and not os.environ.get("COLAB_RELEASE_TAG"):
        return None
    try:
        from google.colab import userdata
    except ImportError:
        return None
    return userdata.get


def _colab_secrets(hub: str, read: Optional[Callable[[str], str]]) -> Found:
    """Credentials in Colab's Secrets: found where each name of a set reads; a secret this notebook may not read is
    the problem named (Colab raises NotebookAccessError for it, SecretNotFoundError for a name not there)."""
    if read is None:
        return Found(hub)
    denied = []
    for names in ENVIRONMENT[hub]:
        values = []
        for name in names:
            try:
                values.append(read(name))
            except Exception as e:  # noqa: BLE001 - Colab's own error classes, told apart by name
                if "Access" in type(e).__name__:
                    denied.append(name)
                values.append(None)
        if all(values):
            return Found(hub, f"Colab Secrets ({', '.join(names)})", secrets=names)
    if denied:
        return Found(
            hub,
            problem=f"Colab Secrets has {', '.join(denied)}, and this notebook has no access to it: "
            "switch on Notebook access beside it in the key panel",
        )
    return Found(hub)
