"""`python -m tpukit launch`: one train() across local processes on JAX's multi-process engine (gloo on the CPU).

Real processes, real JAX: 2 workers x 4 simulated CPU devices each, coordinated on 127.0.0.1.
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

import numpy as np
import pytest

from conftest import REPO, run_cli, unset_env
from tpukit.cli import launch
from tpukit.config import ConfigError


@pytest.fixture(autouse=True)
def no_users_keras_backend(monkeypatch):
    """launch's own default is tested here (a user's KERAS_BACKEND is in tests/test_backend.py): none is set, by
    the user or by a test before, in this process or the workers it starts."""
    from tpukit import backend

    unset_env(monkeypatch, backend.ENV)


TRAIN = [
    "train",
    "--model",
    "mlp",
    "--dataset",
    "digits",
    "--batch-size",
    "4",
    "--epochs",
    "1",
    "--steps-per-epoch",
    "20",
    "--deterministic",
    "--precision",
    "float32",
    "--json",
]


def _launch(tmp_path, name, *extra, workers=2, replicas=4, train=TRAIN):
    logs = tmp_path / f"{name}-logs"
    done = run_cli(
        "launch",
        "--workers",
        str(workers),
        "--logs",
        str(logs),
        "--",
        *train,
        "--replicas",
        str(replicas),
        "--logdir",
        str(tmp_path / name),
        *extra,
        timeout=400,
    )
    assert done.returncode == 0, (done.stderr[-3000:], _tails(logs))
    chief = json.loads(done.stdout.strip().splitlines()[-1])
    # a worker's log holds its stdout and its filtered stderr, whose last lines (the total time) can follow the JSON
    others = [
        json.loads([line for line in Path(p).read_text().splitlines() if line.startswith("{")][-1])
        for p in sorted(glob.glob(f"{logs}/*.log"))
    ]
    return chief, others


def _tails(folder) -> str:
    return "\n".join(Path(p).read_text()[-1500:] for p in glob.glob(f"{folder}/*.log"))


def _weights(run_dir, file="model.weights.h5"):
    import h5py

    arrays = {}
    with h5py.File(Path(run_dir) / file) as f:
        f.visititems(
            lambda name, obj: arrays.__setitem__(name, np.array(obj)) if isinstance(obj, h5py.Dataset) else None
        )
    return arrays


@pytest.mark.slow
def test_two_processes_of_four_devices_train_one_run_the_same_on_both_and_across_launches(tmp_path):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "tpukit-worker*")))
    chief, (other,) = _launch(tmp_path, "a")
    assert chief["status"] == "completed" and chief["backend"] == "jax"
    assert chief["replicas"] == 8 and chief["global_batch_size"] == 32  # 2 workers x 4 devices, 4 per replica
    assert other["fingerprint"] == chief["fingerprint"]  # every process holds the same weights
    # Only the chief writes the run; the other worker's copy was in a temporary directory, now gone.
    # (beside JAX's compilation cache, which "auto" keeps in the logdir: tpukit.training.compile_cache)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [".jax-cache", Path(chief["run_dir"]).name]
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "tpukit-worker*"))) == before

    again, _ = _launch(tmp_path, "b")
    assert again["fingerprint"] == chief["fingerprint"]  # deterministic across launches, bitwise

    # One process with all 8 devices and the same global batch: the same batches in the same order, so the
    # same run up to float32 rounding. Not bitwise: XLA's in-process all-reduce and gloo's ring across
    # processes add the 8 gradients in different orders (measured: max |difference| 6.7e-8 after 40 steps).
    single = run_cli(*TRAIN, "--backend", "jax", "--replicas", "8", "--logdir", str(tmp_path / "single"), timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    one = json.loads(single.stdout.strip().splitlines()[-1])
    assert one["replicas"] == 8 and one["global_batch_size"] == 32
    a, b = _weights(chief["run_dir"]), _weights(one["run_dir"])
    assert a.keys() == b.keys()
    worst = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
    assert worst < 1e-5, worst
    assert one["final_metrics"]["loss"] == pytest.approx(chief["final_metrics"]["loss"], rel=1e-4)


@pytest.fixture(scope="module")
def tiny_gemma_kv2(tmp_path_factory):
    """A tiny KerasHub Gemma preset built offline, with 2 key-value heads: a model axis of 2 divides every dimension
    its layout map splits."""
    pytest.importorskip("keras_hub")
    from hub_support import BUILD

    preset = tmp_path_factory.mktemp("presets") / "tiny_gemma_kv2"
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    build = BUILD.replace("num_key_value_heads=1", "num_key_value_heads=2")
    subprocess.run([sys.executable, "-c", build, str(preset)], check=True, env=env, timeout=300, capture_output=True)
    return preset


def _lora(preset, *extra):
    """train's arguments for a rank-4 LoRA fine-tune of `preset` on 64 help topics, 6 steps an epoch."""
    return ["train", "--model", str(preset), "--dataset", "pydoc", "--dataset-size", "64", "--sequence-length"] + [
        "16", "--steps-per-epoch", "6", "--deterministic", "--precision", "float32", "--validation-split", "none",
        *extra
    ]  # fmt: skip


