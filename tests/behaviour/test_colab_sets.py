"""tpukit inside Colab's own package sets: run by `.ci/colab-env.sh tpu|cpu` (and so by `make test`).

`.ci/colab-env.sh` builds a Python 3.13 venv from `.ci/colab/NAME.txt` (Colab's own pip freeze of the runtime,
every package at its version; .ci/colab/build-sets.py makes the file), installs tpukit as the README tells Colab
users, checks that nothing of the set moved, then runs this module with TPUKIT_COLAB_SET=NAME. In the main venv
(newest packages) the module is skipped: those packages are tested by every other module.

- tpu: Colab's TPU runtime without TensorFlow or TensorBoard: JAX 0.7.2 on the CPU with 8 simulated devices
  (the TPU itself cannot exist here), Keras 3.13.2, ipywidgets 7.7.1.
- cpu: Colab's CPU/GPU runtime: TensorFlow 2.20, TensorBoard 2.20, Keras 3.13.2, ipywidgets 7.7.1.
"""

import datetime
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO

SET = os.environ.get("TPUKIT_COLAB_SET")
pytestmark = pytest.mark.skipif(SET is None, reason="runs inside a Colab package set (.ci/colab-env.sh)")
tpu_set = pytest.mark.skipif(SET != "tpu", reason="Colab's TPU runtime set only")
cpu_set = pytest.mark.skipif(SET != "cpu", reason="Colab's CPU/GPU runtime set only")
SMALL = dict(dataset="digits", model="mlp", epochs=2, batch_size=16)


def _versions():
    from importlib.metadata import version

    return {name: version(name) for name in ("keras", "ipywidgets", "numpy")}


def test_the_set_is_colabs():
    versions = _versions()
    assert sys.version_info[:2] == (3, 13)  # Colab's Python; nothing stands in for it
    assert versions["keras"] == "3.13.2" and versions["ipywidgets"] == "7.7.1"
    if SET == "tpu":
        from importlib.metadata import version

        assert version("jax") == "0.7.2"
        assert importlib.util.find_spec("tensorflow") is None  # Colab's TPU runtime has none
    else:
        assert next(iter(importlib.import_module("tpukit.hardware.tpu").installed_tensorflow().values())) == "2.20.0"


def test_colab_setup_adds_the_viewers_that_fit_moves_nothing_and_a_capture_is_summarized(tmp_path, capsys):
    """tpukit.colab.setup() on the set (real pip): TensorBoard, and xprof where a release imports on the set's
    protobuf; nothing installed moves. Where no xprof fits (the CPU set: protobuf 5.29.6, every xprof wheel for
    Python 3.13 generated for protobuf 6.31.1), one line says so and the summary reads the trace alone.

    First in the module: later tests read the event files with TensorBoard's own reader, which this installs.
    """
    import tpukit
    from tpukit import colab
    from tpukit.observe import profiling

    before = colab._installed()
    plan = colab.setup()
    after = colab._installed()
    assert "tensorflow" not in plan.missing and "tensorflow-cpu" not in after or SET == "cpu"
    moved = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
    assert not moved, moved
    assert "tensorboard" in after
    said = capsys.readouterr().out.strip().splitlines()
    if SET == "cpu":
        assert "xprof" not in after and list(plan.unavailable) == ["xprof"]
        assert len(said) == 1 and "TensorBoard's profile tab is unavailable on this runtime" in said[0], said
        assert f"protobuf {before['protobuf']}" in said[0] and "generated for protobuf >= 6." in said[0], said[0]
        assert colab.setup().unavailable == plan.unavailable  # a second call: the same answer, nothing installed
        assert colab._installed() == after
    else:
        assert "xprof" in after and not plan.unavailable and len(said) == 2, said
        assert said[0].startswith("tpukit.colab: pip is installing ") and "pinned (about a minute)..." in said[0]
        assert said[1].endswith(f"none of the {len(before)} packages installed before moved."), said[1]
        assert "tensorboard" in said[1] and "xprof" in said[1]
        proc = subprocess.run(
            [sys.executable, "-c", "from xprof.convert import raw_to_tool_data"], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-1500:]  # the release setup() chose imports on this protobuf
    result = tpukit.train(tpukit.RunConfig(**dict(SMALL, epochs=1), profile=(2, 5), logdir=str(tmp_path)))
    summary = profiling.summarize(result.profile_files[0])
    assert summary.step_time_ms and summary.step_time_ms > 0 and len(summary.steps) >= 3
    if SET == "cpu":  # read from the trace alone, and it says so
        assert "Read from the capture's trace only: xprof" in summary.to_text()


