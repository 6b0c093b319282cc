"""train() across TensorFlow workers: MultiWorkerMirroredStrategy from TF_CONFIG and tpukit's own loop
(`tpukit.hardware.tf_multiworker_loop`; Keras 3's fit cannot run there, keras-team/keras#20585).

Real processes, real TensorFlow on the CPU: `python -m tpukit launch --workers 2 -- train --backend tensorflow`
on 127.0.0.1, at smoke size.
"""

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")
import keras  # noqa: E402  (after TensorFlow: the backend this file tests)

from conftest import REPO, run_cli  # noqa: E402
from tpukit.cli import launch
from tpukit.runs import directory, records  # noqa: E402

TRAIN = [
    "train",
    "--backend",
    "tensorflow",
    "--model",
    "mlp",
    "--dataset",
    "digits",
    "--deterministic",
    "--precision",
    "float32",
]


def _last_json(text: str) -> dict:
    """The last JSON object among `text`'s lines: a worker's log holds its stdout and its filtered stderr, two
    writers whose pieces interleave (stderr's last line can reach the file before or after the JSON line, or be
    cut by it)."""
    lines = [line[line.index('{"') :] for line in text.strip().splitlines() if '{"' in line]
    assert lines, text[-2000:]
    return json.loads(lines[-1])


@pytest.mark.slow
def test_two_workers_of_two_devices_train_one_run_and_only_the_chief_records_it(tmp_path):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "tpukit-worker*")))
    logs = tmp_path / "logs"
    done = run_cli(
        "launch",
        "--workers",
        "2",
        "--logs",
        str(logs),
        "--",
        *TRAIN,
        "--replicas",
        "2",
        "--batch-size",
        "4",
        "--epochs",
        "2",
        "--steps-per-epoch",
        "10",
        "--logdir",
        str(tmp_path / "runs"),
        "--json",
        timeout=300,
    )
    assert done.returncode == 0, (done.stderr[-3000:], [p.read_text()[-1500:] for p in logs.glob("*.log")])
    chief, other = _last_json(done.stdout), _last_json((logs / "worker-1.log").read_text())
    assert chief["status"] == "completed" and chief["backend"] == "tensorflow"
    assert chief["replicas"] == 4 and chief["global_batch_size"] == 16  # 2 workers x 2 devices, 4 per replica
    assert chief["epochs_done"] == 2 and len(chief["history"]["loss"]) == 2 and "val_loss" in chief["history"]
    assert chief["steps_per_execution"] == 1
    assert other["fingerprint"] == chief["fingerprint"]  # every worker holds the same weights
    assert "epoch 2/2  step 10/10" in done.stderr  # the chief's progress, on the launcher's terminal

    # Only the chief writes the run, and it is recorded as fit's runs are; the other worker's copy went to a
    # temporary directory, now gone.
    run_dir = Path(chief["run_dir"])
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_dir.name]
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "tpukit-worker*"))) == before
    written = {p.name for p in run_dir.iterdir()}
    assert {"config.json", "result.json", "model.weights.h5", "train", "validation"} <= written
    assert not (run_dir / "backup").exists()  # removed when the run completed, as after fit
    assert glob.glob(str(run_dir / "train" / "events.out.tfevents.*"))  # TensorBoard scalars
    result = records.load(run_dir)
    assert result.status == "completed" and result.runtime["workers"] == 2 and result.runtime["process_index"] == 0
    assert directory.load_config(run_dir).replicas == 4
    assert "epoch 1/2" in (logs / "worker-1.log").read_text()


