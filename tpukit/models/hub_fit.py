"""A KerasHub task trained through Keras' own `fit` and `evaluate`: what `Preset.trainer` hands the run.

Why: KerasHub before 0.32 (Colab's CPU/GPU runtime has 0.26) overrides its tasks' `evaluate`, turning the data it is
given into tf.data again to preprocess it, which fails on JAX and repeats work fit has done. Keras' `fit` validates
by calling `self.evaluate`, so it would meet that override. `KerasFit` decides once, from the task's class, whether
it does: then fit validates through a callback of its own (`validation_callback`), first among the run's, which
calls Keras' `evaluate` and puts the `val_` scores in the epoch's logs where Keras' own validation puts them, before
any other callback reads them. Nothing is assigned on the user's model, so a fit that fails, is interrupted or is
killed leaves the model's attributes as Keras' fit leaves them.
"""

from __future__ import annotations

_VALIDATION_ARGUMENTS = ("validation_data", "validation_steps", "validation_batch_size", "validation_freq")


class KerasFit:
    """A KerasHub task seen through `keras.Model`'s own `fit` and `evaluate` (`Preset.trainer`)."""

    def __init__(self, model):
        import keras

        self.model = model
        # Whether the task's class replaces Keras' evaluate (KerasHub 0.26's Task): fit then validates by a callback.
        self.overrides_evaluate = getattr(type(model), "evaluate", None) is not keras.Model.evaluate

    def fit(self, *args, callbacks=None, **kwargs):
        """Keras' fit on the task; where its class overrides `evaluate`, validation by `validation_callback`."""
        import keras

        callbacks = list(callbacks or [])
        validation = {k: kwargs.pop(k) for k in _VALIDATION_ARGUMENTS if k in kwargs}
        if self.overrides_evaluate and validation.get("validation_data") is not None:
            callbacks.insert(0, validation_callback(self.model, **validation))
        else:
            kwargs.update(validation)
        return keras.Model.fit(self.model, *args, callbacks=callbacks, **kwargs)

    def evaluate(self, *args, **kwargs):
        import keras

        return keras.Model.evaluate(self.model, *args, **kwargs)

    def __getattr__(self, name):  # the rest is the model's (a multi-worker loop reads its train step)
        return getattr(self.model, name)


def validation_callback(model, validation_data, validation_steps=None, validation_batch_size=None, validation_freq=1):
    """A Keras callback that validates `model` at the end of each epoch `validation_freq` names, with Keras' own
    `evaluate`, adding its scores to the epoch's logs as `val_<name>`, as `fit(validation_data=...)` does."""
    import keras

    x, y, weights = keras.utils.unpack_x_y_sample_weight(validation_data)  # as fit unpacks its validation_data

    class Validation(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            due = (
                (epoch + 1) % validation_freq == 0 if isinstance(validation_freq, int) else epoch + 1 in validation_freq
            )
            if logs is None or not due:
                return
            scores = keras.Model.evaluate(
                model,
                x,
                y,
                sample_weight=weights,
                steps=validation_steps,
                batch_size=validation_batch_size,
                verbose=0,
                return_dict=True,
            )
            logs.update({f"val_{name}": value for name, value in scores.items()})

    return Validation()
