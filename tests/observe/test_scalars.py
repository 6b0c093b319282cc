"""tpukit's TensorBoard scalars (tensorboardX, on both backends), read back by TensorBoard's own reader."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from tpukit.observe import scalars

FIT = """
import keras, numpy as np
from tpukit.observe import scalars
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer=keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
x, y = np.random.default_rng(0).normal(size=(64, 4)).astype("float32"), np.arange(64) % 2
history = model.fit(x, y, validation_data=(x, y), epochs=3, verbose=0, callbacks=[scalars.EpochScalars(LOGDIR)])
"""


def _read(run_dir):
    """{tag: [(step, value), ...]} as TensorBoard's EventAccumulator reads `run_dir`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _check(logdir, history):
    for run, prefix in (("train", ""), ("validation", "val_")):
        found = _read(os.path.join(logdir, run))
        expected = {"epoch_loss", "epoch_accuracy"} | ({"epoch_learning_rate"} if run == "train" else set())
        assert set(found) == expected, (run, found)
        for name in ("loss", "accuracy"):
            steps, values = zip(*found[f"epoch_{name}"])
            assert steps == (0, 1, 2)
            assert np.allclose(values, history[prefix + name], rtol=1e-6)
        if run == "train":
            assert np.allclose([v for _, v in found["epoch_learning_rate"]], 0.05)


def test_a_real_fit_writes_scalars_tensorboard_reads(tmp_path):
    namespace = {"LOGDIR": str(tmp_path)}
    exec(FIT, namespace)  # this process's backend: TensorFlow
    _check(tmp_path, namespace["history"].history)


def test_on_jax_without_importing_tensorflow_or_tensorboard(tmp_path):
    pytest.importorskip("jax")
    code = (
        f"LOGDIR = {str(tmp_path)!r}\n" + FIT + "import sys, json\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'tensorboard'})\n"
        "print(json.dumps({'history': history.history, 'loaded': loaded, 'backend': keras.backend.backend()}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["backend"] == "jax" and out["loaded"] == []
    _check(tmp_path, out["history"])


def test_training_writes_them_with_tensorflow_installed(tmp_path):
    """One writer on both backends: tpukit.train on TensorFlow writes through EpochScalars too."""
    from tpukit.training import run

    assert isinstance(run._scalar_writer(str(tmp_path)), scalars.EpochScalars)


def test_an_epoch_reaches_the_disk_before_training_ends(tmp_path):
    """A live TensorBoard sees each epoch within tensorboardX's flush interval, not only at the end."""
    import time

    writer = scalars.EpochScalars(str(tmp_path))
    try:
        writer.on_epoch_end(0, {"loss": 0.5, "val_loss": 0.7})
        deadline = time.monotonic() + scalars.FLUSH_S + 5
        while time.monotonic() < deadline and not _read(tmp_path / "validation"):
            time.sleep(0.1)
        assert _read(tmp_path / "train")["epoch_loss"] == [(0, 0.5)]
        assert _read(tmp_path / "validation")["epoch_loss"] == [(0, pytest.approx(0.7))]
    finally:
        writer.close()


def test_values_that_are_not_numbers_are_skipped(tmp_path):
    writer = scalars.EpochScalars(str(tmp_path))
    writer.on_epoch_end(0, {"loss": 1.0, "note": "text", "none": None})
    writer.on_train_end()
    assert set(_read(tmp_path / "train")) == {"epoch_loss"}  # no model: no learning rate either
    assert not (tmp_path / "validation").exists()  # nothing to write: no file


def test_the_writer_imports_no_cloud_clients_or_torch_and_leaves_them_importable(tmp_path):
    """tensorboardX imports google-cloud-storage, boto3 and torch when they are installed (0.15-0.3 s, seconds for
    torch, while the first step compiles); a run needs none of them, and the user can still import each after."""
    fake = tmp_path / "site"
    fake.mkdir()
    for name in ("torch", "boto3"):  # stand-ins that say when they are imported
        (fake / f"{name}.py").write_text("import sys\nsys.stderr.write('imported %s\\n' % __name__)\nTensor = object\n")
    code = (
        f"LOGDIR = {str(tmp_path / 'logs')!r}\n" + FIT + "import sys, json, importlib.util\n"
        "during = sorted(m for m in ('torch', 'boto3', 'google.cloud.storage') if m in sys.modules)\n"
        "import torch, boto3\n"
        "gcs = importlib.util.find_spec('google.cloud') is not None and "
        "importlib.util.find_spec('google.cloud.storage') is not None\n"
        "if gcs:\n    import google.cloud.storage\n"
        "print(json.dumps({'during': during, 'gcs': gcs, 'writer': 'tensorboardX' in sys.modules}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        env={
            **os.environ,
            "KERAS_BACKEND": "jax" if _has_jax() else "tensorflow",
            "PYTHONPATH": os.pathsep.join([str(REPO), str(fake)]),
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["writer"] and out["during"] == []
    assert proc.stderr.count("imported torch") == 1 and proc.stderr.count("imported boto3") == 1  # the user's own
    assert [step for step, _ in _read(tmp_path / "logs" / "train")["epoch_loss"]] == [0, 1, 2]


def _has_jax():
    import importlib.util

    return importlib.util.find_spec("jax") is not None