@pytest.mark.slow
def test_a_killed_worker_ends_the_job_in_one_line_and_the_run_resumes_in_one_process_to_the_same_weights(tmp_path):
    args = [*TRAIN, "--batch-size", "8", "--epochs", "3", "--steps-per-epoch", "30"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpukit",
            "launch",
            "--workers",
            "2",
            "--logs",
            str(tmp_path / "logs"),
            "--",
            *args,
            "--logdir",
            str(tmp_path / "runs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    # Kill worker 1 once the chief has backed up its first whole epoch.
    deadline = time.monotonic() + 240
    while not glob.glob(str(tmp_path / "runs" / "*" / "backup" / "latest.json")):
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()[1][-3000:]
        time.sleep(0.1)
    os.kill(_worker(job.pid, 1), signal.SIGKILL)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 1, err[-3000:]
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("python -m tpukit launch: worker 1 of 2 was killed by signal 9, so the others were stopped")
    ), err[-3000:]
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "*"))
    ended = records.load(run_dir)
    assert ended.status in ("failed", "stopped") and 1 <= ended.epochs_done < 3, ended
    assert "another worker of the cluster stopped answering" in ended.message or ended.status == "stopped"

    # The backup the chief wrote under MWMS resumes in one process with the run's 2 replicas (MirroredStrategy),
    # and ends bitwise equal to an uninterrupted run: a sum of two gradients does not depend on its order, so
    # 2 workers x 1 device train as 1 process x 2 devices (checked: the same fingerprint).
    resumed, whole = _side_by_side(
        ["train", "--resume", run_dir, "--json"],
        [*args, "--replicas", "2", "--logdir", str(tmp_path / "whole"), "--json"],
    )
    assert resumed["status"] == "completed" and resumed["replicas"] == 2 and resumed["epochs_done"] == 3
    assert resumed["fingerprint"] == whole["fingerprint"]


