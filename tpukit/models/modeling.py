"""Compile a run's model and check it fits the data, for any kind of model (`models.source` builds it).

Compiling: a model that comes back compiled keeps its own optimizer, loss and metrics (the user's compile() wins
over RunConfig.optimizer, learning_rate, loss and metrics); tpukit compiles it once more only to set
steps_per_execution and jit_compile, and, under a loss-scaled precision, to wrap its optimizer for loss scaling.
An uncompiled model is compiled with the RunConfig's optimizer, learning rate, loss and metrics. What the user
compiled with is handed in (`user`): the model source knows it (a clone carries its original's), so nothing is
kept on the model itself.
"""

from __future__ import annotations

import math
from typing import Optional

from tpukit.errors import TpukitError, TpukitWarning, one_line


class ModelError(TpukitError, ValueError):
    """The model cannot be built or does not fit the data. The message is one line."""

    bad_input = True


class ModelNote(TpukitWarning):
    """One line, once per run, on what tpukit did with a built model handed to train()."""


class ClonedModelWarning(ModelNote):
    """A built model was handed over where its variables cannot serve the run: tpukit trains a clone."""


class TrainedInPlace(ModelNote):
    """A built model was handed over and is trained in place: after train() the user's object holds the weights."""


def compile(model, config, user: Optional[dict] = None, note: str = "") -> str:
    """Compile `model` for the run, once; returns a sentence on where the optimizer, loss and metrics came from.

    Args:
        user: what the model was compiled with before tpukit got it (`compile_args`), or what its source
            compiles it with (a preset's next-token loss): kept, with the run's steps per execution and XLA.
        note: the sentence to return where `user` comes from the source rather than the user.
    """
    import keras

    from tpukit import precision as precisions

    if user:
        optimizer = precisions.get(config.precision).wrap(
            user.get("optimizer")
            or precisions.make_optimizer(
                config.optimizer, config.learning_rate, config.precision, config.accumulation_steps
            )
        )
        args = {k: user.get(k) for k in ("loss", "loss_weights", "metrics", "weighted_metrics")}
        model.compile(
            optimizer=optimizer, **args, steps_per_execution=config.steps_per_execution, jit_compile=config.jit_compile
        )
        inner = getattr(optimizer, "inner_optimizer", optimizer)
        return note or (
            f"the model came compiled: its own optimizer ({type(inner).__name__}), loss and metrics were "
            "kept (RunConfig.optimizer, learning_rate, loss and metrics apply to uncompiled models)"
        )
    try:
        keras.losses.get(config.loss)  # unknown names fail here, in one line
        for metric in config.metrics:
            if metric not in ("accuracy", "acc"):
                keras.metrics.get(metric)
    except (ValueError, TypeError) as e:
        raise ModelError(
            f"RunConfig.loss/metrics: {one_line(e)}. Received: loss={config.loss!r}, metrics={config.metrics!r}."
        ) from None
    model.compile(
        optimizer=precisions.make_optimizer(
            config.optimizer, config.learning_rate, config.precision, config.accumulation_steps
        ),
        loss=config.loss,
        metrics=list(config.metrics),
        steps_per_execution=config.steps_per_execution,
        jit_compile=config.jit_compile,
    )
    return f"compiled by tpukit: {config.optimizer} at learning rate {config.learning_rate}, loss {config.loss}"


def check_fits(model, source, loss_name: str, user: Optional[dict] = None) -> None:
    """Fail in one line, before training, when the model cannot take the data or the labels don't fit it.

    Calls the model symbolically on a few examples' shapes (Keras' functional
    API: traced, never compiled or run), checks the loss takes the labels, and
    for sparse categorical losses that every label has an output unit: for the
    training data, and in the same way for validation_data and test_data (a
    mismatch there would otherwise surface from inside fit, as Keras' own
    error, after the run began). On JAX an eager pass compiled every op of the
    model and the loss, one by one: ~0.5 s of a run's start-up on this CPU.
    """
    parts = [("", source.train)]
    if source.validation is not None and source.validation_from != "split":  # a split is the training data's
        parts.append(("validation_data: ", source.validation))
    if source.test is not None:
        parts.append(("test_data: ", source.test))
    for prefix, part in parts:
        _check_part(model, part, loss_name, prefix, user)


def _check_part(model, part, loss_name: str, prefix: str, user: Optional[dict]) -> None:
    from tpukit.data import sources

    sample = sources.inputs_of(part, 2)
    try:
        outputs = _symbolic_call(model, sample)
    except Exception as e:
        raise sources.DataError(_cannot_take(model, part, sample, prefix, e)) from None
    if not isinstance(part, sources.Arrays) or isinstance(part.y, dict):
        return
    _check_labels(user, loss_name, part.y, outputs, prefix)  # before the loss runs: TF's own error is cryptic
    _check_loss_takes(model, loss_name, part.y, outputs, prefix, (user or {}).get("loss"))


