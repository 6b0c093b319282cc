"""Models and data a user writes in a notebook: tpukit has never seen them.

Shared by the in-process tests, the JAX tests (fresh processes) and the CLI
tests, which name them by import path (`usermodels:user_cnn`).
"""

import keras
import numpy as np


def images(n=1024, seed=0):
    """User images: NumPy uint8 arrays and int labels, as a user would have them."""
    from tpukit.data.shapes import make_shapes

    x, y, _, _ = make_shapes(n, 1, seed=seed)
    return np.array(x), np.array(y)


def user_cnn(spec):
    """A functional CNN written by the user."""
    inputs = keras.Input(spec.input_shape, dtype=spec.input_dtype)
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(8, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax", dtype="float32")(x)
    return keras.Model(inputs, outputs)


class TinyNet(keras.Model):
    """A subclassed model: its layers have no symbolic shapes."""

    def __init__(self, classes=4):
        super().__init__()
        self.flatten = keras.layers.Flatten()
        self.rescale = keras.layers.Rescaling(1 / 255)
        self.hidden = keras.layers.Dense(32, activation="relu")
        self.out = keras.layers.Dense(classes, activation="softmax", dtype="float32")

    def call(self, x):
        return self.out(self.hidden(self.flatten(self.rescale(x))))


@keras.saving.register_keras_serializable(package="usermodels")
class SavableNet(keras.Model):
    """A subclassed model as Keras' saving guide writes one: registered, with get_config, so a .keras file
    of it opens with plain keras.saving.load_model."""

    def __init__(self, classes=4, **kwargs):
        super().__init__(**kwargs)
        self.classes = classes
        self.flatten = keras.layers.Flatten()
        self.rescale = keras.layers.Rescaling(1 / 255)
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(classes, activation="softmax", dtype="float32")

    def call(self, x):
        return self.out(self.hidden(self.flatten(self.rescale(x))))

    def get_config(self):
        return {**super().get_config(), "classes": self.classes}


def savable_net(spec):
    """A factory for SavableNet (the CLI and load() name it by import path)."""
    return SavableNet(spec.num_classes)


def two_inputs():
    """A functional model with two named inputs, fed a dict."""
    image = keras.Input((32, 32, 3), dtype="uint8", name="image")
    extra = keras.Input((4,), name="extra")
    x = keras.layers.Flatten()(keras.layers.Rescaling(1 / 255)(image))
    x = keras.layers.Concatenate()([keras.layers.Dense(16, activation="relu")(x), extra])
    return keras.Model({"image": image, "extra": extra}, keras.layers.Dense(4, activation="softmax")(x))


def regressor(spec):
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Normalization()(inputs)
    x = keras.layers.Dense(32, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(1)(x))


def text_classifier(spec):
    """Tokens -> Embedding -> average -> two classes."""
    tokens = keras.Input(spec.input_shape, dtype="int32")
    x = keras.layers.Embedding(200, 16)(tokens)
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(tokens, keras.layers.Dense(2, activation="softmax")(x))


def tokens(n=2048, length=20, seed=0):
    """Generated text: class 1 sequences use the upper half of the vocabulary more often."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    low = rng.integers(1, 100, (n, length))
    high = rng.integers(100, 200, (n, length))
    pick = rng.random((n, length)) < np.where(y[:, None] == 1, 0.7, 0.3)
    return np.where(pick, high, low).astype(np.int32), y.astype(np.int32)


def load_tokens():
    """A dataset loader for the CLI: `--dataset usermodels:load_tokens`."""
    return tokens(4096, seed=3)


# ---- the data mistakes of a user test (issue 42): each fails in one line that names it and its fix ----------------


def readme_build(spec):
    """README's own-model example: a factory that reads the input shape and the number of classes from the spec."""
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Dense(64, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(spec.num_classes, activation="softmax")(x))


def dense_classifier(units):
    """A model with its classes fixed by the user: 20 features in, `units` softmax outputs."""

    def build():
        inputs = keras.Input((20,))
        return keras.Model(inputs, keras.layers.Dense(units, activation="softmax")(inputs))

    return build


def flat_mnist_model():
    """A model for flattened 28x28 images: Input((784,))."""
    inputs = keras.Input((784,))
    return keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(inputs))


def data_mistakes():
    """{mistake: (model, (x, y))}: a user's own model and arrays, with one mistake each."""
    rng = np.random.default_rng(0)
    x = rng.random((200, 20)).astype("float32")
    y = rng.integers(0, 3, 200)
    y[0] = 2  # TensorFlow's loss, given this label first, failed in its own words before tpukit's check ran
    one_hot = keras.utils.to_categorical(y, 3)
    images = rng.random((200, 28, 28)).astype("float32")
    return {
        "2 outputs for labels 0..2": (dense_classifier(2), (x, y)),
        "one-hot labels, a fixed Dense(3)": (dense_classifier(3), (x, one_hot)),
        "one-hot labels, README's build(spec)": (readme_build, (x, one_hot)),
        "images (n, 28, 28) into Input((784,))": (flat_mnist_model, (images, rng.integers(0, 10, 200))),
    }


# What each mistake's line must say: the mistake with the user's numbers, and the fix.
DATA_MISTAKE_LINES = {
    "2 outputs for labels 0..2": [
        "the labels run from 0 to 2, but the model's output has 2 unit(s)",
        "give the last layer 3 units",
    ],
    "one-hot labels, a fixed Dense(3)": [
        "the labels are one-hot (3 columns, one 1 per example), but the loss "
        "sparse_categorical_crossentropy takes class numbers (0 to 2)",
        "use RunConfig(loss='categorical_crossentropy')",
        "y.argmax(axis=1)",
    ],
    "one-hot labels, README's build(spec)": [
        "the labels are one-hot (3 columns, one 1 per example), but the loss "
        "sparse_categorical_crossentropy takes class numbers (0 to 2)",
        "use RunConfig(loss='categorical_crossentropy')",
        "y.argmax(axis=1)",
    ],
    "images (n, 28, 28) into Input((784,))": [
        "it takes examples of shape (784,), and the data's have shape (28, 28)",
        "reshape the data (x.reshape(len(x), 784))",
        "keras.Input((28, 28)) followed by keras.layers.Flatten()",
    ],
}