@pytest.mark.slow
def test_a_lora_fine_tune_over_two_processes_data_and_model_parallel_trains_the_adapters_one_process_trains(
    tmp_path, tiny_gemma_kv2
):
    """A tiny KerasHub Gemma (built offline), LoRA rank 4, over 2 workers x 4 devices: data parallel, and with
    model_parallel=2 (a mesh of batch 4 x model 2, each copy of the model split within one process, the weights
    also split over the batch axis by KerasHub's layout map, so every read gathers them from both processes),
    each against one process with the 8 devices, the same mesh and the same global batch: the same adapters.

    Not against each other: splitting the model splits sums, whose parts meet in another order, and Adam turns the
    rounding of a gradient that is 0 in exact arithmetic (A's, while B is still 0) into steps of the learning
    rate's size. Measured: 3.3e-3 between the two layouts in one process, 3e-8 between one and two processes."""

    def lora(batch_size, *extra):
        return _lora(tiny_gemma_kv2, "--batch-size", str(batch_size), "--epochs", "1", "--json", *extra)

    for name, train in (("data", lora(2)), ("split", lora(4, "--model-parallel", "2", "--early-stopping", "2"))):
        alone = run_cli(*train, "--backend", "jax", "--replicas", "8", "--logdir", str(tmp_path / name), timeout=300)
        assert alone.returncode == 0, alone.stderr[-3000:]
        one = json.loads(alone.stdout.strip().splitlines()[-1])
        chief, (other,) = _launch(tmp_path, f"{name}-launched", train=train)
        for run in (one, chief):
            assert run["status"] == "completed" and run["replicas"] == 8 and run["global_batch_size"] == 16
            record = json.loads((Path(run["run_dir"]) / "result.json").read_text())
            assert record["samples"].get("after"), record["notes"]  # a batch of one prompt, over 8 devices
        assert other["fingerprint"] == chief["fingerprint"]  # both processes hold the same adapters
        a, b = (_weights(r["run_dir"], "adapters.lora.h5") for r in (chief, one))
        assert a.keys() == b.keys() and len(a) == 9  # A and B of the query and value in 2 layers, and the rank
        assert max(float(np.max(np.abs(a[k] - b[k]))) for k in a) < 1e-5, name
        assert any(float(np.max(np.abs(a[k]))) > 0 for k in a if k.endswith("lora_kernel_b"))  # B starts at 0
        assert one["final_metrics"]["loss"] == pytest.approx(chief["final_metrics"]["loss"], rel=1e-4)
    strategy = record["runtime"]["strategy_reason"]  # the launched model-parallel run's
    assert "ModelParallel over 8 CPU devices in 2 processes, a mesh of batch 4 x model 2" in strategy, strategy


