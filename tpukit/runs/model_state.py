"""A model's training state as plain arrays: what an epoch backup holds, taken in milliseconds.

Keras' `save_weights` walks the model's object tree on every call, and builds throwaway layers and optimizers
to learn which attributes to skip: 23-38 ms for the zoo's 7-layer mlp, 105-133 ms for its resnet, most of it
Python on fit's thread, at every epoch's end (docs/decisions.md, issue 18). A backup needs less: the values of
the variables that training changes, which are exactly the ones `save_weights` writes (each layer's weights,
`model.weights`, and the optimizer's `variables`), read in a fixed order and written with NumPy (4-7 ms for
the mlp, 19-38 ms for the resnet). Only tpukit reads these files back, into a model built the same way.

The final weights of a run stay in Keras' own format (`model.weights.h5`), which any Keras user can load; a LoRA
run's are its adapters alone, in KerasHub's format (`adapters.lora.h5`), which `backbone.load_lora_weights` reads.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from typing import List, Tuple

import numpy as np

from tpukit.runs.directory import ADAPTERS_FILE, STATE_SUFFIX
from tpukit.errors import TpukitError
from tpukit.models import lora

ADAPTERS_SUFFIX = ADAPTERS_FILE[ADAPTERS_FILE.index(".") :]  # .lora.h5, as KerasHub insists
_META = "__meta__"  # each variable's (key, path, dtype, shape, stored as bits), as JSON
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class StateMismatch(TpukitError, ValueError):
    """A state file that does not fit the model it is loaded into. The message is one clause, no period."""


@dataclasses.dataclass(frozen=True)
class State:
    """The values of a model's variables (and its optimizer's) at one instant, on the host."""

    arrays: dict
    meta: Tuple[Tuple[str, str, str, Tuple[int, ...], bool], ...]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def save(self, path: str) -> None:
        """Write the state to `path` (a `.npz` name; NumPy, uncompressed)."""
        with open(path, "wb") as f:
            np.savez(f, **self.arrays, **{_META: np.array(json.dumps(self.meta))})


def is_state_file(path) -> bool:
    """Whether `path` is a state file; else it is a Keras weights file (final weights, older runs' backups)."""
    return str(path).endswith(STATE_SUFFIX)


def take(model) -> State:
    """The model's weights and its optimizer's variables, copied to the host now.

    On JAX read it through a callback's `self.model`, which brings the training state back into the variables.
    """
    import keras

    arrays, meta = {}, []
    for group, variables in (("m", _model_variables(model)), ("o", _optimizer_variables(model))):
        for i, v in enumerate(variables):
            key = f"{group}{i}"
            value = np.asarray(keras.ops.convert_to_numpy(v))
            bits = value.dtype.kind not in "biufc"  # bfloat16 and the other ml_dtypes: stored as their bits
            arrays[key] = value.view(_BITS[value.dtype.itemsize]) if bits else value
            meta.append((key, v.path, _dtype_name(v), tuple(int(d) for d in v.shape), bits))
    return State(arrays, tuple(meta))


def restore(model, path, optimizer: bool = True) -> None:
    """Assign a state file's values to `model`'s variables (and, with `optimizer`, its built optimizer's).

    Raises:
        StateMismatch: the file holds other variables than the model has (their number, shapes or dtypes), or
            cannot be read.
    """
    try:
        pairs = _pairs(model, path, optimizer)
    except StateMismatch:
        raise
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:
        raise StateMismatch(f"it cannot be read ({type(e).__name__}: {str(e).strip()[:120]})") from None
    for v, value in pairs:  # only once every variable fits: a refused file changes nothing
        v.assign(value)


def _pairs(model, path, optimizer):
    """[(variable, value to assign)] for every variable the file restores, each checked against the model."""
    with np.load(str(path), allow_pickle=False) as stored:
        meta = json.loads(str(stored[_META]))
        groups = {"m": _model_variables(model)}
        if optimizer:
            groups["o"] = _optimizer_variables(model)
        pairs = []
        for group, variables in groups.items():
            saved = [m for m in meta if m[0].startswith(group)]
            if len(saved) != len(variables):
                what = "model weights" if group == "m" else "optimizer variables"
                raise StateMismatch(f"it holds {len(saved)} {what}, the model has {len(variables)}")
            for (key, name, dtype, shape, bits), v in zip(saved, variables):
                if tuple(shape) != tuple(v.shape) or dtype != _dtype_name(v):
                    raise StateMismatch(
                        f"{name} is {dtype} {tuple(shape)} there, {v.path} is {_dtype_name(v)} {tuple(v.shape)} here"
                    )
                value = stored[key]
                pairs.append((v, value.view(_numpy_dtype(dtype)) if bits else value))
    return pairs


def _model_variables(model) -> List:
    """The model's variables a backup holds: all, but where only LoRA adapters train, not the frozen weights (the
    preset's, which never change, and which the resumed run loads from it again): a backup of a 1 B model is then a
    few MB, not 2 GB. Non-float variables (seed generators' states) are kept either way."""
    if adapters_only(model):
        return [w for w in model.weights if w.trainable or "float" not in str(w.dtype)]
    return list(model.weights)


def _optimizer_variables(model) -> List:
    optimizer = getattr(model, "optimizer", None)
    return list(getattr(optimizer, "variables", None) or []) if optimizer is not None else []


def _dtype_name(variable) -> str:
    import keras

    return keras.backend.standardize_dtype(variable.dtype)


def _numpy_dtype(name: str):
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # bfloat16, float8_*: installed with both TensorFlow and JAX

        return np.dtype(getattr(ml_dtypes, name))


def nbytes(model) -> int:
    """About how many bytes a backup or the final weights take: the variables a backup holds, and the optimizer's."""
    variables = _model_variables(model)
    optimizer = getattr(model, "optimizer", None)
    variables += list(getattr(optimizer, "variables", None) or [])
    total = 0
    for v in variables:
        count = 1
        for dim in v.shape:
            count *= int(dim or 1)
        digits = "".join(c for c in str(v.dtype) if c.isdigit())
        total += count * (int(digits) // 8 if digits else 4)
    return total


def adapters_only(model) -> bool:
    """Whether only `model`'s LoRA adapters train (`models.lora`): its final weights are then the adapters alone,
    and the rest is the preset's."""
    return lora.adapters_only(model)


def save_final(model, path) -> None:
    """Write a run's final weights to `path`: the adapters (KerasHub's `.lora.h5`) where only they train, else
    Keras' `save_weights`."""
    if adapters_only(model):
        lora.save_adapters(model, path)
    else:
        model.save_weights(str(path))


def load_into(model, path, optimizer: bool = True) -> "str | None":
    """Load an epoch backup or a `.weights.h5` into `model`; what did not fit, as text, or None when all did.

    Keras' `load_weights` only warns when some variables do not fit, so its warnings count as failures here
    (without `optimizer`, the ones about the optimizer's state, which is not loaded, do not).
    """
    import warnings

    if is_state_file(path):
        try:
            restore(model, path, optimizer=optimizer)
        except StateMismatch as e:
            return str(e)
        return None
    if str(path).endswith(ADAPTERS_SUFFIX):
        return lora.load_adapters(model, path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.load_weights(str(path))
        except Exception as e:
            return f"{type(e).__name__}: {str(e).strip()}"
    return next(
        (str(w.message) for w in caught if "saving" in w.filename and (optimizer or "optimizer" not in str(w.message))),
        None,
    )
