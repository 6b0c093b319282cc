"""Datasets by name, and the input pipeline done the way TPUs want it.

Importing this module is cheap: TensorFlow and scikit-learn load only when a
dataset is loaded.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import threading
from typing import Optional, Tuple

from tpukit.config import check_one_batch
from tpukit.data import pipeline, text
from tpukit.data.shapes import SHAPE_CLASSES, make_shapes  # noqa: F401  (the labels' names, for callers)
from tpukit.data.types import Arrays, Splits, frozen
from tpukit import backend
from tpukit import registry
from tpukit.errors import TpukitError

OFFLINE_DATASETS = ("mnist5k", "digits", "shapes")
ONLINE_DATASETS = ("mnist", "fashion_mnist", "cifar10")
DATASETS = OFFLINE_DATASETS + ONLINE_DATASETS


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """What a dataset is, known without loading it."""

    name: str
    image_shape: Tuple[int, int, int]
    num_classes: int
    num_train: int
    num_test: int
    offline: bool
    generated: bool
    description: str


_INFO = {
    "mnist5k": DatasetInfo(
        "mnist5k",
        (28, 28, 1),
        10,
        4000,
        1000,
        True,
        False,
        "5,000 MNIST digits bundled with tpukit (4,000 train / 1,000 test)",
    ),
    "digits": DatasetInfo(
        "digits", (8, 8, 1), 10, 1437, 360, True, False, "1,797 8x8 handwritten digits bundled with scikit-learn"
    ),
    "shapes": DatasetInfo(
        "shapes",
        (32, 32, 3),
        4,
        8192,
        1024,
        True,
        True,
        "generated coloured shapes at 32x32x3, any size, deterministic for a seed",
    ),
    "mnist": DatasetInfo(
        "mnist", (28, 28, 1), 10, 60000, 10000, False, False, "MNIST from keras.datasets (needs the network once)"
    ),
    "fashion_mnist": DatasetInfo(
        "fashion_mnist",
        (28, 28, 1),
        10,
        60000,
        10000,
        False,
        False,
        "Fashion-MNIST from keras.datasets (needs the network once)",
    ),
    "cifar10": DatasetInfo(
        "cifar10", (32, 32, 3), 10, 50000, 10000, False, False, "CIFAR-10 from keras.datasets (needs the network once)"
    ),
}


def info(name: str) -> DatasetInfo:
    """Facts about dataset `name`, without loading it."""
    try:
        return _INFO[name]
    except KeyError:
        raise ValueError(
            f"Unknown dataset {name!r}. Choices: {', '.join(DATASETS)} (offline: {', '.join(OFFLINE_DATASETS)})."
        ) from None


def train_size(name: str, size: Optional[int] = None) -> int:
    """Training examples a run gets: `size` for a generated set, at most the real split otherwise."""
    i = info(name)
    if size is None:
        return i.num_train
    return size if i.generated else min(size, i.num_train)


class DatasetUnavailable(TpukitError, RuntimeError):
    """An online dataset was asked for, but it is not cached and the network is out of reach."""


@dataclasses.dataclass(frozen=True)
class ImageData:
    """A loaded dataset: uint8 NHWC images and int32 labels, split into train and test.

    `info` is the table's entry; `num_train` is what this load actually holds
    (fewer than `info.num_train` when `size` subsampled it).
    """

    info: DatasetInfo
    x_train: "np.ndarray"
    y_train: "np.ndarray"
    x_test: "np.ndarray"
    y_test: "np.ndarray"

    @property
    def num_train(self) -> int:
        return int(self.x_train.shape[0])

    @property
    def num_test(self) -> int:
        return int(self.x_test.shape[0])


# ---- loading ---------------------------------------------------------------


def load(name: str, *, size: Optional[int] = None, seed: int = 0) -> ImageData:
    """Load dataset `name` as uint8 images and int32 labels.

    Args:
        name: one of `DATASETS`.
        size: training examples wanted. A generated set makes exactly this many
            (default 8192); a real one keeps the first `min(size, num_train)`
            of its fixed split.
        seed: picks the generated `shapes` set; real splits never change with it.

    Raises:
        ValueError: unknown name or a bad size.
        DatasetUnavailable: an online dataset that is not cached while offline.

    >>> load("digits", size=100).x_train.shape
    (100, 8, 8, 1)
    """
    dataset_info = info(name)
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"Expected size to be None or an integer >= 1. Received: size={size!r}.")
    if name == "shapes":
        n = size or dataset_info.num_train
        x_train, y_train, x_test, y_test = make_shapes(n, _shapes_test_size(n), seed=seed)
    else:
        x_train, y_train, x_test, y_test = _LOADERS[name]()
        if size is not None:
            x_train, y_train = x_train[:size], y_train[:size]
    return ImageData(dataset_info, x_train, y_train, x_test, y_test)


def _shapes_test_size(num_train: int) -> int:
    """One test image per eight training images, and never fewer than 256."""
    return max(num_train // 8, 256)


def _fixed_split(x, y, num_train: int, num_test: int):
    """Split with a permutation seeded by a constant: the same split in every process, whatever the run's seed."""
    import numpy as np

    order = np.random.default_rng(20240).permutation(len(x))
    train, test = order[:num_train], order[num_train : num_train + num_test]
    return frozen(x[train], y[train].astype(np.int32), x[test], y[test].astype(np.int32))


