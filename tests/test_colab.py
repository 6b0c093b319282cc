"""The Colab TPU set-up helper: installs only what is missing and pins what the runtime brings."""

import subprocess
import time

import pytest

from tpukit import colab


def test_nothing_to_do_on_a_complete_machine_is_quick_and_runs_no_pip():
    calls = []
    start = time.perf_counter()
    result = colab.setup(run=lambda *a, **k: calls.append(a))
    assert not result.needed and calls == []
    assert time.perf_counter() - start < 2


def test_a_colab_tpu_vm_image_gets_tensorflow_cpu_and_the_profiler_with_jax_pinned():
    """Fake Colab TPU image: tensorflow, tensorboard and xprof reported missing (they are installed here)."""
    calls = []

    def fake_pip(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    plan = colab.setup(run=fake_pip, importable=lambda m: m not in ("tensorflow", "tensorboard", "xprof"),
                       installed=lambda d: {"jax": "0.7.1", "jaxlib": "0.7.1", "libtpu": "0.0.21"}.get(d))
    assert plan.missing == ("tensorflow-cpu", "tensorboard", "xprof")
    cmd = calls[0]
    assert cmd[1:4] == ["-m", "pip", "install"] and cmd[-3:] == ["tensorflow-cpu", "tensorboard", "xprof"]
    constraints = open(cmd[cmd.index("-c") + 1]).read().splitlines()
    assert constraints == ["jax==0.7.1", "jaxlib==0.7.1", "libtpu==0.0.21"]


def test_a_conflict_is_one_clear_error():
    def failing_pip(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Cannot install tensorflow-cpu because of ml-dtypes")

    with pytest.raises(RuntimeError, match=r"could not install tensorflow-cpu while keeping .*ml-dtypes"):
        colab.setup(run=failing_pip, importable=lambda m: m != "tensorflow",
                    installed=lambda d: {"ml-dtypes": "0.5.1"}.get(d))
