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


def test_a_colab_tpu_image_gets_the_viewing_tools_with_everything_installed_pinned_and_never_tensorflow():
    """Fake Colab TPU image: tensorboard and xprof reported missing (they are installed here), no TensorFlow."""
    calls = []

    def fake_pip(cmd, **kwargs):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    image = {"jax": "0.7.2", "jaxlib": "0.7.2", "libtpu": "0.0.21", "keras": "3.13.2", "numpy": "2.0.2",
             "protobuf": "5.29.5"}
    plan = colab.setup(run=fake_pip, importable=lambda m: m not in ("tensorflow", "tensorboard", "xprof"),
                       installed=lambda: image)
    assert plan.missing == ("tensorboard", "xprof<2.20.6")  # newer xprof needs protobuf 6 at import
    cmd = calls[0]
    assert cmd[1:4] == ["-m", "pip", "install"] and cmd[-2:] == ["tensorboard", "xprof<2.20.6"]
    assert not any("tensorflow" in part for part in cmd)
    constraints = open(cmd[cmd.index("-c") + 1]).read().splitlines()
    assert constraints == [f"{name}=={version}" for name, version in sorted(image.items())]


def test_a_conflict_is_one_clear_error():
    def failing_pip(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Cannot install xprof because of urllib3")

    with pytest.raises(RuntimeError, match=r"could not install xprof without changing any of the 1 packages .*urllib3"):
        colab.setup(run=failing_pip, importable=lambda m: m != "xprof", installed=lambda: {"urllib3": "2.5.0"})
