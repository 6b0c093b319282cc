"""What data is, as plain values: the parts a run trains on, and the errors and warnings about them.

The lowest module of `tpukit.data`: the pipelines, the bundled datasets and the dispatcher (`sources`) all build on
these values, and it imports nothing of tpukit but its error bases (`tpukit.errors`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple, Union

from tpukit.errors import TpukitError, TpukitWarning


class DataError(TpukitError, ValueError):
    """The data cannot be trained on as given. The message is one line: what was received, what was expected."""

    bad_input = True


class UnorderedDataWarning(TpukitWarning):
    """An already batched dataset: tpukit cannot control its order, so resume is not bitwise exact."""


@dataclasses.dataclass(frozen=True)
class Splits:
    """Data that comes with its own validation and test parts. Each part is arrays `(x, y)` or a dataset.

    A dataset loader (`register_dataset`) may return one; `train(data=Splits(...))` takes one too.
    """

    train: Any
    validation: Any = None
    test: Any = None


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """What the data says, for a model factory that takes one argument.

    `input_shape` and `input_dtype` are per example (dicts for named inputs);
    `num_classes` is set for integer labels (largest label + 1) and one-hot labels (their width), else None.
    """

    input_shape: Any
    input_dtype: Any
    target_shape: Tuple[int, ...]
    target_dtype: str
    num_classes: Optional[int]
    num_train: Optional[int]
    num_validation: int = 0
    num_test: int = 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Arrays:
    """In-memory examples: `x` an array or a dict of arrays, `y` an array, equal lengths."""

    x: Any
    y: Any

    def __len__(self) -> int:
        return len(self.y)

    def take(self, index) -> "Arrays":
        return Arrays(map_x(lambda a: a[index], self.x), self.y[index])

    def head(self, n: int) -> "Arrays":
        return self.take(slice(0, n))


@dataclasses.dataclass(frozen=True)
class Stream:
    """An unbatched tf.data.Dataset too large to hold in memory: shuffled per epoch with a seeded buffer."""

    dataset: Any
    count: int

    def __len__(self) -> int:
        return self.count


@dataclasses.dataclass(frozen=True)
class Batched:
    """An already batched tf.data.Dataset or keras PyDataset, fed as it is. `steps` is its length, if known."""

    dataset: Any
    steps: Optional[int]


Part = Union[Arrays, Stream, Batched]


def map_x(fn, x):
    """Apply `fn` to an input array, or to each input of a dict of named inputs."""
    if isinstance(x, dict):
        return {k: fn(v) for k, v in x.items()}
    return fn(x)


def frozen(*arrays):
    """Mark cached arrays read-only, so one caller cannot change another's data."""
    for a in arrays:
        a.setflags(write=False)
    return arrays


def describe(value) -> str:
    """A value as an error's "Received:" names it: its type and the start of its repr."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}"


def not_token_ids(sample) -> Optional[str]:
    """What a few examples' inputs are, where they are not the token ids a causal language model trains on (a dict
    with `token_ids`, as text becomes once tokenized), or None where they are: "float32 arrays of shape (8, 8, 1)
    an example (images, by their shape)"."""
    import numpy as np

    if isinstance(sample, dict):
        if "token_ids" in sample:
            return None
        return f"a dict of inputs {sorted(sample)} without 'token_ids'"
    array = np.asarray(sample)
    per = tuple(array.shape[1:])
    kind = " (images, by their shape)" if len(per) in (2, 3) and array.dtype.kind in "fu" else ""
    return f"{array.dtype} arrays of shape {per} an example{kind}"
