"""One dispatcher from what the user hands over as data to what tpukit's pipelines feed.

`train(data=...)` takes NumPy arrays `(x, y)` (x may be a dict of named
inputs), a `tf.data.Dataset` of unbatched `(x, y)` elements, an already
batched dataset or `keras.utils.PyDataset`, a callable that returns one of
these, a `Splits` with its own validation and test data, or a name (built in,
registered, `tfds:NAME`, or an import path). `prepare()` turns any of them into
a `Source`: training, validation and test parts, and a `DataSpec` saying what
the data looks like, for the model factory.

Arrays, and unbatched datasets small enough to hold in memory, become arrays:
tpukit then owns their order (a seeded permutation per epoch), so determinism,
exact resume and padding advice hold for the user's data as for the zoo.
Importing this module is cheap: TensorFlow loads only when a dataset is given.
Which dataset object a value is, and what is read from one, is `tpukit.data.dataset_objects`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import warnings
from typing import Callable, Optional, Tuple

from tpukit import registry
from tpukit.data import builtin
from tpukit.data import text as texts
from tpukit.data import pairs, tfds, user_text
from tpukit.data.builtin import DatasetUnavailable
from tpukit.data.dataset_objects import (
    cardinality,
    count_elements,
    element_bytes,
    first_inputs,
    is_batched,
    is_dataset,
    is_py_dataset,
    num_batches,
)
from tpukit.data.types import (
    Arrays,
    Batched,
    DataError,
    DataSpec,
    Part,
    Splits,
    Stream,  # noqa: F401
    UnorderedDataWarning,
    map_x as _map_x,
)
from tpukit.errors import one_line

# Unbatched datasets up to this many bytes are read into memory (arrays); larger ones stream.
IN_MEMORY_LIMIT = int(float(os.environ.get("TPUKIT_IN_MEMORY_MB", "2048")) * 2**20)


@dataclasses.dataclass(frozen=True)
class Source:
    """The data of one run, ready for a pipeline."""

    name: str
    train: Part
    validation: Optional[Part]
    test: Optional[Part]
    spec: DataSpec
    validation_from: str  # "split" (seeded, from the training data), "given", or "none"
    fingerprint: Optional[str]
    notes: Tuple[str, ...] = ()  # what preparing it did, for the run's notes (text: tokens, rows, padding)
    chat_prompt: Optional[str] = None  # conversations: the first one's prompt, which a run's samples answer

    @property
    def ordered(self) -> bool:
        """Whether tpukit controls the order of the training examples (so resume is exact)."""
        return not isinstance(self.train, Batched)

    def describe(self) -> dict:
        """A JSON-ready description, as result.json records it."""
        import json

        return json.loads(
            json.dumps(
                {
                    "name": self.name,
                    "spec": self.spec.to_dict(),
                    "validation_from": self.validation_from,
                    "fingerprint": self.fingerprint,
                    "ordered": self.ordered,
                    "train": type(self.train).__name__.lower(),
                }
            )
        )

    def sample(self, n: int = 8):
        """A few training inputs (NumPy), for a forward-pass check and FLOP counting."""
        return inputs_of(self.train, n)


def inputs_of(part: "Part", n: int):
    """The inputs of the first `n` examples of a part (NumPy)."""
    if isinstance(part, Arrays):
        return part.head(min(n, len(part))).x
    return first_inputs(part, n)


# ---- the dispatcher ------------------------------------------------------------


def prepare(
    data,
    *,
    name: str,
    seed: int = 0,
    size: Optional[int] = None,
    validation_split: Optional[float] = 0.1,
    validation_data=None,
    test_data=None,
    encoder: Optional[Callable[[], Optional["texts.Encoder"]]] = None,
    writes_text: bool = False,
) -> Source:
    """Turn what the user handed over (or a dataset name) into a `Source`.

    Args:
        data: arrays, a dataset, a PyDataset, a callable returning one, a `Splits`, a name, or text (a `text.Text`,
            or a form `user_text.is_text` takes: strings, prompt/response pairs, dicts, a Hugging Face dataset; a
            JSONL path is a name), which `encoder` turns into token ids.
        name: what the run's config records for this data.
        seed: seeds the validation split (and picks a generated built-in set).
        size: keep at most this many training examples (before the validation split).
        validation_split: the fraction of the training data held out for validation,
            with a seeded split; None for no validation. Ignored when validation data is given.
        encoder: gives the model's `text.Encoder` (None: the model has no tokenizer); asked only for text.
        writes_text: the model is a language model, so text in a shape tpukit does not take (an empty list, a
            single string, a dict of columns) is a one-line error about text, not about arrays.

    Raises:
        DataError: data that cannot be trained on, in one line.
        tpukit.data.builtin.DatasetUnavailable: an online dataset while offline.
    """
    if writes_text and not isinstance(data, texts.Text):
        data = user_text.language_model_text(data, name) or data
    if isinstance(data, str):
        data = _load_named(data, seed=seed, size=size)
    elif callable(data) and not is_dataset(data) and not is_py_dataset(data):
        data = _call_loader(data, name)
    data, notes, chat_prompt = _tokenized(data, name, encoder)
    splits = data if isinstance(data, Splits) else Splits(data)
    if validation_data is not None:
        splits = dataclasses.replace(splits, validation=_held_out(validation_data, "validation_data", encoder))
    if test_data is not None:
        splits = dataclasses.replace(splits, test=_held_out(test_data, "test_data", encoder))
    train = _part(splits.train, "data")
    if size is not None and not isinstance(train, Batched) and len(train) > size:
        train = train.head(size) if isinstance(train, Arrays) else Stream(train.dataset.take(size), size)
    validation = _part(splits.validation, "validation_data") if splits.validation is not None else None
    validation_from = "given" if validation is not None else "none"
    if validation is None and validation_split is not None:
        if isinstance(train, Batched):
            warnings.warn(
                "the data is already batched, so tpukit cannot split off a validation set: "
                "pass validation_data= for validation metrics.",
                UnorderedDataWarning,
                stacklevel=3,
            )
        else:
            train, validation = _split(train, validation_split, seed)
            validation_from = "split"
    test = _part(splits.test, "test_data") if splits.test is not None else None
    if isinstance(train, Batched):
        warnings.warn(
            "the data is already batched, so tpukit cannot control its order: a stopped run resumes at the start "
            "of its epoch without a bitwise guarantee, and the padding advice cannot check its batch size. Pass "
            "unbatched (x, y) elements or arrays for exact resume.",
            UnorderedDataWarning,
            stacklevel=3,
        )
    spec = _spec(train, validation, test)
    return Source(
        name=name,
        train=train,
        validation=validation,
        test=test,
        spec=spec,
        validation_from=validation_from,
        fingerprint=_fingerprint(train, validation),
        notes=notes,
        chat_prompt=chat_prompt,
    )


def _tokenized(data, name: str, encoder):
    """(data, notes, the chat prompt): text (the user's own documents or conversations, or a `Text`) as token ids
    in rows, the rows' note, and the first conversation's prompt (None for documents); anything else as it is."""
    if user_text.is_text(data):  # the user's own text: strings, pairs, conversations, preferences, a HF dataset
        data = user_text.text_of(data, name)
    if not isinstance(data, (texts.Text, pairs.Preferences)):
        return data, (), None
    # a file named as the dataset: what it held and how it was read, said (a .json array is read as rows)
    read = (user_text.file_note(name, data),) if user_text.named(name) and os.path.isfile(name) else ()
    if isinstance(data, pairs.Preferences):
        packed, prompt = pairs.tokenize(data, _encoder_for(encoder, name))
        return packed.arrays, read + (packed.note(),), prompt
    packed = texts.tokenize(data, _encoder_for(encoder, name))
    return packed.arrays, read + (packed.note(),), packed.prompt


def _held_out(data, field: str, encoder):
    """`validation_data` or `test_data` as the training data is read: text (strings, conversations, preference
    pairs, a `Text`) as token ids in the same rows; anything else as it is."""
    if isinstance(data, texts.Text) or user_text.is_text(data):
        return _tokenized(data, field, encoder)[0]
    return data


def _encoder_for(encoder, name: str) -> "texts.Encoder":
    """The model's text encoder; DataError (one line) for text and a model without a tokenizer."""
    found = encoder() if encoder is not None else None
    if found is None:
        raise DataError(
            f"dataset {name!r} is text, and the model has no tokenizer to turn it into token ids: train "
            f"a pretrained language model on it (a KerasHub preset, e.g. model='gemma3_instruct_1b' or a "
            f"preset directory). Received: dataset={name!r}."
        )
    return found


def _load_named(name: str, *, seed: int, size: Optional[int]):
    """A built-in, registered, tfds: or imported dataset, loaded."""
    if name.startswith("tfds:"):
        return tfds.load(name[len("tfds:") :])
    entry = registry.entry("dataset", name)
    if entry.builtin:
        return entry.target(size=size, seed=seed)
    return _call_loader(entry.target, name)


def _call_loader(loader, name: str):
    try:
        return loader()
    except (DataError, KeyboardInterrupt):
        raise
    except Exception as e:
        if isinstance(e, DatasetUnavailable):
            raise
        raise DataError(f"the dataset loader {name!r} raised {one_line(e)}") from e


def _part(value, field: str) -> Part:
    """Arrays, Stream or Batched from one split as the user gave it."""
    if isinstance(value, (Arrays, Stream, Batched)):
        return value
    if is_py_dataset(value):
        return Batched(value, num_batches(value))
    if is_dataset(value):
        if is_batched(value):
            return Batched(value, cardinality(value))
        return _from_unbatched(value, field)
    if isinstance(value, dict):
        raise DataError(
            f"{field}: a dict must be the inputs of (x, y): pass (dict_of_inputs, y). "
            f"Received: a dict with keys {sorted(value)[:6]}."
        )
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return _arrays(value[0], value[1], field)
    raise DataError(
        f"{field}: expected arrays (x, y), a dict of inputs with y, a tf.data.Dataset, a "
        f"keras.utils.PyDataset, a callable returning one, or a dataset name. "
        f"Received: {_describe(value)}."
    )


def _arrays(x, y, field: str) -> Arrays:
    import numpy as np

    if y is None:
        raise DataError(
            f"{field}: expected targets y beside the inputs x (tpukit trains supervised models). Received: y=None."
        )
    try:
        x = _map_x(np.asarray, x)
        y = np.asarray(y)
    except Exception as e:
        raise DataError(f"{field}: could not read x and y as arrays: {one_line(e)}") from None
    lengths = {k: len(a) if a.ndim else 0 for k, a in _items(x)}
    if y.ndim == 0:
        raise DataError(f"{field}: expected y with one entry per example. Received: a scalar y={y!r}.")
    if any(a.dtype == object for _, a in _items(x)) or y.dtype == object:
        raise DataError(
            f"{field}: expected numeric arrays of equal-length examples. Received: an object array "
            "(ragged lists?); pad them to one length first."
        )
    for key, n in lengths.items():
        if n != len(y):
            which = "x" if key is None else f"x[{key!r}]"
            raise DataError(f"{field}: {which} has {n} examples and y has {len(y)}: they must have the same length.")
    if len(y) == 0:
        raise DataError(f"{field}: expected at least one example. Received: 0 examples.")
    return Arrays(x, y)


def _split(train, fraction, seed: int):
    """A seeded validation split: the same examples for the same seed, in every process."""
    import numpy as np

    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise DataError(
            f"validation_split: expected a fraction between 0 and 1 (exclusive), or None. "
            f"Received: validation_split={fraction!r}."
        )
    n = len(train)
    n_val = validation_count(n, fraction)
    if n_val < 1 or n_val >= n:
        raise DataError(
            f"validation_split: {fraction} of {n} examples leaves no validation or no training "
            f"examples. Received: validation_split={fraction!r}."
        )
    if isinstance(train, Stream):  # too big to permute in memory: the first examples validate
        return Stream(train.dataset.skip(n_val), n - n_val), Stream(train.dataset.take(n_val), n_val)
    order = np.random.default_rng([seed, 0x7A11D]).permutation(n)
    return train.take(np.sort(order[n_val:])), train.take(np.sort(order[:n_val]))


def validation_count(n: int, fraction: float) -> int:
    """Examples the seeded split holds out of `n` for validation: as many as Keras' `fit(validation_split=)`, which
    trains on the first floor(n * (1 - fraction)) and validates on the rest (keras/src/trainers/data_adapters/
    array_slicing.py, `train_validation_split`). Which examples differs: here a seeded draw, there the last ones."""
    return n - int(math.floor(n * (1.0 - fraction)))


def planned_train_examples(config, data=None, validation_data=None) -> Optional[int]:
    """Training examples a run of `config` will have, known without loading the data, or None.

    Built-in datasets know their size; arrays have a length; other data is
    counted only when the run loads it.
    """
    if data is None:
        if config.dataset not in builtin.DATASETS:  # a built-in image set (its name cannot be registered over)
            return None  # anything else is counted when loaded; text, in rows once tokenized
        n = builtin.train_size(config.dataset, config.dataset_size)
    elif (
        isinstance(data, (tuple, list))
        and len(data) == 2
        and hasattr(data[1], "__len__")
        and not (user_text.is_text(data))
    ):  # (x, y), not two documents or two prompt/response pairs
        n = min(len(data[1]), config.dataset_size or len(data[1]))
    else:
        return None
    if validation_data is None and config.validation_split is not None:
        n -= validation_count(n, config.validation_split)
    return n


# ---- an unbatched tf.data input, read into arrays where it fits ----------------------


def _from_unbatched(dataset, field: str) -> Part:
    """Read an unbatched (x, y) dataset into arrays if it fits in memory; otherwise stream it."""
    import numpy as np
    import tensorflow as tf

    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
        raise DataError(f"{field}: expected a dataset of unbatched (x, y) elements. Received: element_spec={spec}.")
    count = cardinality(dataset)
    if count == tf.data.INFINITE_CARDINALITY or int(dataset.cardinality()) == -1:
        raise DataError(
            f"{field}: the dataset repeats forever; pass one pass of it (no .repeat()). Received: an infinite dataset."
        )
    per_example = sum(element_bytes(s) for s in tf.nest.flatten(spec))
    if count is not None and count * per_example > IN_MEMORY_LIMIT:
        return Stream(dataset, count)
    xs, ys, total = [], [], 0
    for x, y in dataset.batch(4096).as_numpy_iterator():
        xs.append(x)
        ys.append(y)
        total += len(y) * per_example
        if total > IN_MEMORY_LIMIT:
            return Stream(dataset, count if count is not None else count_elements(dataset))
    if not ys:
        raise DataError(f"{field}: the dataset is empty. Received: 0 elements.")
    if isinstance(xs[0], dict):
        x = {k: np.concatenate([b[k] for b in xs]) for k in xs[0]}
    else:
        x = np.concatenate(xs)
    return _arrays(x, np.concatenate(ys), field)


# ---- the spec and the fingerprint ------------------------------------------------------


def _spec(train: Part, validation: Optional[Part], test: Optional[Part]) -> DataSpec:
    import numpy as np

    if isinstance(train, Arrays):
        input_shape = _map_x(lambda a: tuple(int(d) for d in a.shape[1:]), train.x)
        input_dtype = _map_x(lambda a: str(a.dtype), train.x)
        target_shape, target_dtype = tuple(int(d) for d in train.y.shape[1:]), str(train.y.dtype)
    else:
        dataset = train.dataset
        if is_py_dataset(dataset):
            x, y = dataset[0][:2]
            shapes = (_map_x(lambda a: tuple(np.shape(a)[1:]), x), tuple(np.shape(y)[1:]))
            dtypes = (_map_x(lambda a: str(np.asarray(a).dtype), x), str(np.asarray(y).dtype))
        else:
            x_spec, y_spec = (
                dataset.element_spec[:2] if isinstance(dataset.element_spec, tuple) else (dataset.element_spec, None)
            )
            skip = 1 if isinstance(train, Batched) else 0
            shapes = (
                _map_x(lambda s: tuple(d for d in s.shape[skip:]), x_spec),
                tuple(y_spec.shape[skip:]) if y_spec is not None else (),
            )
            dtypes = (_map_x(lambda s: s.dtype.name, x_spec), y_spec.dtype.name if y_spec is not None else "")
        (input_shape, target_shape), (input_dtype, target_dtype) = shapes, dtypes
    counts = [classes_in(p.y) for p in (train, validation, test) if isinstance(p, Arrays)]
    num_classes = max((n for n in counts if n is not None), default=None)
    return DataSpec(
        input_shape=input_shape,
        input_dtype=input_dtype,
        target_shape=target_shape,
        target_dtype=target_dtype,
        num_classes=num_classes,
        num_train=len(train) if not isinstance(train, Batched) else None,
        num_validation=len(validation) if isinstance(validation, (Arrays, Stream)) else 0,
        num_test=len(test) if isinstance(test, (Arrays, Stream)) else 0,
    )


def one_hot_width(y) -> Optional[int]:
    """The number of classes of one-hot labels (shape (n, k), k >= 2, each row one 1 and 0s elsewhere), else None."""
    import numpy as np

    y = np.asarray(y)
    if (
        y.ndim != 2
        or y.shape[1] < 2
        or not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating) or y.dtype == bool)
    ):
        return None
    if not np.all((y == 0) | (y == 1)) or not np.all(y.sum(axis=1) == 1):
        return None
    return int(y.shape[1])


def classes_in(y) -> Optional[int]:
    """How many classes labels name: the width of one-hot labels, largest + 1 for integer labels, else None."""
    import numpy as np

    width = one_hot_width(y)
    if width is not None:
        return width
    if np.issubdtype(y.dtype, np.integer) and y.size:
        return int(y.max()) + 1
    return None


def _fingerprint(train: Part, validation: Optional[Part]) -> Optional[str]:
    """A short hash of the training and validation arrays: resume checks that the data is the same."""
    if not isinstance(train, Arrays):
        return None
    import numpy as np

    digest = hashlib.sha256()
    for part in (train, validation):
        if not isinstance(part, Arrays):
            continue
        for key, a in sorted(_items(part.x), key=lambda kv: str(kv[0])) + [("y", part.y)]:
            a = np.ascontiguousarray(a)
            digest.update(f"{key}|{a.dtype}|{a.shape}".encode())
            digest.update(a.data)
    return digest.hexdigest()[:16]


# ---- helpers ---------------------------------------------------------------------------


def _items(x):
    return list(x.items()) if isinstance(x, dict) else [(None, x)]


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return f"{type(value).__name__}" + (f" of shape {tuple(shape)}" if shape is not None else "")
