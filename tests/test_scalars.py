"""tpukit's own TensorBoard event writer (for runtimes without TensorFlow), read back by TensorBoard's reader."""

import numpy as np

from tpukit import scalars


def test_crc32c_matches_the_standard_check_value():
    assert scalars._crc32c(b"123456789") == 0xE3069283  # the CRC-32C (Castagnoli) check value


def test_a_real_fit_writes_scalars_tensorboard_reads(tmp_path):
    import keras
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x, y = np.random.default_rng(0).normal(size=(64, 4)).astype("float32"), np.arange(64) % 2
    history = model.fit(x, y, validation_data=(x, y), epochs=3, verbose=0,
                        callbacks=[scalars.EpochScalars(str(tmp_path))])
    for run, prefix in (("train", ""), ("validation", "val_")):
        acc = EventAccumulator(str(tmp_path / run))
        acc.Reload()
        assert set(acc.Tags()["scalars"]) == {"epoch_loss", "epoch_accuracy"}
        loss = acc.Scalars("epoch_loss")
        assert [e.step for e in loss] == [0, 1, 2]
        assert np.allclose([e.value for e in loss], history.history[prefix + "loss"], rtol=1e-6)
