"""Nothing lost: kills at every write, damaged and planted files, concurrent resumes, signals and a full disk.

The kill tests run the CLI in a child process that SIGKILLs itself at one write
(tests/killer.py), then resume in a fresh process and compare the weights
fingerprint with a run left alone.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import keras
import pytest

from tpukit.runs import backups
from tpukit.runs import directory, records
from tpukit.config import ConfigError, RunConfig
from tpukit.training.api import resume, train
from conftest import REPO, run_cli
from run_support import last_json as _last_json
from run_support import CallAt

ARGS = [
    "--deterministic",
    "--dataset",
    "digits",
    "--model",
    "mlp",
    "--epochs",
    "3",
    "--batch-size",
    "32",
    "--precision",
    "float32",
]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The run left alone: its result as the CLI prints it."""
    return _last_json(run_cli("train", "--json", "--logdir", str(tmp_path_factory.mktemp("plain")), *ARGS))


def _killed_at(logdir, name, nth, how):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "killer.py"),
            name,
            str(nth),
            how,
            "--",
            "train",
            "--json",
            "--logdir",
            str(logdir),
            *ARGS,
        ],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    (run_dir,) = Path(logdir).iterdir()
    return run_dir


def _resumes_to(run_dir, reference):
    resumed = _last_json(run_cli("train", "--resume", str(run_dir), "--json"))
    assert resumed["status"] == "completed" and resumed["run_dir"] == str(run_dir)
    assert resumed["epochs_done"] == 3 and resumed["fingerprint"] == reference["fingerprint"]
    assert resumed["history"]["loss"] == reference["history"]["loss"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, nth, how",
    [
        (backups.weights_name(2), 1, "torn"),  # inside the backup's weights write
        (backups.weights_name(2), 1, "after"),  # between the weights and the marker that names them
        ("latest.json", 2, "torn"),  # inside the marker's write
        ("latest.json", 2, "after"),  # before the older backup is removed
        ("result.json", 3, "torn"),  # inside a record update
        ("model.weights.h5", 1, "torn"),  # inside the final weights' write
    ],
)
def test_a_kill_at_any_write_resumes_to_the_uninterrupted_fingerprint(tmp_path, reference, name, nth, how):
    run_dir = _killed_at(tmp_path, name, nth, how)
    killed = records.load(run_dir)
    assert killed.status == "stopped" and "killed" in killed.message  # nobody holds its lock: not "running"
    assert not list(run_dir.rglob(".*.tmp-*")) or how == "torn"  # a torn temporary file is all a kill can leave
    _resumes_to(run_dir, reference)
    assert not list(run_dir.rglob(".*.tmp-*"))


@pytest.mark.slow
def test_sigterm_stops_the_run_in_one_line_and_it_resumes_exactly(tmp_path, reference):
    # SIGTERM right after epoch 1's backup is in place: a point of the run, not of this machine's speed (the mlp's
    # three epochs can end within a polling interval).
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "killer.py"),
            "latest.json",
            "1",
            "term",
            "--",
            "train",
            "--json",
            "--logdir",
            str(tmp_path),
            *ARGS,
        ],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (run_dir,) = [d for d in Path(tmp_path).iterdir() if d.is_dir()]
    stopped = records.load(run_dir)
    assert stopped.status == "stopped" and "SIGTERM" in stopped.message and stopped.resumable
    _resumes_to(run_dir, reference)


# ---- in process --------------------------------------------------------------
# One step per call: these runs stop at a chosen step (auto runs the mlp's short steps 20 per call on the CPU).
SMALL = dict(
    dataset="digits",
    model="mlp",
    epochs=3,
    batch_size=32,
    deterministic=True,
    precision="float32",
    steps_per_execution=1,
)


def _stopped_run(tmp_path, at_step=70, **changes):
    """A run stopped in its second epoch (digits: 40 steps an epoch at batch 32), with a backup of epoch 1."""
    config = RunConfig(**{**SMALL, "logdir": str(tmp_path), **changes})
    stop = __import__("threading").Event()
    result = train(config, callbacks=[CallAt(at_step, stop.set)], stop=stop)
    assert result.status == "stopped" and result.epochs_done == 1
    return Path(result.run_dir)


def _files(run_dir):
    """Every file's time and size, but the lock's (taking the lock writes the taker's pid there)."""
    return {
        p: (p.stat().st_mtime_ns, p.stat().st_size)
        for p in Path(run_dir).rglob("*")
        if p.is_file() and p.name != directory.LOCK_NAME
    }


def _one_line(error):
    assert "\n" not in str(error) and "Traceback" not in str(error)