@tpu_set
def test_without_tensorflow_connect_picks_jax_and_says_why():
    import tpukit

    runtime = tpukit.connect()
    assert runtime.backend == "jax" and runtime.replicas == 8 and runtime.simulated
    assert "TensorFlow is not installed here" in runtime.backend_reason  # why JAX: its own line, not precision's
    assert "Backend: jax (TensorFlow is not installed here" in runtime.describe()
    assert "tensorflow" not in sys.modules


class _StopAt:
    """Sets `flag` at the end of global step `step` (a Keras callback, built lazily)."""

    def __new__(cls, step, flag):
        import keras

        class StopAt(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.seen = 0

            def on_train_batch_end(self, batch, logs=None):
                self.seen += 1
                if self.seen == step:
                    flag.set()

        return StopAt()


def _scalars(run_dir):
    """Epoch scalars as TensorBoard reads them (its own event reader)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(Path(run_dir) / "train"))
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


@tpu_set
def test_jax_run_on_8_devices_writes_scalars_and_a_capture_and_resumes_exactly(tmp_path):
    import tpukit

    config = tpukit.RunConfig(
        **dict(SMALL, epochs=3), replicas=8, deterministic=True, profile=(2, 4), logdir=str(tmp_path)
    )
    reference = tpukit.train(config)
    assert reference.status == "completed" and reference.config["backend"] == "jax"
    assert reference.config["replicas"] == 8 and reference.config["batch_size"] == 16
    scalars = _scalars(reference.run_dir)
    assert len(scalars["epoch_loss"]) == 3 and "epoch_accuracy" in scalars
    capture = reference.profile_files[0]
    assert Path(capture).exists() and capture.endswith(".xplane.pb")
    flag = threading.Event()
    # one step per call, as the profiled reference ran: a stop at step 12 (auto runs 10 per call on the CPU)
    stopped = tpukit.train(
        config.replace(profile=None, steps_per_execution=1), callbacks=[_StopAt(12, flag)], stop=flag
    )
    assert stopped.status == "stopped" and stopped.epochs_done == 1  # 10 steps an epoch
    resumed = tpukit.resume(stopped.run_dir)
    assert resumed.status == "completed" and resumed.fingerprint == reference.fingerprint
    assert "tensorflow" not in sys.modules


@tpu_set
def test_user_model_and_data_without_tensorflow(tmp_path):
    import tpukit
    from usermodels import text_classifier, tokens

    x, y = tokens(1024)
    result = tpukit.train(
        tpukit.RunConfig(epochs=2, batch_size=8, logdir=str(tmp_path)), model=text_classifier, data=(x, y)
    )
    assert result.status == "completed" and result.validation_metrics["accuracy"] > 0.5
    assert result.flops_source.startswith("XLA cost analysis") and result.mfu
    assert "tensorflow" not in sys.modules


@tpu_set
def test_the_datasets_input_pipelines_need_no_tensorflow():
    """`data.train_dataset` / `eval_dataset` (the notebooks' plain-Keras path) feed NumPy batches without TF."""
    from tpukit.data import builtin as data

    digits = data.load("digits")
    train = data.train_dataset(digits, global_batch=32, seed=0, epochs=1)
    x, y = train[0]
    assert len(train) == digits.num_train // 32 and x.shape[0] == 32 and y.shape[0] == 32
    assert len(data.eval_dataset(digits, global_batch=32)) == len(digits.y_test) // 32
    assert "tensorflow" not in sys.modules


def test_the_panel_trains_headless(tmp_path):
    """The panel under ipywidgets 7.7.1 (Colab's), driven by its methods as a click would."""
    from panel_support import headless_panel

    panel = headless_panel(dict(SMALL, logdir=str(tmp_path)))
    result = panel.train(wait=True)
    assert result is not None, panel.message
    assert result.status == "completed" and panel.progress.done
    assert Path(result.run_dir).name in panel.views["runs"].value


def test_tfds_name_uncached_and_offline_fails_fast_in_one_line_offline_simulated(tmp_path, monkeypatch):
    """`tfds:NAME` goes through tensorflow-datasets (both Colab sets ship it); the network probe is forced off."""
    from tpukit.data import builtin as data
    from tpukit.data import sources

    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(data, "reachable", lambda host, **kwargs: False)
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", "import tensorflow_metadata.proto.v0.anomalies_pb2"], capture_output=True, text=True
    )
    if (
        proc.returncode
    ):  # Colab's CPU runtime: tensorflow-metadata 1.21.0 (protobuf 6.31 gencode) beside protobuf 5.29.6
        from importlib.metadata import version

        from tpukit.data.types import DataError

        with pytest.raises(DataError) as info:
            sources.prepare("tfds:mnist", name="tfds:mnist")
        said = str(info.value)
        assert "\n" not in said and time.time() - started < 60
        assert f"tensorflow-metadata {version('tensorflow-metadata')} fails" in said, said
        assert f"gencode 6.31.1 runtime {version('protobuf')}" in said, said
        assert "install a release of it generated for this protobuf" in said, said
        assert SET == "cpu"  # the only set known to ship this pair
        return
    with pytest.raises(data.DatasetUnavailable, match=r"'tfds:mnist' is not in the tensorflow-datasets cache") as info:
        sources.prepare("tfds:mnist", name="tfds:mnist")
    assert "\n" not in str(info.value) and time.time() - started < 30


def test_the_cli_trains(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpukit",
            "train",
            "--json",
            "--dataset",
            "digits",
            "--model",
            "mlp",
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--logdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "completed" and out["backend"] == ("jax" if SET == "tpu" else "tensorflow")


@cpu_set
def test_tensorboard_magic_reads_the_runs(tmp_path, monkeypatch):
    """What `%tensorboard --logdir runs` does: tensorboard.manager starts TensorBoard 2.20 on the run directories."""
    import tpukit
    from tensorboard import manager

    # %tensorboard runs the `tensorboard` program from PATH, as in Colab (here: the set's venv, as if activated).
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    result = tpukit.train(tpukit.RunConfig(**SMALL, logdir=str(tmp_path)))
    assert result.config["backend"] == "tensorflow"
    started = manager.start(
        ["--logdir", str(tmp_path), "--host", "127.0.0.1", "--port", "0"], timeout=datetime.timedelta(seconds=90)
    )
    assert isinstance(started, (manager.StartLaunched, manager.StartReused)), started
    info = started.info
    try:
        deadline, runs = time.time() + 60, {}
        while time.time() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{info.port}/data/plugin/scalars/tags", timeout=10) as r:
                runs = json.loads(r.read())
            if runs:
                break
            time.sleep(0.5)
        name = Path(result.run_dir).name
        assert f"{name}/train" in runs and "epoch_loss" in runs[f"{name}/train"]
    finally:
        os.kill(info.pid, 15)


@tpu_set
def test_zz_hub_setup_moves_keras_alone_and_a_preset_fine_tunes_without_tensorflow(tmp_path):
    """`tpukit.colab.setup(hub=True)` on Colab's TPU set (real pip): keras 3.13.2 -> 3.15.1 and keras-hub added,
    nothing else moved, no TensorFlow; then a tiny Gemma preset (built offline in the test) fine-tunes with LoRA
    through train() on JAX. Last in the module, and it puts Colab's keras back: what runs after it (the notebooks)
    sees the set as Colab ships it."""
    from hub_support import BUILD, TRAIN
    from preference_support import LEARNS as PREFERS

    from tpukit import colab

    before = colab._installed()
    assert "keras-hub" not in before and "tensorflow" not in before  # Colab's TPU runtime ships neither

    def python(*args):
        done = subprocess.run(
            [sys.executable, "-c", *args],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "KERAS_BACKEND": "jax"},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    try:
        said = python("from tpukit import colab; colab.setup(hub=True)").strip().splitlines()
        after = colab._installed()
        moved = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
        assert moved == {"keras": (before["keras"], colab.KERAS_FOR_HUB)}, moved
        assert set(after) - set(before) == {"keras-hub"} and "tensorflow" not in after
        assert said[-1].startswith("tpukit.colab: added keras-hub 0.32.0") and "loads without TensorFlow" in said[-1]
        preset = tmp_path / "tiny_gemma"
        python(BUILD, str(preset))
        out = json.loads(python(TRAIN, str(preset), str(tmp_path / "runs")).strip().splitlines()[-1])
        assert out["status"] == "completed" and out["backend"] == "jax", out["message"]
        assert out["loss"][-1] < out["loss"][0] and out["changed"] == [], out
        assert not out["tensorflow_for_text"]
        # preference tuning too: DPO on pairs learns which answer is preferred, without TensorFlow
        dpo = json.loads(python(PREFERS, str(preset), str(tmp_path / "dpo"), "dpo").strip().splitlines()[-1])
        assert dpo["status"] == "completed" and dpo["history"]["val_reward_accuracy"][-1] >= 0.75, dpo
        assert "tensorflow" not in dpo["modules"], dpo["modules"]
    finally:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", f"keras=={before['keras']}"], check=True
        )
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "keras-hub"], check=True)
    assert colab._installed() == before