def _launch_until_backup(tmp_path, train) -> subprocess.Popen:
    """A 2-worker launch of `train` (logs and runs under `tmp_path`), returned once the chief has backed up a whole
    epoch."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tpukit", "launch", "--workers", "2", "--logs", str(tmp_path / "logs"), "--"]
    job = subprocess.Popen(
        [*command, *train, "--logdir", str(tmp_path / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    deadline = time.monotonic() + 300
    while not glob.glob(str(tmp_path / "runs" / "*" / "backup" / "latest.json")):
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()[1][-3000:]
        time.sleep(0.2)
    return job


@pytest.mark.slow
def test_a_killed_worker_stops_the_job_in_one_line_and_the_run_resumes_in_one_process(tmp_path):
    train = [a for a in TRAIN if a != "--json"] + ["--replicas", "2", "--epochs", "8", "--steps-per-epoch", "50"]
    job = _launch_until_backup(tmp_path, train)  # kill worker 1 once there is something to resume
    worker = _process_with(job.pid, "TPUKIT_LAUNCH_WORKER=1")
    os.kill(worker, signal.SIGKILL)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 1, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith(
        "python -m tpukit launch: worker 1 of 2 was killed by signal 9, so the others were stopped"
    ), err[-3000:]

    run_dir = glob.glob(str(tmp_path / "runs" / "*"))[0]
    resumed = run_cli("train", "--resume", run_dir, "--json", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["replicas"] == 4  # the run's 2 x 2 devices, in one process


@pytest.mark.slow
def test_a_model_parallel_launch_whose_chief_is_stopped_ends_and_resumes_in_one_process(tmp_path, tiny_gemma_kv2):
    """SIGTERM to the chief of a model-parallel launch: it stops after its step while the other process waits in
    the next step's all-reduce, so nothing at its end may need both (a gather of the split weights, a generate):
    the job ends, the run is kept as stopped, and it resumes in one process from its last whole epoch."""
    train = _lora(tiny_gemma_kv2, "--batch-size", "4", "--epochs", "60", "--model-parallel", "2", "--replicas", "4")
    job = _launch_until_backup(tmp_path, train)
    os.kill(_process_with(job.pid, "TPUKIT_LAUNCH_WORKER=0"), signal.SIGTERM)
    _, err = job.communicate(timeout=120)  # the launcher gives the other worker 20 s, then another 20 after SIGTERM
    assert job.returncode == 130, err[-3000:]

    run_dir = glob.glob(str(tmp_path / "runs" / "*"))[0]
    record = json.loads((Path(run_dir) / "result.json").read_text())
    assert record["status"] == "stopped" and record["message"].startswith("terminated (SIGTERM)"), record["message"]
    assert not (Path(run_dir) / "adapters.lora.h5").exists()  # split over both processes, which stopped apart
    assert any(n.startswith("final weights: not written") for n in record["notes"]), record["notes"]
    resumed = run_cli("train", "--resume", run_dir, "--json", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "completed" and result["replicas"] == 8  # the run's 2 x 4 devices, in one process
    assert result["global_batch_size"] == 16  # batch 4 x 4 copies of the model, each split over 2: as launched
    resumed_record = json.loads((Path(run_dir) / "result.json").read_text())
    assert "a mesh of batch 4 x model 2" in resumed_record["runtime"]["strategy_reason"]
    assert record["epochs_done"] >= 1 and (Path(run_dir) / "adapters.lora.h5").is_file()


def test_launch_refuses_what_it_cannot_run_in_one_line():
    assert launch.command_for(["--", "train", "--model", "mlp"])[-2:] == ["--backend", "jax"]
    assert launch.command_for(["train", "--backend", "auto"]) == ["train", "--backend", "jax"]
    for argv, text in (
        (["doctor"], "launch runs a train command"),
        (["train", "--backend", "torch"], "--backend jax or tensorflow. Received: --backend torch"),
    ):
        with pytest.raises(ConfigError, match=text):
            launch.command_for(argv)
    with pytest.raises(ConfigError, match="--workers: expected a whole number from 1 to 64"):
        launch.run(0, ["train"])
    done = run_cli("launch", "--workers", "2", "--", "train", "--backend", "torch", timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "multi-process engine" in done.stderr


def _ppid(pid) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _process_with(parent: int, entry: str) -> int:
    """The process `python -m tpukit` that `parent`'s program started with `entry` in its environment (Linux
    /proc): a grandchild, as each CLI's first process is its stderr filter and runs the program as its child."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if _ppid(_ppid(pid)) != parent:
                    continue
                if entry.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                    return int(pid)
            except (OSError, ValueError, IndexError):
                continue
        time.sleep(0.2)
    raise AssertionError(f"no child of {parent} with {entry}")


def test_each_process_feeds_its_share_of_every_batch_and_together_the_whole():
    from tpukit.data import pipeline
    from tpukit.data import sources

    part = sources.Arrays(np.arange(100, dtype="float32").reshape(50, 2), np.arange(50))
    kwargs = dict(feeder="numpy", global_batch=8, seed=3, epochs=2, steps=6)
    whole = pipeline.train_feed(part, **kwargs)
    shares = [pipeline.train_feed(part, shard=(i, 2), **kwargs) for i in range(2)]
    for step in range(len(whole)):
        _, y = whole[step]
        assert np.array_equal(np.concatenate([s[step][1] for s in shares]), y)  # process 0's rows, then 1's
    evaluation = [pipeline.eval_feed(part, feeder="numpy", global_batch=8, replicas=4, shard=(i, 2)) for i in (0, 1)]
    assert np.array_equal(np.concatenate([e[0][1] for e in evaluation]), np.arange(8))
    with pytest.raises(ConfigError, match="cannot be shared by 3 processes"):
        pipeline.train_feed(part, shard=(0, 3), **kwargs)


@pytest.mark.slow
def test_a_dpo_launch_across_processes_is_one_line_and_leaves_no_run(tmp_path, tiny_gemma_kv2):
    """DPO scores its reference in one process: a launch of it over 2 processes is refused before any run
    directory exists, naming what runs instead."""
    from preference_support import pairs

    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in pairs(0, 16)))
    train = ["train", "--model", str(tiny_gemma_kv2), "--method", "dpo", "--data", str(data), "--sequence-length",
             "48", "--batch-size", "2", "--epochs", "1", "--replicas", "2", "--logdir", str(tmp_path / "runs")]  # fmt: skip
    done = run_cli("launch", "--workers", "2", "--logs", str(tmp_path / "logs"), "--", *train, timeout=400)
    assert done.returncode != 0
    line = done.stderr.strip().splitlines()[-1]
    assert "method='dpo' scores its reference in one process, and this run spans several" in done.stderr, line
    assert not any((tmp_path / "runs").glob("*/config.json"))
