"""Datasets by name and the input pipeline, on real TensorFlow (no mocks, no network)."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tpukit.data import builtin as data

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _batches(dataset):
    return [(x.numpy(), y.numpy()) for x, y in dataset]


def _same(a, b):
    return len(a) == len(b) and all(
        np.array_equal(xa, xb) and np.array_equal(ya, yb) for (xa, ya), (xb, yb) in zip(a, b)
    )


@pytest.fixture(scope="module")
def digits96():
    """96 digits: three batches of 32 per epoch, nothing dropped."""
    return data.load("digits", size=96)


# ---- the table and importing -----------------------------------------------


def test_import_does_not_load_tensorflow():
    code = (
        "import sys, tpukit.data.builtin; "
        "assert not {'tensorflow', 'keras', 'sklearn', 'mlxtend'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})


def test_every_name_has_info():
    assert data.DATASETS == data.OFFLINE_DATASETS + data.ONLINE_DATASETS
    for name in data.DATASETS:
        assert data.info(name).name == name
        assert data.info(name).offline == (name in data.OFFLINE_DATASETS)


def test_unknown_name_lists_the_choices():
    with pytest.raises(ValueError, match=r"Unknown dataset 'imagenet'.*mnist5k, digits, shapes"):
        data.load("imagenet")


def test_bad_size_is_rejected():
    with pytest.raises(ValueError, match=r"Received: size=0\."):
        data.load("digits", size=0)


# ---- offline datasets ----------------------------------------------------------


@pytest.mark.parametrize("name", data.OFFLINE_DATASETS)
def test_offline_dataset_matches_its_info(name):
    loaded = data.load(name)
    table = data.info(name)
    assert loaded.info == table
    assert loaded.num_train == table.num_train == data.train_size(name)
    assert loaded.num_test == table.num_test
    assert loaded.x_train.shape == (table.num_train, *table.image_shape)
    assert loaded.x_test.shape == (table.num_test, *table.image_shape)
    assert loaded.x_train.dtype == loaded.x_test.dtype == np.uint8
    assert loaded.y_train.dtype == loaded.y_test.dtype == np.int32
    assert loaded.y_train.shape == (table.num_train,)
    assert set(np.unique(loaded.y_train)) == set(range(table.num_classes))
    assert loaded.x_train.max() > 200  # scaled to 0..255, not left at 0..16 or 0..1


def test_real_split_is_fixed_whatever_the_seed():
    a, b = data.load("mnist5k", seed=0), data.load("mnist5k", seed=7)
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)
    # The bundled rows are sorted by label; the split must not be.
    assert len(np.unique(a.y_train[:100])) == 10


def test_size_takes_the_head_of_a_real_split():
    full, small = data.load("digits"), data.load("digits", size=100)
    assert small.num_train == 100 and small.info.num_train == 1437
    assert np.array_equal(small.x_train, full.x_train[:100])
    assert np.array_equal(small.x_test, full.x_test)
    assert data.load("digits", size=10**6).num_train == 1437


def test_size_sets_the_generated_count():
    shapes = data.load("shapes", size=300)
    assert shapes.num_train == 300 == data.train_size("shapes", 300)
    assert shapes.num_test == 256
    assert shapes.x_train.shape[1:] == (32, 32, 3)


def test_shapes_is_a_function_of_seed_and_size():
    a, b = data.load("shapes", size=200, seed=1), data.load("shapes", size=200, seed=1)
    c = data.load("shapes", size=200, seed=2)
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_train, b.y_train)
    assert np.array_equal(a.x_test, b.x_test)
    assert not np.array_equal(a.x_train, c.x_train)
    assert not np.array_equal(a.x_test, c.x_test)
    assert set(np.unique(a.y_train)) == set(range(len(data.SHAPE_CLASSES)))


def test_loaded_arrays_are_read_only():
    loaded = data.load("digits")
    with pytest.raises(ValueError):
        loaded.x_train[0, 0, 0, 0] = 1


# ---- online datasets -------------------------------------------------------------


@pytest.mark.parametrize("name", data.ONLINE_DATASETS)
def test_online_dataset_fails_fast_when_offline(name):
    if data.cached(name) or data.reachable(data._KERAS_HOSTS[name], timeout=1):
        pytest.skip(f"{name} is cached or the network is up")
    start = time.monotonic()
    with pytest.raises(data.DatasetUnavailable) as raised:
        data.load(name)
    assert time.monotonic() - start < 10
    message = str(raised.value)
    assert "\n" not in message and f"name={name!r}" in message
    assert all(offline in message for offline in data.OFFLINE_DATASETS)


def test_cached_looks_where_keras_saves(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    if data.cached("mnist"):  # also cached under /tmp/.keras on this machine
        pytest.skip("mnist is cached under /tmp/.keras")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "mnist.npz").write_bytes(b"")
    assert data.cached("mnist")


# ---- the training pipeline ---------------------------------------------------------


def test_train_dataset_elements_are_uint8_with_static_shapes(digits96):
    import tensorflow as tf

    dataset = data.train_dataset(digits96, global_batch=32, seed=0, epochs=2)
    images, labels = dataset.element_spec
    assert images.shape == (32, 8, 8, 1) and images.dtype == tf.uint8
    assert labels.shape == (32,) and labels.dtype == tf.int32
    assert len(_batches(dataset)) == 2 * data.steps_per_epoch(digits96, 32) == 6
    options = dataset.options()
    assert options.deterministic is True
    assert options.experimental_distribute.auto_shard_policy == tf.data.experimental.AutoShardPolicy.DATA


def test_each_epoch_is_a_new_permutation(digits96):
    stream = _batches(data.train_dataset(digits96, global_batch=32, seed=0, epochs=2))
    epochs = [np.concatenate([y for _, y in stream[i : i + 3]]) for i in (0, 3)]
    for labels in epochs:
        assert np.array_equal(np.sort(labels), np.sort(digits96.y_train))
    assert not np.array_equal(epochs[0], epochs[1])


def test_resume_sees_the_tail_of_the_full_stream(digits96):
    full = _batches(data.train_dataset(digits96, global_batch=32, seed=5, epochs=4))
    resumed = _batches(data.train_dataset(digits96, global_batch=32, seed=5, epochs=4, initial_epoch=2))
    assert _same(resumed, full[6:])


def test_order_depends_on_seed_and_epoch_only(digits96):
    """Not on TensorFlow's global seed (a global seed of 0 used to break tensor seeds)."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    previous = context.global_seed()
    try:
        streams = []
        for global_seed in (0, 123):
            tf.random.set_seed(global_seed)
            streams.append(_batches(data.train_dataset(digits96, global_batch=32, seed=5, epochs=2)))
    finally:
        tf.random.set_seed(previous)
    assert _same(*streams)
    other = _batches(data.train_dataset(digits96, global_batch=32, seed=6, epochs=2))
    assert not _same(streams[0], other)


