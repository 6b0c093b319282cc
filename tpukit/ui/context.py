"""Which notebook front end runs this kernel: Colab, Jupyter, VS Code, or none.

This is the one place tpukit asks. The panel trains in the foreground in Colab
(widget updates from a background thread do not reach the page there) and in
a thread elsewhere, and it embeds TensorBoard through Colab's port proxy or an
iframe. Tests change the answer by patching this module's inputs
(`_shell`, `_colab_present`, the environment), nothing else.

No ipywidgets here, and IPython only if it is already loaded: importing this
module costs nothing.

    >>> detect() in CONTEXTS
    True
"""

from __future__ import annotations

import importlib.util
import os
import sys

COLAB = "colab"
JUPYTER = "jupyter"  # JupyterLab, Notebook, Voila and other Jupyter kernels
VSCODE = "vscode"
NONE = "none"  # a script, a terminal IPython, a test
CONTEXTS = (COLAB, JUPYTER, VSCODE, NONE)


def detect() -> str:
    """The notebook context of this process: "colab", "jupyter", "vscode" or "none".

    Colab wins when `google.colab` is importable and an IPython shell runs
    (Colab's shell has no `kernel` trait, so the Jupyter test would miss it).
    Otherwise a shell with a kernel is a notebook: VS Code when VS Code
    started the kernel (it sets VSCODE_PID), Jupyter otherwise.
    """
    shell = _shell()
    if shell is None:
        return NONE
    if _colab_present():
        return COLAB
    if not _has_kernel(shell):
        return NONE
    if os.environ.get("VSCODE_PID"):
        return VSCODE
    return JUPYTER


def _shell():
    """The running IPython shell, or None (IPython is not imported for the question)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    return ipython.get_ipython()


def _colab_present() -> bool:
    if "google.colab" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except (ImportError, ValueError):  # no `google` package at all, or a broken one
        return False


def _has_kernel(shell) -> bool:
    has_trait = getattr(shell, "has_trait", None)
    return bool(has_trait and has_trait("kernel"))