@pytest.mark.slow
def test_sigterm_to_one_worker_stops_every_worker_after_the_same_step(tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    # The launcher's stderr goes through its filter (tpukit.cli.nativelog), which exits only after the launcher and
    # what it wrote: a filter beside it lost the last line 1 run in 3.
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpukit",
            "launch",
            "--workers",
            "2",
            "--logs",
            str(tmp_path / "logs"),
            "--",
            *TRAIN,
            "--batch-size",
            "8",
            "--epochs",
            "3",
            "--steps-per-epoch",
            "30",
            "--logdir",
            str(tmp_path / "runs"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    deadline = time.monotonic() + 240
    while not glob.glob(str(tmp_path / "runs" / "*" / "backup" / "latest.json")):
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()[1][-3000:]
        time.sleep(0.1)
    os.kill(_worker(job.pid, 1), signal.SIGTERM)
    _, err = job.communicate(timeout=120)
    # Worker 1 votes to stop, both stop after the same step and record a stopped run (worker 0: "another worker
    # stopped"); neither goes on to the test split alone, where the other would wait in an all-reduce.
    assert job.returncode == 130, err[-3000:]
    assert "stopped its run (status 130)" in err.strip().splitlines()[-1], err[-3000:]
    (run_dir,) = glob.glob(str(tmp_path / "runs" / "*"))
    ended = records.load(run_dir)
    assert ended.status == "stopped" and "another worker stopped" in ended.message and ended.epochs_done >= 1
    assert "STOPPED:" in (tmp_path / "logs" / "worker-1.log").read_text()


def _side_by_side(*commands):
    """Run `python -m tpukit COMMAND` for each command at once; their results."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    jobs = [
        subprocess.Popen(
            [sys.executable, "-m", "tpukit", *c],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )
        for c in commands
    ]
    results = []
    for job in jobs:
        out, err = job.communicate(timeout=300)
        assert job.returncode == 0, err[-3000:]
        results.append(_last_json(out))
    return results


class _Calls(keras.callbacks.Callback):
    """Every hook Keras calls, with its step and the names of the logs it got; stops at (epoch, step) if asked."""

    def __init__(self, stop_at=None):
        super().__init__()
        self.calls, self.stop_at, self.epoch = [], stop_at, None

    def _log(self, name, step, logs):
        self.calls.append((name, step, tuple(sorted(logs or ()))))

    def on_train_begin(self, logs=None):
        self._log("train_begin", None, logs)

    def on_train_end(self, logs=None):
        self._log("train_end", None, logs)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        self._log("epoch_begin", epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._log("epoch_end", epoch, logs)

    def on_train_batch_begin(self, batch, logs=None):
        self._log("train_batch_begin", batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self._log("train_batch_end", batch, logs)
        if (self.epoch, batch) == self.stop_at:
            self.model.stop_training = True

    def on_test_begin(self, logs=None):
        self._log("test_begin", None, logs)

    def on_test_end(self, logs=None):
        self._log("test_end", None, logs)

    def on_test_batch_begin(self, batch, logs=None):
        self._log("test_batch_begin", batch, logs)

    def on_test_batch_end(self, batch, logs=None):
        self._log("test_batch_end", batch, logs)


@pytest.mark.parametrize("stop_at", [None, (1, 2)])
def test_the_loop_calls_the_callbacks_as_fit_does_and_trains_the_same_weights(stop_at):
    """In one process, under a MirroredStrategy of 2 devices: tpukit's loop against Keras' fit, hook by hook."""
    import numpy as np

    from tpukit.hardware import tf_multiworker_loop as multiworker
    from tpukit.hardware import mirrored

    strategy = mirrored.strategy([d.name for d in tf.config.list_logical_devices("CPU")][:2])
    rng = np.random.default_rng(0)
    x, y = rng.random((96, 6), dtype="float32"), rng.integers(0, 3, 96)
    train = tf.data.Dataset.from_tensor_slices((x, y)).batch(16, drop_remainder=True).repeat(2)
    validation = tf.data.Dataset.from_tensor_slices((x[:32], y[:32])).batch(16)

    def run(loop: bool):
        keras.utils.set_random_seed(7)
        with strategy.scope():
            model = keras.Sequential(
                [
                    keras.Input((6,)),
                    keras.layers.Dense(8, activation="relu"),
                    keras.layers.Dense(3, activation="softmax"),
                ]
            )
            model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
            calls = _Calls(stop_at)
            if loop:
                history = multiworker.fit(
                    model, strategy, train, epochs=2, initial_epoch=0, steps=6, callbacks=[calls], validation=validation
                )
            else:
                history = model.fit(
                    train,
                    epochs=2,
                    steps_per_epoch=6,
                    validation_data=validation,
                    callbacks=[calls],
                    shuffle=False,
                    verbose=0,
                )
        return calls.calls, history.history, model.get_weights()

    (fit_calls, fit_history, fit_weights), (calls, history, weights) = run(False), run(True)
    assert calls == fit_calls
    assert history.keys() == fit_history.keys()
    for k in history:
        np.testing.assert_allclose(history[k], fit_history[k], rtol=1e-6)
    for a, b in zip(weights, fit_weights):
        np.testing.assert_array_equal(a, b)


def test_each_tensorflow_worker_gets_the_cluster_and_its_index_and_nothing_of_jax():
    env = launch.worker_env("tensorflow", 1, 2, [1234, 5678])
    assert json.loads(env["TF_CONFIG"]) == {
        "cluster": {"worker": ["127.0.0.1:1234", "127.0.0.1:5678"]},
        "task": {"type": "worker", "index": 1},
    }
    assert env["KERAS_BACKEND"] == "tensorflow" and not any(k.startswith("KERAS_DISTRIBUTION") for k in env)
    assert launch.command_for(["train", "--backend", "tensorflow"]) == ["train", "--backend", "tensorflow"]
    assert launch.backend_of(["train", "--backend=tensorflow"]) == "tensorflow"
    ports = launch.free_ports(3)
    assert len(set(ports)) == 3


def test_tensorflow_workers_run_one_step_per_call():
    from tpukit.config import ConfigError
    from tpukit.hardware.tf_multiworker import MultiWorkerRuntime
    from tpukit.training.plan import resolve_steps_per_execution

    workers = MultiWorkerRuntime(
        backend="tensorflow", kind="gpu", devices=("gpu:0", "gpu:1"), replicas=4, workers=2, strategy=None
    )
    steps, why = resolve_steps_per_execution("auto", workers, 40)
    assert steps == 1 and "keras-team/keras#20585" in why
    with pytest.raises(ConfigError, match="runs one step per call; use 1"):
        resolve_steps_per_execution(4, workers, 40)


def _ppid(pid) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _worker(parent: int, index: int) -> int:
    """The process of worker `index` under the launcher `parent` (Linux /proc): a grandchild, as each CLI's first
    process is its stderr filter and runs the program as its child (tpukit/cli/nativelog.py)."""
    entry = f"TPUKIT_LAUNCH_WORKER={index}".encode()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if _ppid(_ppid(pid)) != parent:
                    continue
                if entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    return int(pid)
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.1)
    raise AssertionError(f"no worker {index} under {parent}")
