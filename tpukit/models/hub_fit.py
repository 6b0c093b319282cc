"""A KerasHub task trained through Keras' own `fit` and `evaluate`: what `Preset.trainer` hands the run."""

from __future__ import annotations

import types


class KerasFit:
    """A KerasHub task seen through `keras.Model`'s own `fit` and `evaluate` (`Preset.trainer`)."""

    def __init__(self, model):
        self.model = model

    def fit(self, *args, **kwargs):
        """Keras' fit, whose validation calls `self.evaluate`: Keras' own too for the length of the fit, since
        KerasHub's before 0.32 (Colab's CPU/GPU runtime has 0.26) turns the data fit already holds into tf.data
        again, and fails on JAX."""
        import keras

        self.model.evaluate = types.MethodType(keras.Model.evaluate, self.model)
        try:
            return keras.Model.fit(self.model, *args, **kwargs)
        finally:
            del self.model.evaluate

    def evaluate(self, *args, **kwargs):
        import keras

        return keras.Model.evaluate(self.model, *args, **kwargs)

    def __getattr__(self, name):  # the rest is the model's (a multi-worker loop reads its train step)
        return getattr(self.model, name)