@pytest.mark.parametrize(
    "damage", ["flip a byte of the weights", "truncate the weights", "garble the marker", "remove the weights"]
)
def test_a_damaged_backup_is_refused_in_one_line_and_nothing_changes(tmp_path, damage):
    run_dir = _stopped_run(tmp_path)
    weights, marker = run_dir / "backup" / backups.weights_name(1), run_dir / "backup" / "latest.json"
    if damage == "flip a byte of the weights":
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0xFF
        weights.write_bytes(bytes(data))
    elif damage == "truncate the weights":
        weights.write_bytes(weights.read_bytes()[:100])
    elif damage == "garble the marker":
        marker.write_text('{"epochs_done": 1, "fi')
    else:
        weights.unlink()
    before = _files(run_dir)
    with pytest.raises(backups.BackupError, match="cannot resume exactly") as info:
        resume(run_dir)
    _one_line(info.value)
    assert _files(run_dir) == before


def test_a_run_whose_config_and_result_disagree_is_refused(tmp_path):
    run_dir = _stopped_run(tmp_path)
    config = json.loads((run_dir / "config.json").read_text())
    directory.write_json(run_dir / "config.json", {**config, "learning_rate": 0.5})
    before = _files(run_dir)
    with pytest.raises(
        directory.RunDirError, match=r"disagree on learning_rate \(learning_rate=0.5 vs 0.001\)"
    ) as info:
        resume(run_dir)
    _one_line(info.value)
    assert _files(run_dir) == before


def test_resume_with_a_model_that_does_not_fit_the_weights_is_refused(tmp_path):
    run_dir = _stopped_run(tmp_path, model="mlp")

    def wider(spec):
        return keras.Sequential(
            [
                keras.Input(spec.input_shape),
                keras.layers.Flatten(),
                keras.layers.Dense(7, activation="relu"),
                keras.layers.Dense(spec.num_classes, activation="softmax"),
            ]
        )

    before = _files(run_dir)
    with pytest.raises(backups.RestoreError, match="does not fit this model") as info:
        resume(run_dir, model=wider)
    _one_line(info.value)
    assert _files(run_dir) == before


def test_symlinks_in_or_to_a_run_directory_are_refused(tmp_path):
    run_dir = _stopped_run(tmp_path / "runs")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    (run_dir / "backup" / "planted").symlink_to(outside)
    with pytest.raises(directory.RunDirError, match="is a symlink") as info:
        resume(run_dir)
    _one_line(info.value)
    (run_dir / "backup" / "planted").unlink()
    link = tmp_path / "link"
    link.symlink_to(run_dir)
    with pytest.raises(directory.RunDirError, match="is a symlink"):
        resume(link)
    assert outside.read_text() == "keep me"