def _cannot_take(model, part, sample, prefix: str, error: BaseException) -> str:
    """One line on inputs the model cannot take: the model's example shape, the data's, and the fix."""
    import math

    import numpy as np

    single = not isinstance(sample, dict) and len(_model_inputs(model)) == 1
    want = tuple(_model_inputs(model)[0].shape[1:]) if single else None
    have = tuple(int(d) for d in np.shape(sample)[1:]) if single else None
    if not single or _fits(have, want):  # shapes that agree: the failure is inside the model, as Keras says
        return (
            f"{prefix}the model cannot take this data: {one_line(error)}. Received: examples of shape "
            f"{_example_shapes(sample)}; the model takes {_expected_inputs(model)}."
        )
    if prefix:  # the training data fits (it is checked first): these examples differ from it
        return (
            f"{prefix}the model cannot take this data: it takes examples of shape {want}, and these have shape "
            f"{have}: give {prefix.rstrip(': ')} examples of the shape the training data has."
        )
    said = f"the model cannot take this data: it takes examples of shape {want}, and the data's have shape {have}"
    if None not in want and math.prod(want) == math.prod(have):
        last = "keras.layers.Flatten()" if len(want) == 1 else f"keras.layers.Reshape({want})"
        return (
            f"{said}: reshape the data (x.reshape(len(x), {', '.join(str(d) for d in want)})), or build the "
            f"model for {have}: keras.Input({have}) followed by {last}."
        )
    return (
        f"{said}: build the model for the data's shape, keras.Input({have}) (a factory that takes the DataSpec "
        f"reads it as spec.input_shape), or give the data examples of shape {want}."
    )


def _fits(have, want) -> bool:
    return len(have) == len(want) and all(w is None or w == h for h, w in zip(have, want))


def _check_labels(user, loss_name, y, outputs, prefix: str) -> None:
    """One line for labels the loss cannot take: one-hot labels for a sparse loss (or the other way round),
    class numbers beyond the model's output units, fractional labels for a classification loss."""
    import numpy as np

    from tpukit.data import sources

    sparse = "sparse_categorical" in str(loss_name)
    categorical = "categorical" in str(loss_name) and not sparse
    if not (sparse or categorical):
        return
    y = np.asarray(y)
    units = int(outputs.shape[-1]) if hasattr(outputs, "shape") and len(outputs.shape) == 2 else None
    width = sources.one_hot_width(y)
    if sparse and width and units:
        fix = (
            "pass the class numbers, as the training data has them: y.argmax(axis=1)"
            if prefix
            else f"{_use_loss(user, 'categorical')}, or pass the class numbers: y.argmax(axis=1)"
        )
        more = f"; and give the last layer {width} units, one per class (it has {units})" if units != width else ""
        raise sources.DataError(
            f"{prefix}the labels are one-hot ({width} columns, one 1 per example), but the loss {loss_name} takes "
            f"class numbers (0 to {width - 1}): {fix}{more}."
        )
    if categorical and width and units and units != width:
        raise sources.DataError(
            f"{prefix}the labels are one-hot with {width} classes ({width} columns, one 1 per example), but the "
            f"model's output has {units} unit(s) for the loss {loss_name}: give the last layer {width} units (one per "
            "class)."
        )
    whole = np.issubdtype(y.dtype, np.integer) or (np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)))
    if categorical and units and units > 1 and whole and (y.ndim == 1 or y.shape[1:] == (1,)):
        top = int(y.max())
        fix = (
            f"encode them one-hot, as the training data is: keras.utils.to_categorical(y, {units})"
            if prefix
            else f"{_use_loss(user, 'sparse_categorical')}, or pass one-hot labels: "
            f"keras.utils.to_categorical(y, {max(units, top + 1)})"
        )
        raise sources.DataError(
            f"{prefix}the labels are class numbers ({int(y.min())} to {top}, one per example), but the loss "
            f"{loss_name} takes one-hot labels ({units} columns, one per output unit): {fix}."
        )
    if not sparse:
        return
    if np.issubdtype(y.dtype, np.floating) and not whole:
        raise sources.DataError(
            f"{prefix}the loss {loss_name} expects integer class labels, but y holds fractional {y.dtype} "
            "values; for regression use RunConfig(loss='mse', metrics=('mae',))."
        )
    if not whole or not hasattr(outputs, "shape"):
        return  # labels of another kind, or several outputs
    units = int(outputs.shape[-1]) if len(outputs.shape) else 1
    skipped = getattr((user or {}).get("loss"), "ignore_class", None)  # labels the loss skips (padding, prompts)
    y = y[y != skipped] if skipped is not None else y
    if not y.size:
        return
    top, low = int(y.max()), int(y.min())
    if low < 0 or top >= units:
        raise sources.DataError(
            f"{prefix}the labels run from {low} to {top}, but the model's output has {units} unit(s) for the loss "
            f"{loss_name}: give the last layer {top + 1} units (one per class), or check the labels."
        )


