"""The dataset objects a user hands over, a `tf.data.Dataset` or a `keras.utils.PyDataset`: which one a value is,
and what tpukit reads from it without owning it (batched or not, its length, its element size, its first inputs).

Its own module because these questions are asked of the frameworks' objects, not of tpukit's parts, and one of them
has no public answer: `is_batched` walks tf.data's private `_input_dataset` link (docs/decisions.md, "Private
framework APIs"). `tpukit.data.sources` asks them while it turns the user's data into a `Source`. Recognising
a dataset imports nothing; TensorFlow loads only when a dataset is read.
"""

from __future__ import annotations

import functools
from typing import Optional

from tpukit.data.types import DataError, Stream, map_x


def is_dataset(value) -> bool:
    """Whether `value` is a tf.data.Dataset, told by its type's module and `element_spec` (imports no TensorFlow)."""
    module = type(value).__module__ or ""
    return module.startswith("tensorflow") and hasattr(value, "element_spec")


def is_py_dataset(value) -> bool:
    """Whether `value` is a keras.utils.PyDataset (a subclass of it), told by name (imports no Keras)."""
    cls = type(value)
    return any(c.__name__ == "PyDataset" and (c.__module__ or "").startswith("keras") for c in cls.__mro__)


def is_batched(dataset) -> bool:
    """Whether a tf.data pipeline batches: the outermost batch or unbatch step in its chain decides.

    tf.data has no public way to ask; this walks the chain through the private `_input_dataset` attribute, the one
    private tf.data API tpukit uses (docs/decisions.md, "Private framework APIs"). `_input_dataset_attribute`
    checks it is still there first, so a TensorFlow that drops it fails in one line instead of treating every
    pipeline as unbatched.
    """
    attribute = _input_dataset_attribute()
    node = dataset
    for _ in range(1000):
        name = type(node).__name__.lower()
        if "unbatch" in name:
            return False
        if "batch" in name:
            return True
        node = getattr(node, attribute, None)
        if node is None:
            return False
    return False


@functools.lru_cache(maxsize=None)
def _input_dataset_attribute() -> str:
    """The private attribute that links a tf.data step to its input, checked on a probe pipeline of this TF."""
    import tensorflow as tf

    if getattr(tf.data.Dataset.range(1).batch(1), "_input_dataset", None) is None:
        raise DataError(
            f"TensorFlow {tf.__version__}'s tf.data no longer links a pipeline's steps through "
            "_input_dataset, which tpukit reads to tell a batched dataset from an unbatched one; pass "
            "arrays (x, y) or a keras.utils.PyDataset, and report this at tpukit's issues."
        )
    return "_input_dataset"


def cardinality(dataset) -> Optional[int]:
    """A tf.data pipeline's element count, or None where tf.data reports none (unknown, or infinite)."""
    n = int(dataset.cardinality())
    return n if n >= 0 else None


def num_batches(py_dataset) -> Optional[int]:
    """A PyDataset's batches per epoch, or None where it does not say (its `num_batches` raises)."""
    try:
        return py_dataset.num_batches
    except Exception:
        return None


def element_bytes(spec) -> int:
    """Bytes of one element of a tf.TensorSpec (an unknown dimension counts 1), to size a dataset against memory."""
    size = spec.dtype.size if hasattr(spec.dtype, "size") else 4
    for dim in spec.shape:
        size *= int(dim) if dim is not None else 1
    return max(size, 1)


def count_elements(dataset) -> int:
    """A finite tf.data pipeline's elements, counted by reading it through once (where `cardinality` is None)."""
    return int(dataset.reduce(0, lambda n, _: n + 1))


def first_inputs(part, n: int):
    """The inputs of the first few examples of a streamed or batched part, as NumPy."""
    import numpy as np

    dataset = part.dataset
    if is_py_dataset(dataset):
        batch = dataset[0]
    elif isinstance(part, Stream):
        batch = next(iter(dataset.batch(n)))
    else:
        batch = next(iter(dataset))
    x = batch[0] if isinstance(batch, (tuple, list)) else batch
    return map_x(lambda a: np.asarray(a)[:n], x)
