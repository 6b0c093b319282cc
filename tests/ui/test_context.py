"""tpukit.ui.context: the one place that tells Colab, Jupyter, VS Code and no notebook apart."""

import subprocess
import sys

import pytest

from conftest import unset_env

from tpukit.ui import context


class Shell:
    """Stands in for IPython's shell: a Jupyter kernel's shell has the `kernel` trait, a terminal's has not."""

    def __init__(self, kernel):
        self.kernel = kernel

    def has_trait(self, name):
        return name == "kernel" and self.kernel


@pytest.fixture
def inputs(monkeypatch):
    """Patch detect()'s inputs: the shell, whether google.colab is importable, and VSCODE_PID."""
    unset_env(monkeypatch, "VSCODE_PID")

    def set_inputs(shell=None, colab=False, vscode=False):
        monkeypatch.setattr(context, "_shell", lambda: shell)
        monkeypatch.setattr(context, "_colab_present", lambda: colab)
        if vscode:
            monkeypatch.setenv("VSCODE_PID", "4242")

    return set_inputs


def test_colab_is_a_shell_with_google_colab(inputs):
    inputs(shell=Shell(kernel=False), colab=True)  # Colab's shell has no `kernel` trait
    assert context.detect() == context.COLAB


def test_jupyter_is_a_kernel_shell(inputs):
    inputs(shell=Shell(kernel=True))
    assert context.detect() == context.JUPYTER


def test_vscode_is_a_kernel_started_by_vscode(inputs):
    inputs(shell=Shell(kernel=True), vscode=True)
    assert context.detect() == context.VSCODE


@pytest.mark.parametrize("shell", [None, Shell(kernel=False)], ids=["script", "terminal-ipython"])
def test_no_notebook(inputs, shell):
    inputs(shell=shell, colab=True if shell is None else False)  # google.colab alone is not Colab
    assert context.detect() == context.NONE


def test_the_real_answer_here_is_none_and_costs_no_import():
    code = (
        "import sys; from tpukit.ui import context; print(context.detect()); "
        "print('IPython' in sys.modules, 'ipywidgets' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["none", "False", "False"]