def test_partial_batches_are_dropped():
    small = data.load("digits", size=100)
    assert data.steps_per_epoch(small, 32) == 3
    assert len(_batches(data.train_dataset(small, global_batch=32, seed=0, epochs=1))) == 3


@pytest.mark.parametrize(
    "kwargs, received",
    [
        ({"global_batch": 0}, "global_batch=0"),
        ({"global_batch": 97}, "global_batch=97"),
        ({"epochs": 2, "initial_epoch": 3}, "initial_epoch=3"),
    ],
)
def test_train_dataset_rejects_bad_arguments(digits96, kwargs, received):
    args = {"global_batch": 32, "seed": 0, "epochs": 1, **kwargs}
    with pytest.raises(ValueError, match=f"Received: {received}"):
        data.train_dataset(digits96, **args)


def test_eval_dataset_has_static_batches(digits96):
    dataset = data.eval_dataset(digits96, global_batch=64)
    assert tuple(dataset.element_spec[0].shape) == (64, 8, 8, 1)
    assert len(_batches(dataset)) == 360 // 64
    whole = data.eval_dataset(digits96, global_batch=1000)
    assert tuple(whole.element_spec[0].shape) == (360, 8, 8, 1)
    assert _same(_batches(whole), [(digits96.x_test, digits96.y_test)])