def _use_loss(args: Optional[dict], kind: str) -> str:
    """Where and how to name the loss `kind` ('categorical' or 'sparse_categorical') crossentropy: in the user's
    compile() if the model came compiled (`args`, keeping its from_logits), else in RunConfig."""
    if not args:
        return f"use RunConfig(loss='{kind}_crossentropy')"
    if getattr(args.get("loss"), "from_logits", False):
        cls = "CategoricalCrossentropy" if kind == "categorical" else "SparseCategoricalCrossentropy"
        return f"compile the model with loss=keras.losses.{cls}(from_logits=True)"
    return f"compile the model with loss='{kind}_crossentropy'"


def _symbolic_call(model, sample):
    """The model's output for inputs shaped like `sample`, as KerasTensors (shapes and dtypes, no values)."""
    import keras
    import numpy as np

    def spec(a):
        a = np.asarray(a)
        return keras.KerasTensor(a.shape, dtype=str(a.dtype))

    return model(keras.tree.map_structure(spec, sample), training=False)


def _check_loss_takes(model, loss_name, y, outputs, prefix: str = "", loss=None) -> None:
    """The loss (`loss`, the one compile will get, else the model's or `loss_name`) on a few labels and outputs of
    the model's shape: an output of the wrong shape for the labels fails here, in one line. On JAX it runs as one
    compiled function, not op by op."""
    import keras
    import numpy as np

    from tpukit.data import sources

    loss = loss or getattr(model, "loss", None) or loss_name
    if not (isinstance(loss, str) or callable(loss)) or isinstance(y, dict) or isinstance(outputs, (dict, list)):
        return  # several outputs: Keras matches them to their losses itself
    shape = tuple(outputs.shape)
    labels, predicted = np.asarray(y[: shape[0]]), np.full(shape, 0.5, dtype="float32")
    try:
        loss_fn = keras.losses.get(loss)
        try:
            if keras.backend.backend() != "jax":
                raise NotImplementedError  # TensorFlow runs eager ops without compiling them
            import jax

            jax.jit(loss_fn)(labels, predicted)
        except Exception:  # also a user's loss that JAX cannot trace: as it runs eagerly
            loss_fn(labels, predicted)
    except Exception as e:
        raise sources.DataError(
            f"{prefix}the model's output {shape[1:]} does not fit the labels "
            f"{tuple(np.shape(y))[1:] or '(scalar)'} for the loss {loss_name}: {one_line(e, 160)}. Check the last "
            "layers (a Flatten or pooling before the classifier?) or the loss."
        ) from None


def loss_name(config, user: Optional[dict] = None) -> str:
    """The loss the run trains with, as text (the user's compiled loss, or RunConfig.loss)."""
    loss = (user or {}).get("loss") or config.loss
    return getattr(loss, "name", None) or getattr(loss, "__name__", None) or str(loss)


def compile_args(model) -> dict:
    """The arguments the user passed to compile() (Keras keeps them raw in `_compile_config`)."""
    saved = getattr(model, "_compile_config", None)
    args = dict(getattr(saved, "config", {}) or {})
    if not args:
        args = {"optimizer": getattr(model, "optimizer", None), "loss": getattr(model, "loss", None)}
    return args


def input_shape(model):
    """The shape of a model's one input (a list of them for several), from its symbolic inputs."""
    shapes = [tuple(t.shape) for t in getattr(model, "inputs", None) or []]
    return shapes[0] if len(shapes) == 1 else shapes


def _model_inputs(model) -> list:
    """The model's symbolic inputs (functional and Sequential models), or [] where call() defines them."""
    try:
        return list(model.inputs or [])
    except (AttributeError, ValueError):
        return []


def _expected_inputs(model) -> str:
    """What the model takes per example: `(784,)`, or `'image' (32, 32, 3), 'extra' (4,)` for named inputs."""
    inputs = _model_inputs(model)
    if not inputs:
        return "the inputs its call() defines"
    if len(inputs) == 1:
        return str(tuple(inputs[0].shape[1:]))
    return ", ".join(f"{getattr(t, 'name', 'input')!r} {tuple(t.shape[1:])}" for t in inputs)


def _example_shapes(sample) -> str:
    """The data's shape per example (without the few examples the check took)."""
    import numpy as np

    if isinstance(sample, dict):
        return "{" + ", ".join(f"{k!r}: {tuple(np.shape(v)[1:])}" for k, v in sample.items()) + "}"
    return str(tuple(np.shape(sample)[1:]))


def perplexity(loss: float) -> float:
    """exp of a mean next-token loss (inf past float64's range): the run's logs and the panel's chart alike."""
    return math.exp(loss) if loss < 700 else math.inf


def add_perplexity(logs) -> None:
    """An epoch's `logs` with perplexity beside each loss (a language model's: `ModelSource.callbacks`)."""
    for loss in ("loss", "val_loss"):
        if logs is not None and logs.get(loss) is not None:
            logs[loss.replace("loss", "perplexity")] = perplexity(float(logs[loss]))
