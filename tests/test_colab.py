"""The Colab TPU set-up helper: installs only what is missing and pins what the runtime brings."""

import json
import os
import subprocess
import time
import zipfile

import pytest

from tpukit import colab


def test_nothing_to_do_on_a_complete_machine_is_quick_and_runs_no_pip():
    calls = []
    start = time.perf_counter()
    result = colab.setup(run=lambda *a, **k: calls.append(a))
    assert not result.needed and calls == []
    assert time.perf_counter() - start < 2


class FakePip:
    """pip as setup() calls it: a dry-run report picking xprof `version`, a download of a wheel whose generated
    code says `gencode`, protobuf's runtime check (`fits`), and the install itself."""

    def __init__(self, version="2.22.3", gencode="6.31.1", fits=True, resolves=True):
        self.version, self.gencode, self.fits, self.resolves = version, gencode, fits, resolves
        self.calls = []

    def __call__(self, cmd, **kwargs):
        self.calls.append(cmd)
        if "--dry-run" in cmd:
            if not self.resolves:
                return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found for xprof")
            report = {"install": [{"metadata": {"name": "xprof", "version": self.version}}]}
            return subprocess.CompletedProcess(cmd, 0, json.dumps(report), "")
        if "download" in cmd:
            wheel = os.path.join(cmd[cmd.index("-d") + 1], f"xprof-{self.version}-py3-none-any.whl")
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr("xprof/protobuf/op_stats_pb2.py", f"# Protobuf Python Version: {self.gencode}\n")
            return subprocess.CompletedProcess(cmd, 0, "", "")
        if "-c" in cmd and "ValidateProtobufRuntimeVersion" in cmd[-1]:
            return subprocess.CompletedProcess(cmd, 0 if self.fits else 1, "", "" if self.fits else "VersionError")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def installs(self):
        return [c for c in self.calls if "install" in c and "--dry-run" not in c]


IMAGE = {
    "jax": "0.7.2",
    "jaxlib": "0.7.2",
    "libtpu": "0.0.21",
    "keras": "3.13.2",
    "numpy": "2.0.2",
    "protobuf": "7.35.1",
}


def test_a_colab_tpu_image_gets_the_viewing_tools_with_everything_installed_pinned_and_never_tensorflow():
    """Fake Colab TPU image: tensorboard and xprof reported missing (they are installed here), no TensorFlow."""
    pip, said = FakePip(version="2.24.2"), []
    plan = colab.setup(
        run=pip,
        importable=lambda m: m not in ("tensorflow", "tensorboard", "xprof"),
        installed=lambda: IMAGE,
        say=said.append,
    )
    assert plan.missing == ("tensorboard", "xprof") and not plan.unavailable
    assert said == [
        "tpukit.colab: pip is installing tensorboard, xprof==2.24.2 with the 6 packages installed here "
        "pinned (about a minute)...",
        "tpukit.colab: added nothing new; none of the 6 packages installed before moved.",
    ]
    assert repr(plan) == "SetupPlan(missing: tensorboard, xprof; 6 installed packages pinned)"
    check = next(c for c in pip.calls if "ValidateProtobufRuntimeVersion" in c[-1])
    assert "6, 31, 1, ''" in check[-1]  # the version the wheel's generated code names, checked by protobuf itself
    [cmd] = pip.installs()
    assert cmd[1:4] == ["-m", "pip", "install"] and cmd[-2:] == ["tensorboard", "xprof==2.24.2"]
    assert "--only-binary" in cmd and cmd[cmd.index("--only-binary") + 1] == "xprof"  # never an sdist build
    assert not any("tensorflow" in part for part in cmd)
    constraints = open(cmd[cmd.index("-c") + 1]).read().splitlines()
    assert constraints == [f"{name}=={version}" for name, version in sorted(IMAGE.items())]


def test_where_no_xprof_fits_the_protobuf_the_rest_is_installed_and_one_line_says_why():
    """Colab's CPU runtime: protobuf 5.29.6, and the xprof pip picks is generated for protobuf 6.31.1."""
    image = dict(IMAGE, protobuf="5.29.6", tensorflow="2.20.0")
    pip, said = FakePip(fits=False), []
    plan = colab.setup(
        run=pip, importable=lambda m: m not in ("tensorboard", "xprof"), installed=lambda: image, say=said.append
    )
    [cmd] = pip.installs()
    assert cmd[-1] == "tensorboard" and not any("xprof" in part for part in cmd)
    assert list(plan.unavailable) == ["xprof"] and len(said) == 3 and not any("\n" in line for line in said)
    assert "TensorBoard's profile tab is unavailable on this runtime" in said[0]
    assert "xprof 2.22.3" in said[0] and "protobuf >= 6.31.1" in said[0] and "protobuf 5.29.6" in said[0]
    assert said[1].startswith("tpukit.colab: pip is installing tensorboard with the 7 packages installed here pinned")
    assert said[2] == "tpukit.colab: added nothing new; none of the 7 packages installed before moved."
    assert repr(plan) == "SetupPlan(missing: tensorboard, xprof; 7 installed packages pinned; left out: xprof)"
    again = FakePip(fits=False)  # a second call asks pip nothing about xprof again
    colab.setup(run=again, importable=lambda m: m != "xprof", installed=lambda: image, say=said.append)
    assert again.calls == [] and len(said) == 4 and said[3] == said[0]