def test_steps_per_epoch_fixes_each_epochs_length_and_keeps_resume_exact():
    from tpukit.data import builtin as data

    digits = data.load("digits")
    per_pass = data.steps_per_epoch(digits, 256)  # 5 batches in one pass

    def labels(ds):
        return [b[1].numpy().tolist() for b in ds]

    full = labels(data.train_dataset(digits, global_batch=256, seed=3, epochs=3, steps_per_epoch=7))
    assert len(full) == 21
    assert full[5:7] == full[0:2]  # an epoch longer than one pass repeats that epoch's order
    tail = labels(data.train_dataset(digits, global_batch=256, seed=3, epochs=3, initial_epoch=1, steps_per_epoch=7))
    assert tail == full[7:]
    short = labels(data.train_dataset(digits, global_batch=256, seed=3, epochs=2, steps_per_epoch=2))
    assert short == full[0:2] + full[7:9] and per_pass == 5


def test_the_private_tf_data_link_tpukit_reads_is_still_there():
    """tf.data has no public "is this batched?": tpukit reads `_input_dataset` (docs/decisions.md lists it). On a
    TensorFlow without it, `_input_dataset_attribute` raises one line; this test fails first, on the upgrade."""
    pytest.importorskip("tensorflow")
    import tensorflow as tf

    from tpukit.data import dataset_objects

    assert dataset_objects._input_dataset_attribute() == "_input_dataset"
    assert dataset_objects.is_batched(tf.data.Dataset.range(8).batch(2).map(lambda x: x))
    assert not dataset_objects.is_batched(tf.data.Dataset.range(8).batch(2).unbatch().map(lambda x: x))


def test_the_array_pipelines_run_without_tf_data_autotuning_and_a_users_stream_keeps_it():
    """With autotuning on, destroying an iterator waits for tf.data's model thread to end its sleep (0-1.6 s at
    random at the end of fit, of each validation and of the test evaluation); arrays have nothing to tune."""
    import tensorflow as tf

    from tpukit.data import pipeline
    from tpukit.data.types import Arrays, Stream

    part = Arrays(np.zeros((64, 3), "float32"), np.arange(64) % 2)
    train = pipeline.train_feed(part, feeder="tf.data", global_batch=8, seed=1, epochs=2)
    test = pipeline.eval_feed(part, feeder="tf.data", global_batch=8)
    assert train.options().autotune.enabled is False and test.options().autotune.enabled is False
    assert len(list(train)) == 16 and len(list(test)) == 8  # AUTOTUNE's map and prefetch still run
    stream = Stream(tf.data.Dataset.from_tensor_slices((part.x, part.y)), count=64)
    streamed = pipeline.train_feed(stream, feeder="tf.data", global_batch=8, seed=1, epochs=1)
    assert streamed.options().autotune.enabled is not False  # unset: tf.data's default, on


def test_the_split_holds_out_as_many_as_keras_validation_split():
    """A Keras user moving from fit(validation_split=f) keeps the same number of validation examples."""
    from keras.src.trainers.data_adapters import array_slicing

    from tpukit.data.sources import validation_count

    for n in (11, 100, 1000, 1011, 2999):
        for fraction in (0.1, 0.15, 0.2, 0.3):
            _, (held,) = array_slicing.train_validation_split((np.zeros((n, 1)),), validation_split=fraction)
            assert validation_count(n, fraction) == len(held), (n, fraction)