@functools.lru_cache(maxsize=None)
def _load_digits():
    import numpy as np
    from sklearn.datasets import load_digits

    raw = load_digits()
    images = np.round(raw.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    return _fixed_split(images, raw.target, _INFO["digits"].num_train, _INFO["digits"].num_test)


@functools.lru_cache(maxsize=None)
def _load_mnist5k():
    import numpy as np

    path = os.path.join(os.path.dirname(__file__), "datasets", "mnist5k.npz")  # see datasets/README.md
    with np.load(path) as raw:  # sorted by label: the split must shuffle
        images, labels = raw["images"][..., None], raw["labels"]
    return _fixed_split(images, labels, _INFO["mnist5k"].num_train, _INFO["mnist5k"].num_test)


# ---- online datasets -------------------------------------------------------

# Where keras.datasets caches each one (under <keras home>/datasets), and the host it downloads from.
_KERAS_FILES = {
    "mnist": ("mnist.npz",),
    "fashion_mnist": tuple(
        os.path.join("fashion-mnist", f)
        for f in (
            "train-labels-idx1-ubyte.gz",
            "train-images-idx3-ubyte.gz",
            "t10k-labels-idx1-ubyte.gz",
            "t10k-images-idx3-ubyte.gz",
        )
    ),
    "cifar10": ("cifar-10-batches-py-target_archive",),
}
_KERAS_HOSTS = {
    "mnist": "storage.googleapis.com",
    "fashion_mnist": "storage.googleapis.com",
    "cifar10": "www.cs.toronto.edu",
}


def _keras_homes():
    """Directories Keras may cache into: $KERAS_HOME, ~/.keras, or /tmp/.keras when home is read-only."""
    homes = [
        os.environ.get("KERAS_HOME"),
        os.path.join(os.path.expanduser("~"), ".keras"),
        os.path.join("/tmp", ".keras"),
    ]
    return [h for h in homes if h]


def cached(name: str) -> bool:
    """Whether keras.datasets already holds every file of online dataset `name` (no download needed)."""
    files = _KERAS_FILES.get(name)
    if files is None:
        return info(name).offline
    return any(all(os.path.exists(os.path.join(home, "datasets", f)) for f in files) for home in _keras_homes())


def reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to `host` opens within `timeout` seconds.

    Runs in a daemon thread so a slow DNS lookup cannot hold the caller longer
    than `timeout` either.
    """
    result = []

    def connect():
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result)


def _unavailable(name: str, why: str) -> DatasetUnavailable:
    return DatasetUnavailable(
        f"Dataset {name!r} is not cached and {why}. Use an offline dataset instead: "
        f"{', '.join(OFFLINE_DATASETS)}. Received: name={name!r}."
    )


def _load_keras(name: str):
    """An online dataset through keras.datasets, failing fast when it would have to download offline."""
    import numpy as np

    was_cached = cached(name)
    if not was_cached and not reachable(_KERAS_HOSTS[name]):
        raise _unavailable(name, f"{_KERAS_HOSTS[name]} cannot be reached (offline?)")
    import keras

    try:
        (x_train, y_train), (x_test, y_test) = getattr(keras.datasets, name).load_data()
    except Exception as e:
        if was_cached:
            raise
        raise _unavailable(name, f"the download failed ({type(e).__name__}: {e})") from e
    if x_train.ndim == 3:
        x_train, x_test = x_train[..., None], x_test[..., None]
    return frozen(
        x_train.astype(np.uint8),
        y_train.reshape(-1).astype(np.int32),
        x_test.astype(np.uint8),
        y_test.reshape(-1).astype(np.int32),
    )


_LOADERS = {
    "digits": _load_digits,
    "mnist5k": _load_mnist5k,
    **{name: functools.lru_cache(maxsize=None)(functools.partial(_load_keras, name)) for name in ONLINE_DATASETS},
}


# ---- input pipelines (thin wrappers over tpukit.data.pipeline, for ImageData) -----------


def loader(name: str):
    """The built-in loader behind dataset `name`, as the registry and `sources.prepare` call it."""
    info(name)

    def load_builtin(size: Optional[int] = None, seed: int = 0):
        loaded = load(name, size=size, seed=seed)
        return Splits(train=(loaded.x_train, loaded.y_train), test=(loaded.x_test, loaded.y_test))

    load_builtin.__doc__ = info(name).description
    return load_builtin


def steps_per_epoch(data: ImageData, global_batch: int) -> int:
    """Full batches in one epoch (the remainder is dropped, so every batch has a static shape)."""
    _check_batch(data, global_batch)
    return pipeline.steps_per_epoch(data.num_train, global_batch)


def train_dataset(
    data: ImageData,
    *,
    global_batch: int,
    seed: int,
    epochs: int,
    initial_epoch: int = 0,
    steps_per_epoch: Optional[int] = None,
) -> "tf.data.Dataset":
    """Batches for epochs `initial_epoch` .. `epochs - 1`, in one finite tf.data stream (a NumPy PyDataset of
    the same batches where TensorFlow is not installed).

    Images stay uint8 (the model normalizes them). Each epoch's order is a
    permutation seeded by (seed, epoch) alone (`pipeline.epoch_order`), so epoch
    e's batches are the same in every run, and a run resumed at
    `initial_epoch=k` sees exactly the batches an uninterrupted run saw from
    epoch k on. A `steps_per_epoch` other than one pass makes every epoch
    exactly that many batches (fewer, or its order repeated).
    """
    _check_batch(data, global_batch)
    return pipeline.train_feed(
        Arrays(data.x_train, data.y_train),
        feeder=_feeder(),
        global_batch=global_batch,
        seed=seed,
        epochs=epochs,
        initial_epoch=initial_epoch,
        steps=steps_per_epoch,
    )


def eval_dataset(data: ImageData, *, global_batch: int) -> "tf.data.Dataset":
    """The test split, cached and batched with static shapes (tf.data, else the NumPy feeder).

    Full batches only (the tail is dropped) when there is at least one;
    otherwise the whole split is one batch.
    """
    _check_global_batch(global_batch)
    return pipeline.eval_feed(Arrays(data.x_test, data.y_test), feeder=_feeder(), global_batch=global_batch)


def _feeder() -> str:
    """tf.data where TensorFlow is installed, else the NumPy feeder (Colab's TPU runtime has no TensorFlow), whose
    PyDataset needs Keras: on the backend `connect()` would pick (`backend_for`), if nothing has loaded Keras yet."""
    feeder = pipeline.dataset_feeder()
    if feeder == "numpy" and backend.loaded() is None:
        from tpukit.hardware.connect import backend_for

        backend.select(backend_for("auto")[0])
    return feeder


def _check_global_batch(global_batch) -> None:
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise ValueError(f"Expected global_batch to be an integer >= 1. Received: global_batch={global_batch!r}.")


def _check_batch(data: ImageData, global_batch) -> None:
    """A training batch must be a positive int that at least one epoch can fill."""
    _check_global_batch(global_batch)
    check_one_batch(
        data.num_train,
        global_batch,
        1,
        has=f"{data.info.name!r} has {data.num_train} training examples",
        where="global_batch",
        name="global_batch",
    )


def entries():
    """The bundled and downloadable datasets for `tpukit.registry`: (name, loader, description) of each."""
    return [(name, loader(name), info(name).description) for name in DATASETS] + text.entries()


registry.add_builtins("dataset", entries)