def test_after_pip_one_line_says_what_it_added_and_names_any_package_that_moved():
    """What the runtime holds after pip, against what it held before (pip ran under a constraints file of every
    package, so a move would be pip's or a post-install hook's doing: it is named, not hidden)."""
    states = iter([dict(IMAGE), dict(IMAGE, tensorboard="2.21.0", numpy="2.1.0")])
    said = []
    plan = colab.setup(
        run=FakePip(), importable=lambda m: m != "tensorboard", installed=lambda: next(states), say=said.append
    )
    assert plan.missing == ("tensorboard",) and said[0].startswith("tpukit.colab: pip is installing tensorboard")
    assert said[1] == (
        "tpukit.colab: added tensorboard 2.21.0; MOVED 1 of the 6 packages installed before: numpy 2.0.2 -> 2.1.0."
    )


def test_a_plan_shows_as_one_short_line():
    plan = colab.plan(importable=lambda m: True, installed=lambda: dict(IMAGE))
    assert repr(plan) == "SetupPlan(nothing missing)"
    many = colab.SetupPlan(("xprof",), {f"package{i}": "1.0" for i in range(600)})
    assert repr(many) == "SetupPlan(missing: xprof; 600 installed packages pinned)"


def test_no_xprof_wheel_at_all_is_said_too():
    pip, said = FakePip(resolves=False), []
    plan = colab.setup(
        run=pip, importable=lambda m: m != "xprof", installed=lambda: {"protobuf": "4.25.0"}, say=said.append
    )
    assert pip.installs() == [] and "no xprof wheel installs here" in plan.unavailable["xprof"] and len(said) == 1


def test_a_conflict_is_one_clear_error():
    def failing_pip(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Cannot install tensorboard because of urllib3")

    with pytest.raises(
        RuntimeError,
        match=r"could not install tensorboard without changing any of the 1 packages "
        r".*urllib3",
    ):
        colab.setup(run=failing_pip, importable=lambda m: m != "tensorboard", installed=lambda: {"urllib3": "2.5.0"})


class RecordingPip:
    """pip as setup_hub() calls it (fake: Colab's runtimes cannot be installed into here): records each command
    and moves `installed` to what that command would leave."""

    def __init__(self, state):
        self.state, self.calls = dict(state), []

    def __call__(self, cmd, **kwargs):
        self.calls.append(cmd)
        for arg in cmd:
            if "==" in arg:
                name, version = arg.split("==")
                self.state[name] = version
        return subprocess.CompletedProcess(cmd, 0, "", "")


COLAB_TPU = {"keras": "3.13.2", "jax": "0.7.2", "sentencepiece": "0.2.2", "regex": "2026.7.19", "numpy": "2.1.3"}


def test_hub_on_colabs_tpu_runtime_moves_keras_alone_and_never_installs_tensorflow_fake_colab():
    pip, said = RecordingPip(COLAB_TPU), []
    line = colab.setup_hub(
        run=pip,
        importable=lambda m: m != "tensorflow",
        installed=lambda: pip.state,
        say=said.append,
        keras_loaded=lambda: False,
    )
    installs = [cmd[cmd.index("install") + 1 :] for cmd in pip.calls]
    assert installs == [["-q", "--no-deps", "keras==3.15.1"], ["-q", "--no-deps", "keras-hub==0.32.0"]]
    assert said == [line] and "added keras-hub 0.32.0" in line and "keras 3.13.2 -> 3.15.1" in line
    assert "MOVED 1 of the 5" in line and "loads without TensorFlow and needs keras>=3.15" in line
    assert not any("tensorflow" in arg for cmd in pip.calls for arg in cmd)
    again = RecordingPip(pip.state)  # a second call: nothing to do, no pip
    assert "nothing to install" in colab.setup_hub(
        run=again, importable=lambda m: m != "tensorflow", installed=lambda: again.state, say=said.append
    )
    assert again.calls == []


def test_hub_after_keras_was_imported_names_the_one_action_fake_colab():
    from tpukit.hardware.runtime import RestartRequired

    pip = RecordingPip(COLAB_TPU)
    with pytest.raises(RestartRequired) as info:
        colab.setup_hub(
            run=pip,
            importable=lambda m: m != "tensorflow",
            installed=lambda: pip.state,
            say=lambda line: None,
            keras_loaded=lambda: True,
        )
    message = str(info.value)
    assert "\n" not in message and "keras 3.13.2 to 3.15.1" in message and "restart the runtime" in message
    assert pip.calls == []


def test_hub_where_tensorflow_is_keeps_the_keras_hub_colab_ships_fake_colab():
    shipped = {**COLAB_TPU, "tensorflow": "2.20.0", "keras-hub": "0.26.0"}
    pip, said = RecordingPip(shipped), []
    colab.setup_hub(run=pip, importable=lambda m: True, installed=lambda: pip.state, say=said.append)
    assert pip.calls == [] and said == [
        "tpukit.colab: keras-hub 0.26.0 is here, with TensorFlow 2.20.0: nothing to install."
    ]