def _python_in_repo(script, *args, backend):
    """The stdout of `script` run with `args` in a fresh process on `backend`, tests/ and the repository importable."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        env={**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{REPO}"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@cpu_set
def test_a_lora_fine_tune_learns_on_colabs_keras_with_float32_adapters(tmp_path):
    """Colab's CPU/GPU runtime as shipped (Keras 3.13.2, keras-hub 0.26, TensorFlow 2.20): a tiny Gemma preset (built
    offline in the test, frozen weights in bfloat16) fine-tuned with LoRA trains float32 adapters, and its validation
    loss falls, on TensorFlow (Keras' default there) and on JAX; and over an int4 base (QLoRA). Keras 3.13.2 alone
    makes bfloat16 adapters here, and the validation loss stayed at 5.6005 for three epochs."""
    from hub_support import BUILD, LEARNS

    python = _python_in_repo

    preset = tmp_path / "tiny_gemma"
    python(BUILD, str(preset), backend="tensorflow")
    for backend in ("tensorflow", "jax"):
        out = json.loads(python(LEARNS, str(preset), str(tmp_path / backend), backend=backend).strip().splitlines()[-1])
        assert out["status"] == "completed" and out["backend"] == backend, out["message"]
        assert out["adapters"] == ["float32"] and out["frozen"] == ["bfloat16"], out
        val = out["val_loss"]
        assert val[-1] < val[0] - 0.02 and val[1] < val[0], out
    # QLoRA with an int4 base (Keras 3.13 packs it along the inputs and scales it per output; 3.15 differs): the
    # adapters learn over it, and the float copy export writes, read from it, computes what the run's model does
    # up to the int8 rounding of the activations (0.047 of the largest logit on Keras 3.15 with TensorFlow; a kernel
    # read in the wrong layout is off by about the logits themselves)
    out = json.loads(python(LEARNS, str(preset), str(tmp_path / "int4"), "int4", backend="tensorflow").splitlines()[-1])
    assert out["status"] == "completed" and out["adapters"] == ["float32"] and "int8" in out["frozen"], out
    assert any("the projections' kernels in int4" in note for note in out["notes"]), out["notes"]
    assert out["val_loss"][-1] < out["val_loss"][0] - 0.02 and out["merged_vs_quantized"] < 0.1, out


@cpu_set
def test_preference_tuning_learns_on_colabs_keras_and_keras_hub(tmp_path):
    """DPO and SimPO on Colab's CPU/GPU runtime as shipped (Keras 3.13.2, keras-hub 0.26, TensorFlow 2.20): a tiny
    Gemma preset whose vocabulary has Gemma's turn tokens, tuned on pairs where "Yes:" is preferred to "No:", prefers
    the chosen answer of most held-out pairs, on TensorFlow and on JAX, with float32 adapters over the bfloat16 base."""
    from hub_support import BUILD, GEMMA_TURNS
    from preference_support import LEARNS

    def python(script, *args, backend):
        out = _python_in_repo(script, *args, backend=backend).strip()
        return json.loads(out.splitlines()[-1]) if out else None

    preset = tmp_path / "tiny_gemma"
    python(BUILD, str(preset), *GEMMA_TURNS, backend="tensorflow")
    for backend, method in (("tensorflow", "dpo"), ("jax", "dpo"), ("tensorflow", "simpo")):
        out = python(LEARNS, str(preset), str(tmp_path / f"{backend}-{method}"), method, backend=backend)
        assert out["status"] == "completed" and out["backend"] == backend, out["message"]
        history = out["history"]
        assert history["val_reward_accuracy"][-1] >= 0.75, (backend, method, history)
        assert history["val_reward_margin"][-1] > history["val_reward_margin"][0], (backend, method, history)
        assert out["adapters"] == ["float32"], out["adapters"]
