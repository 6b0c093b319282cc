"""Epoch backups as state files (tpukit.runs.model_state): exact round trips, refusals in one line, older runs' backups."""

import json
import threading
from pathlib import Path

import keras
import numpy as np
import pytest

from tpukit.config import RunConfig
from tpukit.runs import backups, directory, model_state
from tpukit.training.api import resume, train
from run_support import CallAt


def _net(units=16, dtype=None):
    inputs = keras.Input((6,))
    h = keras.layers.Dense(units, activation="relu", dtype=dtype)(inputs)
    h = keras.layers.BatchNormalization()(h)
    h = keras.layers.Dropout(0.2)(h)
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax", dtype="float32")(h))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    return model


def _trained(**kwargs):
    rng = np.random.default_rng(0)
    model = _net(**kwargs)
    model.fit(rng.normal(size=(64, 6)).astype("float32"), np.arange(64) % 3, epochs=2, batch_size=16, verbose=0)
    return model


def _values(model):
    return [keras.ops.convert_to_numpy(v) for v in list(model.weights) + list(model.optimizer.variables)]


def _fresh(**kwargs):
    model = _net(**kwargs)
    model.optimizer.build(model.trainable_variables)
    return model


@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_weights_and_optimizer_state_round_trip_bit_for_bit(tmp_path, dtype):
    trained = _trained(dtype=dtype)
    taken = model_state.take(trained)
    path = tmp_path / f"epoch{directory.STATE_SUFFIX}"
    taken.save(str(path))
    assert model_state.is_state_file(path) and taken.nbytes == sum(a.nbytes for a in _values(trained))
    target = _fresh(dtype=dtype)
    model_state.restore(target, path)
    for saved, restored in zip(_values(trained), _values(target), strict=True):
        assert saved.dtype == restored.dtype and saved.tobytes() == restored.tobytes()
    assert int(keras.ops.convert_to_numpy(target.optimizer.iterations)) == 8  # the optimizer's step came back too


def test_weights_alone_load_into_a_model_without_an_optimizer(tmp_path):
    trained = _trained()
    path = tmp_path / f"e{directory.STATE_SUFFIX}"
    model_state.take(trained).save(str(path))
    target = _net()
    model_state.restore(target, path, optimizer=False)
    assert all(np.array_equal(a, keras.ops.convert_to_numpy(b)) for a, b in zip(
        [keras.ops.convert_to_numpy(v) for v in trained.weights], target.weights, strict=True))


def test_a_file_of_another_model_is_refused_in_one_line_and_changes_nothing(tmp_path):
    path = tmp_path / f"e{directory.STATE_SUFFIX}"
    model_state.take(_trained()).save(str(path))
    target = _fresh(units=8)
    before = _values(target)
    with pytest.raises(model_state.StateMismatch, match=r"is float32 \(6, 16\) there, .* is float32 \(6, 8\) here"):
        model_state.restore(target, path)
    assert all(np.array_equal(a, b) for a, b in zip(before, _values(target)))


def test_a_torn_file_is_refused_as_unreadable(tmp_path):
    path = tmp_path / f"e{directory.STATE_SUFFIX}"
    model_state.take(_trained()).save(str(path))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(model_state.StateMismatch, match="cannot be read") as info:
        model_state.restore(_fresh(), path)
    assert "\n" not in str(info.value)


SMALL = dict(dataset="digits", model="mlp", epochs=3, batch_size=32, deterministic=True, precision="float32",
             steps_per_execution=1)


def test_a_run_backed_up_by_an_older_tpukit_in_keras_format_resumes_exactly(tmp_path):
    """Runs written before state files back up with Keras' save_weights; the marker names that file."""
    reference = train(RunConfig(**SMALL, logdir=str(tmp_path / "alone")))
    stop = threading.Event()
    stopped = train(RunConfig(**SMALL, logdir=str(tmp_path / "old")), stop=stop, callbacks=[CallAt(70, stop.set)])
    assert stopped.status == "stopped" and stopped.epochs_done == 1
    backup_dir = Path(stopped.run_dir, directory.BACKUP_DIR)
    kept = backups.latest(backup_dir)
    assert kept.path.name == backups.weights_name(1) and model_state.is_state_file(kept.path)
    # Rewrite the backup as the older tpukit did: the same state through Keras' save_weights, named by the marker.
    from tpukit.models import zoo

    model = zoo.build("mlp", input_shape=(8, 8, 1), num_classes=10)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    model.optimizer.build(model.trainable_variables)
    model_state.restore(model, kept.path)
    old = backup_dir / "epoch-000001.weights.h5"
    model.save_weights(str(old))
    kept.path.unlink()
    directory.write_json(backup_dir / backups.MARKER, {"epochs_done": 1, "file": old.name, "bytes": old.stat().st_size,
                                                       "sha256": backups._digest(old)[1]})
    resumed = resume(stopped.run_dir)
    assert resumed.status == "completed" and resumed.fingerprint == reference.fingerprint
    assert json.loads(Path(resumed.run_dir, directory.RESULT_FILE).read_text())["status"] == "completed"
