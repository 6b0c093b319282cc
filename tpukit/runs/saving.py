"""Trained models out of runs: load a run's model, export it, start a new run from a run's weights.

A run directory keeps its final weights (`model.weights.h5`) and, until it
completes, a backup of its last whole epoch; config.json names the model
(a zoo or registered name, or an import path), and result.json the data's
shape. That is enough to rebuild the model in a fresh process, which is
what `load()` does. A model handed to train() as an object is rebuilt from
the same object or factory passed again (`load(run_dir, model=...)`).

`export()` writes a `.keras` file that plain `keras.saving.load_model` opens
in a float32 session (a mixed-precision model is copied into float32 layers
first, so a CPU or a GPU without bfloat16 runs it as is), and, where
TensorFlow is the backend, a SavedModel for serving beside it. On JAX only
the `.keras` file is written: Keras exports a SavedModel from JAX through
TensorFlow (jax2tf), which Colab's TPU runtime does not have. A fine-tuned
KerasHub model also goes out as a KerasHub preset or a Hugging Face folder
(`exporting`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Optional, Tuple

from tpukit import registry
from tpukit import precision as precisions
from tpukit.data.types import DataSpec
from tpukit.errors import TpukitError, one_line
from tpukit.models import lora, modeling, source
from tpukit.models.modeling import ModelError
from tpukit.runs import backups, directory, model_state


class ExportError(TpukitError, ValueError):
    """The model cannot be written where it was asked to go. The message is one line."""

    bad_input = True


def weights_file(run_dir) -> Tuple[Path, str]:
    """(weights file, what it holds) of a run: a completed run's final weights, else its last whole epoch.

    Raises:
        directory.RunDirError: not a run directory, or no weights (the run ended before its first whole epoch).
    """
    run_dir = Path(run_dir)
    try:
        result = directory.recorded(run_dir)
    except FileNotFoundError:
        raise directory.RunDirError(
            f"{run_dir} is not a tpukit run directory (no config.json); pass the directory "
            "of a run (tpukit.list_runs(logdir) lists them)."
        ) from None
    final = directory.final_weights(run_dir)
    status = result.get("status", "running")
    if status == "completed" and final.is_file():
        return final, f"final weights of {run_dir.name} ({result.get('epochs_done', 0)} epochs)"
    backup = backups.latest(run_dir / directory.BACKUP_DIR, verify=False)
    if backup is not None:
        return Path(backup.path), (f"weights of {run_dir.name}'s last whole epoch ({backup.epochs_done}, {status})")
    parent = result.get("parent")
    if parent and status != "completed":
        path, _ = weights_file(parent)
        return path, f"weights of {Path(parent).name}, the run {run_dir.name} extends (no epoch of its own)"
    raise directory.RunDirError(
        f"{run_dir} holds no weights: the run {status} before its first whole epoch ended"
        f"{'' if final.is_file() or status != 'completed' else ' (model.weights.h5 is missing)'}; "
        "load or start from a run that trained at least one epoch."
    )


def load_weights(model, path, what: str) -> None:
    """Load a run's model weights into `model` (its optimizer's state is not loaded); ModelError if they do not fit."""
    problem = model_state.load_into(model, path, optimizer=False)
    if problem:
        detail = _shape_mismatch(model, problem)
        if detail is None:
            lines = [line.strip() for line in problem.splitlines() if line.strip()]
            detail = next((line for line in lines if "shape" in line), lines[1] if len(lines) > 1 else lines[0])
            detail = detail if len(detail) <= 160 else detail[:157] + "..."
        raise ModelError(
            f"the {what} do not fit this {type(model).__name__} ({detail}); use the model that run "
            "trained (same layers and shapes)."
        )


_ASSIGN = re.compile(r"variable\.shape=(\([^)]*\)).*?value\.shape=(\([^)]*\))", re.S)


def _shape_mismatch(model, problem: str):
    """'layer dense: kernel (4, 16) here, (4, 8) in the run' from Keras' `variable.assign` text, or None.

    Keras loads the layers in order and stops at the first variable whose shape differs, so the first of this
    model's variables with the shape its message names is the one that differs.
    """
    match = _ASSIGN.search(problem)
    if not match:
        return None
    here, there = match.groups()
    for variable in model.weights:
        if str(tuple(variable.shape)) == here:
            layer, _, name = getattr(variable, "path", variable.name).rpartition("/")
            return f"layer {layer.rpartition('/')[2] or layer}: {name} {here} here, {there} in the run"
    return f"a variable {here} here, {there} in the run"


def init_from(model, run_dir) -> str:
    """Load `run_dir`'s final weights into the new run's model; returns the note the run records."""
    path, what = weights_file(run_dir)
    try:
        load_weights(model, path, what)
    except ModelError as e:
        raise ModelError(f"RunConfig.init_from: {e} Received: init_from={str(run_dir)!r}.") from None
    return f"init_from: started from the {what}"


def rebuild(run_dir, model=None, config=None):
    """Build the run's model (from `model`, else the name in its config: `models.source.choose`) and load its
    weights."""
    config = config or directory.load_config(run_dir)
    result = directory.recorded(run_dir)
    path, what = weights_file(run_dir)
    policy = result.get("model_policy") or config.precision
    policy = policy if precisions.find(policy) else precisions.FLOAT32.name
    try:
        kind = source.choose(model, config)
    except registry.RegistryError:
        raise ModelError(
            f"cannot rebuild the model of {run_dir}: it trained {config.model}, an object handed to train(), "
            "which config.json cannot name; pass it again: tpukit.load(run_dir, model=<the same factory or "
            "a built model>)."
        ) from None
    try:
        with precisions.policy(policy):
            target = kind.rebuild(config, _spec(result))
    except ModelError as e:
        raise ModelError(f"cannot rebuild the model of {run_dir}: {e}") from None
    except Exception as e:
        raise ModelError(
            f"cannot rebuild the model of {run_dir}: its factory {config.model!r} raised {one_line(e, 160)}."
        ) from None
    if not target.weights:
        _build_on_zeros(target, _spec(result))
    load_weights(target, path, what)
    return target


def _spec(result):
    values = dict((result.get("data") or {}).get("spec") or {})
    if not values:
        return None
    names = {f.name for f in dataclasses.fields(DataSpec)}
    return DataSpec(**{k: _tuples(v) for k, v in values.items() if k in names})


def _tuples(value):
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def _build_on_zeros(model, spec) -> None:
    """Create a subclassed model's variables by calling it once on zeros of the data's shape."""
    import numpy as np

    if spec is None:
        return
    shape, dtype = spec.input_shape, spec.input_dtype
    if isinstance(shape, dict):
        sample = {k: np.zeros((1, *shape[k]), (dtype or {}).get(k, "float32")) for k in shape}
    else:
        sample = np.zeros((1, *shape), dtype or "float32")
    model(sample, training=False)


# ---- export -------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Exported:
    """What `export` wrote: the `.keras` file, the SavedModel folder (or None), and a sentence on both."""

    keras_path: str
    saved_model: Optional[str]
    note: str

    def __str__(self) -> str:
        return self.note


def export(model, path) -> Exported:
    """Write `model` to `path` as a float32 `.keras` file (its LoRA adapters merged), and a SavedModel beside it on
    TensorFlow. `path` ending in `.keras` is the file (the SavedModel goes to `<name>_saved_model/` beside it); any
    other path is a folder that gets `model.keras` and `saved_model/`. The other formats: `exporting.export`.

    Raises:
        ExportError: the path cannot be written, or the model cannot be copied into float32 layers.
    """
    import keras

    path = Path(path)

    if path.suffix == ".keras":
        folder, keras_path = path.parent, path
        saved = path.with_name(path.stem + "_saved_model")
    else:
        folder, keras_path, saved = path, path / "model.keras", path / "saved_model"
    check_writable(folder, keras_path)
    plain = float32_copy(model)
    try:
        with directory.atomic(keras_path) as tmp:
            plain.save(str(tmp))
    except OSError as e:
        raise ExportError(
            f"could not write {keras_path} ({e.strerror or type(e).__name__}); choose a writable path."
        ) from None
    note = f"wrote {keras_path} (float32; open it with keras.saving.load_model)"
    name = _unregistered(plain)
    if name:
        note = (
            f"wrote {keras_path} (float32); {name} is not registered with "
            f"@keras.saving.register_keras_serializable(), so keras.saving.load_model opens it only with "
            f"custom_objects={{{name!r}: {name}}}"
        )
    if keras.backend.backend() != "tensorflow":
        return Exported(
            str(keras_path),
            None,
            note + "; on JAX no SavedModel is written: Keras exports one through "
            "TensorFlow, so load the .keras file in a TensorFlow session "
            "and call model.export there",
        )
    try:
        _quiet_export(plain, saved)
    except Exception as e:
        return Exported(str(keras_path), None, note + f"; no SavedModel: model.export failed ({one_line(e, 160)})")
    return Exported(str(keras_path), str(saved), note + f", and a SavedModel for serving at {saved}")


def check_writable(folder: Path, target: Path) -> None:
    why = directory.unwritable(folder)
    if why:
        raise ExportError(
            f"cannot export to {target}: {folder} is not a writable directory ({why}); choose another path."
        )
    if target.is_dir():
        raise ExportError(
            f"cannot export to {target}: it is a directory; give a path ending in .keras or a new folder."
        )


def _quiet_export(model, saved: Path) -> None:
    import contextlib
    import io
    import logging
    import shutil

    if saved.exists():
        shutil.rmtree(saved)
    logger = logging.getLogger("tensorflow")  # "INFO:tensorflow:Assets written to: ..." on stderr
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # Keras prints the SavedModel's signature
            model.export(str(saved), format="tf_saved_model")
    finally:
        logger.setLevel(level)


def _off_float32(model) -> bool:
    """Whether some layer of `model` computes or keeps its weights in another dtype than float32: mixed precision, or
    a preset loaded in bfloat16, whose LoRA adapters a bfloat16 save would merge into its kernels at bfloat16's
    rounding step, losing the updates smaller than it."""
    layers = [model, *getattr(model, "_flatten_layers", lambda: [])()]
    policies = [getattr(layer, "dtype_policy", None) for layer in layers]
    return any(
        p is not None and "float32" != getattr(p, dtype, "float32")
        for p in policies
        for dtype in ("compute_dtype", "variable_dtype")
    )


def _merged_weights(model, copy) -> list:
    """`model`'s weights for `copy` (the same layers, as float32 NumPy arrays), each LoRA layer's adapters merged
    into its kernel in float32 (`lora.merged_kernels`), since `copy`, built from the model's config, has no
    adapters. Without LoRA, simply `model.get_weights()`."""
    import numpy as np

    floats = lora.float_kernels(model)  # a quantized base's int8 weights as floats (the copy's are float32)
    merged = {**floats, **lora.merged_kernels(model, floats)}
    if not merged:
        return model.get_weights()
    values = {w.path: merged.get(w.path, w.numpy()) for w in model.weights}
    return [np.asarray(values[w.path], dtype="float32") for w in copy.weights]


def float32_copy(model, merge: bool = False):
    """`model` itself if every layer is float32, else a copy with float32 layers and the same weights; with `merge`,
    a copy also where LoRA adapters are float32, so they are merged (a copy built from the config has none).

    The copy keeps the loss and metrics it was compiled with, and a fresh optimizer of the same kind (a
    LossScaleOptimizer's inner one): a float32 session can evaluate and fine-tune it.
    """
    import keras
    import numpy as np

    if not _off_float32(model) and not (merge and lora.adapted_layers(model)) and not lora.quantized(model):
        return model
    config = _float32(keras.saving.serialize_keras_object(model))
    config.pop("compile_config", None)
    try:
        with precisions.FLOAT32.scope():
            copy = keras.saving.deserialize_keras_object(config)
            if not copy.built or not copy.weights:
                inputs = [np.zeros((1, *t.shape[1:]), t.dtype) for t in model.inputs] if _has_inputs(model) else None
                copy(inputs[0] if inputs and len(inputs) == 1 else inputs, training=False)
            copy.set_weights(_merged_weights(model, copy))
            _copy_assets(model, copy)
    except Exception as e:
        raise ExportError(
            f"could not copy {type(model).__name__} into float32 layers for export ({one_line(e, 160)}); "
            "a subclassed model needs get_config() and @keras.saving.register_keras_serializable()."
        ) from None
    if getattr(model, "compiled", False):
        args = modeling.compile_args(model)
        optimizer = args.get("optimizer") or getattr(model, "optimizer", None)
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        fresh = inner.__class__.from_config(inner.get_config()) if hasattr(inner, "get_config") else "adam"
        with precisions.FLOAT32.scope():
            copy.compile(
                optimizer=fresh,
                loss=args.get("loss"),
                metrics=args.get("metrics"),
                loss_weights=args.get("loss_weights"),
                weighted_metrics=args.get("weighted_metrics"),
            )
            copy.optimizer.build(copy.trainable_variables)  # saved whole, so load_model finds every slot it builds
    return copy


def _copy_assets(model, copy) -> None:
    """What `model`'s layers keep outside their weights (their assets: a KerasHub tokenizer's vocabulary, which
    `generate("text")` needs), written by each layer and read by its twin in `copy`, as a `.keras` file carries it."""
    import tempfile

    twins = {(type(layer), layer.name): layer for layer in copy._flatten_layers()}  # by name: a generate() call
    with tempfile.TemporaryDirectory() as folder:  # adds layers to the model that the copy has not made yet
        for i, source in enumerate(model._flatten_layers()):
            target = twins.get((type(source), source.name))
            if not (hasattr(source, "save_assets") and hasattr(target, "load_assets")):
                continue
            where = os.path.join(folder, str(i))
            os.mkdir(where)
            source.save_assets(where)
            if os.listdir(where):
                target.load_assets(where)


def _unregistered(model) -> Optional[str]:
    """The class name of a subclassed model that plain `keras.saving.load_model` cannot find, else None."""
    import keras

    cls = type(model)
    if cls.__module__.startswith("keras.") or cls in (keras.Model, keras.Sequential):
        return None
    return cls.__name__ if keras.saving.get_registered_name(cls) == cls.__name__ else None


def _has_inputs(model) -> bool:
    try:
        return bool(model.inputs)
    except (AttributeError, ValueError):
        return False


_OFF_FLOAT32 = ("mixed_", "bfloat16", "float16")  # the policies an export writes as float32
_QUANTIZED_POLICIES = ("QuantizedDTypePolicy", "Int4DTypePolicy")  # int8, int4 (Keras 3.13's, 3.15's per group)


def _float32(value):
    """A serialized model with every mixed, 16-bit or quantized dtype policy replaced by float32."""
    if isinstance(value, dict):
        if value.get("class_name") in _QUANTIZED_POLICIES:  # QLoRA's base: a float copy holds floats there
            return {**value, "module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}}
        if value.get("class_name") in ("DTypePolicy", "FloatDTypePolicy") and str(
            (value.get("config") or {}).get("name", "")
        ).startswith(_OFF_FLOAT32):
            return {**value, "config": {**value["config"], "name": "float32"}}
        return {
            k: ("float32" if k == "dtype" and isinstance(v, str) and v.startswith(_OFF_FLOAT32) else _float32(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_float32(v) for v in value]
    return value
