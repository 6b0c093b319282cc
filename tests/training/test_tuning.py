"""tune_batch_size: real trials on the CPU, with the user's model, the zoo, simulated replicas and a memory wall."""

import dataclasses
import re

import keras
import pytest

import tpukit
from tpukit.training import tuning
from tpukit.config import ConfigError, RunConfig


def test_candidates_are_multiples_that_double_up_to_the_limit():
    assert tuning.candidates(8, 8, 100) == [8, 16, 32, 64]
    assert tuning.candidates(8, 20, 100) == [24, 48, 96]
    assert tuning.candidates(128, 1, 1000) == [128, 256, 512]
    assert tuning.candidates(128, 1, 100) == []


def test_the_limit_keeps_enough_steps_per_epoch_unless_the_data_is_tiny():
    assert tuning._limit(1437, 1, 8, None) == (
        89,
        "an epoch of the 1,437 training examples would have fewer than 16 steps",
    )
    assert tuning._limit(1437, 1, 8, 32) == (32, "it would exceed max_batch_size=32")
    assert tuning._limit(1437, 4, 128, None) == (359, "one global batch would exceed the 1,437 training examples")


def test_the_search_stops_before_an_epoch_gets_too_few_steps(tmp_path):
    """digits once got 1024 recommended: one step per epoch, fast and useless."""
    config = RunConfig(model="mlp", dataset="digits", precision="float32", logdir=str(tmp_path))
    calls = []
    result = tpukit.tune_batch_size(
        config,
        min_gain=None,
        warmup_steps=1,
        steps=2,
        on_trial=lambda trials, trying: calls.append(([t.batch_size for t in trials], trying)),
    )
    sizes = [t.batch_size for t in result.trials]
    assert calls == [(sizes[:i], size) for i, size in enumerate(sizes)]  # progress: before each size, what came before
    examples = int(re.search(r"of the ([\d,]+) training examples", result.reason).group(1).replace(",", ""))
    biggest = result.trials[-1].batch_size
    assert examples // biggest >= tuning.MIN_STEPS_PER_EPOCH > examples // (2 * biggest), result.reason
    assert f"at {2 * biggest} per replica an epoch" in result.reason
    assert (
        repr(result) == f"BatchTuning(recommended={result.recommended}, tried={[t.batch_size for t in result.trials]})"
    )


def _check_sane(tuning_result, multiple=8):
    measured = [t for t in tuning_result.trials if t.outcome == "measured"]
    assert len(measured) >= 2
    assert all(t.batch_size % multiple == 0 and t.examples_per_sec > 0 and t.step_time_ms > 0 for t in measured)
    assert [t.batch_size for t in tuning_result.trials] == sorted(t.batch_size for t in tuning_result.trials)
    assert tuning_result.recommended in [t.batch_size for t in measured]
    assert tuning_result.reason.startswith(f"Recommended: batch_size={tuning_result.recommended} per replica")
    assert "<- recommended" in tuning_result.table()


@pytest.mark.parametrize("model, dataset, size", [("mlp", "digits", None), ("cnn", "mnist5k", 1024)])
def test_the_zoo_gets_a_sane_table_and_nothing_is_written(tmp_path, model, dataset, size):
    config = RunConfig(
        model=model, dataset=dataset, dataset_size=size, precision="float32", logdir=str(tmp_path / "runs")
    )
    result = tpukit.tune_batch_size(config, max_batch_size=256)
    _check_sane(result)
    assert max(t.batch_size for t in result.trials) <= 256
    assert not (tmp_path / "runs").exists()


def test_with_simulated_replicas_the_global_batch_grows_with_them(tmp_path):
    config = RunConfig(model="mlp", dataset="digits", replicas=4, precision="float32", logdir=str(tmp_path))
    result = tpukit.tune_batch_size(config, max_batch_size=64)
    _check_sane(result)
    assert all(t.global_batch_size == 4 * t.batch_size for t in result.trials)


class _MemoryWall(keras.layers.Layer):
    """Stands in for an accelerator's memory: a batch above 32 raises MemoryError when traced (no TPU here)."""

    def call(self, x):
        if x.shape[0] is not None and x.shape[0] > 32:
            raise MemoryError(f"cannot allocate a batch of {x.shape[0]}")
        return x


def _walled(spec):
    return keras.Sequential(
        [
            keras.Input(spec.input_shape),
            keras.layers.Flatten(),
            _MemoryWall(),
            keras.layers.Dense(spec.num_classes, activation="softmax"),
        ]
    )


def test_out_of_memory_ends_the_search_and_training_goes_on(tmp_path):
    config = RunConfig(dataset="digits", precision="float32", epochs=1, logdir=str(tmp_path))
    result = tpukit.tune_batch_size(config, model=_walled, min_gain=None)  # only the wall stops it
    assert [(t.batch_size, t.outcome) for t in result.trials] == [
        (8, "measured"),
        (16, "measured"),
        (32, "measured"),
        (64, "out of memory"),
    ]
    assert result.trials[-1].examples_per_sec is None
    assert result.recommended in (8, 16, 32) and "64 per replica ran out of memory" in result.reason
    assert tpukit.train(config.replace(batch_size=result.recommended), model=_walled).status == "completed"


def test_bad_arguments_are_refused_in_one_line():
    for kwargs, text in (({"min_gain": 1.5}, "min_gain must be a fraction"), ({"steps": 1}, "steps must be")):
        with pytest.raises(ConfigError, match=text):
            tpukit.tune_batch_size(RunConfig(dataset="digits", model="mlp"), **kwargs)


def test_batched_data_is_refused_in_one_line():
    import tensorflow as tf

    batched = tf.data.Dataset.from_tensor_slices(([[1.0]] * 64, [0] * 64)).batch(8)
    with pytest.raises(ConfigError, match="already batched"):
        tpukit.tune_batch_size(RunConfig(), data=batched)


def test_a_gain_within_the_measurements_noise_is_no_gain():
    """On a shared CPU a few steps vary: 12% faster with step times this spread is chance, so the smaller batch
    stays recommended, and the reason says how noisy the trials were."""
    from tpukit.training.tuning import BatchTrial, _recommend, step_noise

    steady, shaky = [0.1 * i for i in range(6)], [0.0, 0.08, 0.2, 0.26, 0.4, 0.45]
    assert step_noise(steady) == pytest.approx(0.0, abs=1e-9) and step_noise(shaky) == pytest.approx(0.19, abs=0.01)
    assert step_noise([0.0, 0.1]) is None  # one step says nothing of its spread
    trials = (BatchTrial(8, 8, 1000.0, 8.0, noise=0.06), BatchTrial(16, 16, 1120.0, 14.3, noise=0.05))
    noisy = _recommend(trials, 0.05, 1, 64, "the limit", False)
    assert noisy.recommended == 8 and "within 12% of the fastest" in noisy.reason
    assert "differ by up to about 12% by chance, so smaller gains count as none" in noisy.reason
    quiet = _recommend(tuple(dataclasses.replace(t, noise=0.01) for t in trials), 0.05, 1, 64, "the limit", False)
    assert quiet.recommended == 16 and "so smaller gains" not in quiet.reason
