"""The TPU tiling note: hidden Dense widths that XLA pads to 128 lanes, for any Keras model."""

import dataclasses

import numpy as np
import pytest

import keras
import tpukit
from tpukit.models import tiling


def test_hidden_widths_off_128_are_named_and_outputs_left_out():
    model = keras.Sequential(
        [keras.Input((20,)), keras.layers.Dense(100), keras.layers.Dense(256), keras.layers.Dense(10)]
    )
    assert tiling.padded_features(model) == [(model.layers[0].name, 100, 128)]
    assert "100->128" in tiling.note(model) and "10->" not in tiling.note(model)
    inputs = keras.Input((4,))
    wide = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(384)(inputs)))
    assert tiling.padded_features(wide) == [] and tiling.note(wide) == ""


def test_a_subclassed_model_without_known_outputs_keeps_its_last_layer_out():
    class Two(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden, self.head = keras.layers.Dense(50), keras.layers.Dense(2)

        def call(self, x):
            return self.head(self.hidden(x))

    model = Two()
    model(np.zeros((1, 4), "float32"))
    assert [(w, p) for _, w, p in tiling.padded_features(model)] == [(50, 128)]


def test_a_run_on_a_fake_tpu_notes_the_padded_widths_of_the_users_model(tmp_path):
    runtime = dataclasses.replace(tpukit.connect(accelerator="cpu"), kind="tpu")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(100, activation="relu"), keras.layers.Dense(2)])
    x, y = np.random.default_rng(0).normal(size=(64, 4)).astype("float32"), np.arange(64) % 2
    config = tpukit.RunConfig(epochs=1, batch_size=16, precision="float32", logdir=str(tmp_path), validation_split=None)
    with pytest.warns(tpukit.PaddingWarning) as said:  # accelerator "auto": said once the TPU is known
        result = tpukit.train(config.replace(batch_size=12), runtime, model=model, data=(x, y))
    assert [str(w.message)[:40] for w in said if w.category is tpukit.PaddingWarning] == [
        "batch_size=12 per replica is not a multi"
    ]
    assert any(n.startswith("tiling:") and "100->128" in n for n in result.notes), result.notes
    on_cpu = tpukit.train(config, model=model, data=(x, y))
    assert not any(n.startswith("tiling:") for n in on_cpu.notes)
