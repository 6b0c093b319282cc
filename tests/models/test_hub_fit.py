"""`hub_fit.KerasFit`: a KerasHub task trained by Keras' own fit, its validation by Keras' own evaluate, with nothing
assigned on the user's model.

KerasHub 0.26 (Colab's CPU/GPU runtime) overrides its tasks' `evaluate`; here KerasHub is 0.32, which does not, so a
task class that overrides it is simulated (a keras.Model whose evaluate raises, as 0.26's does on JAX); the Colab CPU
set's tests run the real one (tests/behaviour/test_colab_sets.py).
"""

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from tpukit.models import hub_fit  # noqa: E402


class OverridingTask(keras.Model):
    """A functional model whose class replaces evaluate, as KerasHub 0.26's Task does (it re-preprocesses)."""

    def evaluate(self, *args, **kwargs):
        raise RuntimeError("the task's own evaluate ran: tf.data preprocessing again")


def _task(seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    model = OverridingTask(inputs, keras.layers.Dense(3)(inputs))
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _data(n, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 4)).astype("float32"), rng.integers(0, 3, n)


class Seen(keras.callbacks.Callback):
    """What a user's callback after tpukit's sees at each epoch's end (EarlyStopping reads val_loss there)."""

    def __init__(self):
        super().__init__()
        self.logs = []

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append(dict(logs))


def test_fit_validates_with_keras_evaluate_where_the_task_overrides_it_simulated():
    model, seen = _task(), Seen()
    trainer = hub_fit.KerasFit(model)
    assert trainer.overrides_evaluate
    history = trainer.fit(
        *_data(32, 1), validation_data=_data(16, 2), epochs=2, batch_size=8, callbacks=[seen], verbose=0
    )
    assert sorted(history.history) == ["loss", "val_loss"]
    assert [sorted(logs) for logs in seen.logs] == [["loss", "val_loss"]] * 2
    expected = keras.Model.evaluate(model, *_data(16, 2), verbose=0, return_dict=True)["loss"]
    assert history.history["val_loss"][-1] == pytest.approx(expected, rel=1e-6)


def test_validation_freq_is_kept_as_fit_keeps_it_simulated():
    history = hub_fit.KerasFit(_task()).fit(
        *_data(32, 1), validation_data=_data(16, 2), validation_freq=2, epochs=4, batch_size=8, verbose=0
    )
    assert len(history.history["loss"]) == 4 and len(history.history["val_loss"]) == 2


@pytest.mark.parametrize("raised", [RuntimeError, KeyboardInterrupt])
def test_an_exception_inside_fit_leaves_the_models_attributes_as_they_were_simulated(raised):
    """What Keras' own fit leaves on a model that fails the same way, and nothing more: no `evaluate` on the
    instance, the class's own still the one it calls."""

    class Fails(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                raise raised("inside fit")

    def fail(fit, model):
        before = set(vars(model))
        with pytest.raises(raised):
            fit(model, *_data(32, 1), validation_data=_data(16, 2), epochs=2, batch_size=8, callbacks=[Fails()])
        return set(vars(model)) - before

    tpukit_added = fail(lambda m, *a, **k: hub_fit.KerasFit(m).fit(*a, **k, verbose=0), model := _task())
    keras_added = fail(lambda m, *a, **k: keras.Model.fit(m, *a, **k, verbose=0), _task())
    assert tpukit_added == keras_added and "evaluate" not in vars(model)
    assert model.evaluate.__func__ is OverridingTask.evaluate


def test_a_task_that_keeps_keras_evaluate_validates_in_keras_fit_itself():
    """KerasHub 0.32's tasks: Keras' fit validates (with its cached evaluation dataset), no callback added."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    trainer = hub_fit.KerasFit(model)
    assert not trainer.overrides_evaluate
    history = trainer.fit(*_data(32, 1), validation_data=_data(16, 2), epochs=1, batch_size=8, verbose=0)
    assert sorted(history.history) == ["loss", "val_loss"]


def test_kerashubs_own_causal_lm_is_trained_by_keras_fit():
    keras_hub = pytest.importorskip("keras_hub")
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=8, num_layers=1, num_heads=1, hidden_dim=4, intermediate_dim=8, max_sequence_length=8
    )
    task = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    task.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = {"token_ids": np.ones((8, 8), "int32"), "padding_mask": np.ones((8, 8), "bool")}
    trainer = hub_fit.KerasFit(task)
    history = trainer.fit(
        x, np.ones((8, 8), "int32"), validation_data=(x, np.ones((8, 8), "int32")), epochs=1, batch_size=4, verbose=0
    )
    assert "val_loss" in history.history and "evaluate" not in vars(task)