def test_a_second_resume_of_a_run_in_use_is_refused_and_the_lock_dies_with_its_process(tmp_path):
    run_dir = _stopped_run(tmp_path)
    assert records.load(run_dir).resumable
    with directory.locked(run_dir):
        assert directory.in_use(run_dir) and not records.load(run_dir).resumable
        with pytest.raises(directory.RunInUse, match=f"in use by process {os.getpid()}") as info:
            resume(run_dir)
        _one_line(info.value)
    code = (
        "import os, signal, sys; from tpukit.runs import directory, records; "
        "lock = directory.locked(sys.argv[1]); lock.__enter__(); os.kill(os.getpid(), signal.SIGKILL)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(run_dir)], env=ENV, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not directory.in_use(run_dir)
    assert resume(run_dir).status == "completed"


def test_a_completed_run_extends_into_a_new_directory_that_records_its_parent(tmp_path):
    first = train(RunConfig(**{**SMALL, "epochs": 2, "logdir": str(tmp_path / "a")}))
    direct = train(RunConfig(**{**SMALL, "epochs": 3, "logdir": str(tmp_path / "b")}))
    for epochs in (None, 2):
        with pytest.raises(directory.RunDirError, match=r"completed run \(2 epochs\).*epochs=N") as info:
            resume(first.run_dir, epochs=epochs)
        _one_line(info.value)
    extended = resume(first.run_dir, epochs=3)
    assert extended.run_dir != first.run_dir and extended.parent == first.run_dir
    assert extended.status == "completed" and extended.epochs_done == 3
    assert extended.fingerprint == direct.fingerprint
    assert extended.history["loss"] == pytest.approx(direct.history["loss"], rel=0, abs=0)
    assert records.load(first.run_dir).status == "completed"  # the parent is untouched
    assert not records.load(first.run_dir).resumable  # a completed run is extended, not resumed


def test_a_simulated_oom_ends_the_run_failed_with_what_to_change_and_keeps_its_directory(tmp_path):
    """A callback raises TensorFlow's own out-of-memory error, as a device that runs out does."""
    import tensorflow as tf

    from tpukit.models.memory import OutOfMemory

    def simulated_oom():
        raise tf.errors.ResourceExhaustedError(
            None,
            None,
            "OOM when allocating tensor with shape[32,256000] and "
            "type float on /job:localhost/replica:0/task:0/device:GPU:0\nmore",
        )

    config = RunConfig(**{**SMALL, "logdir": str(tmp_path)})
    with pytest.raises(OutOfMemory) as info:
        train(config, callbacks=[CallAt(3, simulated_oom)])
    (run_dir,) = tmp_path.iterdir()
    result = records.load(run_dir)
    assert result.status == "failed" and str(info.value) == result.message
    assert result.message.startswith(
        "the device ran out of memory: try remat=True, a smaller batch_size with "
        "gradient_accumulation (the same examples per update), or a shorter "
        "sequence_length (ResourceExhaustedError: OOM when allocating tensor"
    ), result.message
    assert "\n" not in result.message and not directory.in_use(run_dir)
    assert isinstance(info.value.__cause__, tf.errors.ResourceExhaustedError)


def test_a_stopped_run_keeps_its_epochs(tmp_path):
    run_dir = _stopped_run(tmp_path)
    with pytest.raises(directory.RunDirError, match="epochs= extends only completed runs"):
        resume(run_dir, epochs=5)


def test_a_failure_after_the_run_directory_exists_ends_failed_with_one_line(tmp_path):
    def boom():
        raise RuntimeError("the user's callback broke\nsecond line")

    config = RunConfig(**{**SMALL, "logdir": str(tmp_path)})
    with pytest.raises(RuntimeError, match="callback broke"):
        train(config, callbacks=[CallAt(3, boom)])
    (run_dir,) = tmp_path.iterdir()
    result = records.load(run_dir)
    assert result.status == "failed" and result.message == "RuntimeError: the user's callback broke"
    assert not directory.in_use(run_dir)


def test_a_profile_window_beyond_the_run_is_refused_before_any_directory(tmp_path):
    config = RunConfig(**{**SMALL, "epochs": 1, "profile": (60, 62), "logdir": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"the run has 40 steps .* never reached") as info:
        train(config)
    _one_line(info.value)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


# ---- a full disk -------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 5 MB tmpfs, where this machine lets the test mount one (root, in a container that allows it)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here to fill ({proc.stderr.strip() or 'mount failed'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _wide(spec):
    """About 3.6 MB of weights and Adam state: one backup fits on the small disk, a second does not."""
    return keras.Sequential(
        [
            keras.Input(spec.input_shape),
            keras.layers.Flatten(),
            keras.layers.Dense(4000, activation="relu"),
            keras.layers.Dense(spec.num_classes, activation="softmax"),
        ]
    )


def test_a_full_disk_is_one_line_keeps_the_last_backup_and_resumes_once_freed(tmp_path, small_disk):
    config = RunConfig(**{**SMALL, "batch_size": 64, "logdir": str(small_disk / "runs")})
    with pytest.raises(backups.BackupError, match="the disk is full; the backup of epoch 1 is kept") as info:
        train(config, model=_wide)
    _one_line(info.value)
    (run_dir,) = (small_disk / "runs").iterdir()
    failed = records.load(run_dir)
    assert failed.status == "failed" and "disk is full" in failed.message and failed.epochs_done == 1
    subprocess.run(["mount", "-o", "remount,size=40m", str(small_disk)], check=True)
    resumed = resume(run_dir, model=_wide)
    direct = train(config.replace(logdir=str(tmp_path / "direct")), model=_wide)
    assert resumed.status == "completed" and resumed.fingerprint == direct.fingerprint


def test_a_read_only_logdir_is_one_line_before_any_work(tmp_path):
    """Root writes through file permissions, so a read-only mount stands in for a read-only disk."""
    mount = tmp_path / "ro"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here ({proc.stderr.strip() or 'mount failed'})")
    try:
        with pytest.raises(
            directory.RunDirError, match=r"is not a writable directory \(Read-only file system\)"
        ) as info:
            train(RunConfig(**{**SMALL, "logdir": str(mount / "runs")}))
        _one_line(info.value)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.parametrize("precision, blamed", [("float32", None), ("mixed_bfloat16", "bfloat16")])
def test_a_nan_loss_ends_failed_and_blames_the_learning_rate_first(tmp_path, precision, blamed):
    """A float32 run that diverges is not blamed on 16-bit types; a 16-bit one names its type after the rate."""
    config = RunConfig(
        **{
            **SMALL,
            "logdir": str(tmp_path),
            "optimizer": "sgd",
            "learning_rate": 1e12,
            "precision": precision,
            "replicas": 1,
        }
    )
    result = train(config)
    assert result.status == "failed" and result.message.startswith("loss became NaN at step ")
    assert "learning rate 1000000000000.0 may be too high" in result.message
    assert ("float16" not in result.message) if blamed is None else (blamed in result.message)
    assert "\n" not in result.message
