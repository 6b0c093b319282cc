"""`tfds:NAME` datasets through tensorflow-datasets (Colab ships it), checked for the network before a download."""

from __future__ import annotations

import os

from tpukit.data.builtin import DatasetUnavailable, reachable
from tpukit.data.types import DataError, Splits
from tpukit.errors import one_line


def load(name: str):
    """`tfds:NAME` through tensorflow-datasets (Colab ships it): train and test splits as arrays."""
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        raise DataError(f"dataset 'tfds:{name}' needs tensorflow-datasets: pip install tensorflow-datasets. "
                        f"Received: dataset='tfds:{name}'.") from None
    try:
        builder = tfds.builder(name)
    except Exception as e:
        raise DataError(f"dataset 'tfds:{name}': {one_line(e)}") from None
    prepared = os.path.exists(os.path.join(builder.data_dir, "dataset_info.json"))
    if not prepared and not reachable("storage.googleapis.com"):
        raise DatasetUnavailable(
            f"Dataset 'tfds:{name}' is not in the tensorflow-datasets cache ({builder.data_dir}) and "
            "storage.googleapis.com cannot be reached (offline?). Use an offline dataset instead: "
            f"mnist5k, digits, shapes. Received: dataset='tfds:{name}'.")
    splits = list(builder.info.splits.keys()) if prepared else ["train", "test"]
    test_split = "test" if "test" in splits else None
    wanted = ["train"] + ([test_split] if test_split else [])
    loaded = tfds.load(name, split=wanted, as_supervised=True, batch_size=-1)
    arrays = [tuple(tfds.as_numpy(part)) for part in loaded]
    return Splits(train=arrays[0], test=arrays[1] if test_split else None)
