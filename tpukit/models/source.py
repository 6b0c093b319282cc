"""What builds a run's model: one object per kind of model, chosen once from what the user gave (`choose`).

The kinds: a factory (a zoo or registered name, an import path, or a callable handed to `train()`), a built
`keras.Model`, and a KerasHub preset (`models.pretrained.Preset`, any family). Each owns what differs between
them, so the run above it asks the object and never the model's class: building in the run's scope and policy,
what the user compiled with, compiling once, which text encoder its data needs, whether it writes samples, how
its weights lie over a model-parallel mesh, rematerialization, what fit it trains with, what a run keeps, and
which of RunConfig's settings it reads (`check`: one that does not apply is one line, not ignored).

A new kind is one subclass of `ModelSource` that `choose` returns, or that a registered name or a
`registry` name provider gives (as `pretrained.named` gives a `Preset`).
"""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

from tpukit import registry
from tpukit.config import ConfigError
from tpukit.errors import one_line
from tpukit.models import lora
from tpukit.models.modeling import ClonedModelWarning, ModelError, TrainedInPlace, compile_args
from tpukit.models import modeling

if TYPE_CHECKING:
    import keras

    from tpukit.models import memory

# RunConfig's settings that only some kinds of model read, and what they are for (said when refused).
KIND_SETTINGS = {
    "lora_rank": "LoRA adapters",
    "lora_alpha": "LoRA adapters",
    "lora_targets": "LoRA adapters",
    "quantize": "frozen weights under LoRA adapters",
    "sequence_length": "text laid out in rows of tokens",
    "sample_prompt": "text samples before and after training",
    "model_parallel": "a layout map that splits its weights over devices",
    "method": "answers to score for preference tuning",
    "preference": "answers to score for preference tuning",
}


# The model sources a method other than "sft" tunes (`RunConfig.method`): method -> (the source a run named, its config)
# -> the source that tunes it. `models.preference` adds DPO and SimPO for presets (`pretrained.Preset.for_method`).
TUNED: Dict[str, Callable] = {}


class ModelSource:
    """What builds a run's model, and everything that differs by kind of model (the base: a plain Keras model).

    `reads` names the settings of `KIND_SETTINGS` this kind uses; `check` refuses the others where the user set
    them. Subclasses override what differs; the defaults are a Keras model's.
    """

    description = "a Keras model"
    reads: Tuple[str, ...] = ()
    rows_per_example = 1  # rows of the model's input an example is (a preference pair is 2)
    chart = "accuracy"  # the figure a view charts beside the loss: a metric of the logs, or "perplexity" (exp(loss))

    def check(self, config) -> None:
        """A one-line ConfigError for a setting of `config` the user set that this kind of model has no use for."""
        unused = [name for name in KIND_SETTINGS if name not in self.reads and config.is_set(name)]
        if unused:
            name = unused[0]
            raise ConfigError(
                f"RunConfig.{name}={getattr(config, name)!r} applies to a model with {KIND_SETTINGS[name]} (a KerasHub "
                f"preset), and {self.description} has none; leave {', '.join(unused)} unset, or pass a preset as "
                f"model=.",
                field=name,
                value=getattr(config, name),
            )

    def settings_note(self, config) -> Optional[Tuple[str, ...]]:
        """What `config` makes of the settings this kind reads (a line each, in `reads`' order), before anything
        loads; None where it reads none (the panel shows their fields only where there are lines)."""
        return None

    def memory_note(self, config, runtime=None) -> str:
        """A training step's memory estimated before anything loads, or "" where only the built model can say."""
        return ""

    def shape(self, model) -> Optional["memory.Shape"]:
        """The widths a training step's memory scales with (`models.memory`), or None: no estimate for this kind."""
        return None

    def for_method(self, config) -> "ModelSource":
        """The source of a run of `config.method` ("sft": this one; a preference method: a language model's)."""
        return self

    def check_data(self, data) -> None:
        """A one-line DataError for loaded data (`sources.Source`) this kind of model cannot learn from."""

    def check_fits(self, model, data, loss_name: str, user) -> None:
        """A one-line error where `model` cannot take `data` or its labels (`modeling.check_fits`)."""
        modeling.check_fits(model, data, loss_name, user)

    def training_flops(self, model, sample) -> Tuple[Optional[int], str]:
        """(training FLOPs per example or None, how counted) on a few examples' inputs (`models.flops`)."""
        from tpukit.models import flops

        return flops.training_flops_per_example(model, sample)

    def ready_data(self, model, data, kept: Optional[dict], batch: int):
        """(the data as the built `model`'s loss needs it, arrays the run keeps for a resume, a note): for most kinds
        the data as it is. `kept`: what an earlier part of the run kept; `batch`: the global batch."""
        return data, None, None

    def build(self, config, spec, *, in_place: bool, policy: str) -> Tuple["keras.Model", str]:
        """(the run's model, built under the current policy and scope but not compiled; a note on what was built)."""
        raise NotImplementedError

    def user_compile(self, model) -> Optional[dict]:
        """What `model` is compiled with besides the run's steps per execution and XLA (None: the RunConfig's
        optimizer, loss and metrics): what the user compiled it with, for a model that came compiled."""
        return compile_args(model) if getattr(model, "compiled", False) else None

    def compile(self, model, config) -> str:
        """Compile `model` for the run, once (`modeling.compile`); a sentence on what it was compiled with."""
        return modeling.compile(model, config, self.user_compile(model))

    def encoder(self, sequence_length: int):
        """How text becomes this model's token ids (`data.text.Encoder`), or None: it takes arrays."""
        return None

    def writes_text(self) -> bool:
        """Whether a run shows what the model writes before and after training (`sample`, `prompt_from`)."""
        return False

    def callbacks(self) -> list:
        """Keras callbacks this kind adds to a run, first of all, so every other one (the record, the progress
        line, TensorBoard) sees what they add to an epoch's logs."""
        return []

    def sample(self, model, prompt: str, sequence_length: int, chat: bool = False) -> str:
        """What `model` writes after `prompt` (greedy: the same weights write the same text), for a kind that
        `writes_text`; with `chat`, its answer to `prompt` as a user's turn."""
        raise NotImplementedError(f"{self.description} writes no text")

    def prompt_from(self, token_ids, sequence_length: int) -> str:
        """The first words of a training row, as text: the prompt a run's samples continue when none is set."""
        raise NotImplementedError(f"{self.description} writes no text")

    def layout_map(self, mesh) -> Tuple[Optional["keras.distribution.LayoutMap"], str]:
        """(how the weights lie over `mesh`'s "model" axis, or None where this kind has no layout; its name)."""
        return None, "this model"

    def rematerialize(self, model) -> Optional[str]:
        """Rematerialize `model`'s blocks in its training step; None where done, else why not (the note says it)."""
        return "only a KerasHub transformer's blocks are rematerialized (build your own inside keras.RematScope)"

    def trainer(self, model):
        """What the run calls Keras' `fit` and `evaluate` on: the model itself."""
        return model

    def adapters_only(self, model) -> bool:
        """Whether the adapters are all that trains, so a run keeps them alone."""
        return lora.adapters_only(model)

    def rebuild(self, config, spec) -> "keras.Model":
        """The model of a finished run of `config`, built again for `load` (its weights are loaded after)."""
        model, _ = self.build(config, spec, in_place=False, policy=config.precision)
        return model


class Factory(ModelSource):
    """A function (or class) that returns a keras.Model, called with no argument or the data's `DataSpec`: a zoo
    or registered name, an import path, or a callable handed to `train()`."""

    def __init__(self, factory, name: str):
        self.factory, self.name = factory, name
        self.description = f"the model {name}"

    def build(self, config, spec, *, in_place: bool, policy: str):
        import keras

        factory, name = self.factory, self.name
        check_model_arg(factory)
        try:
            model = factory(spec) if registry.takes_argument(factory) else factory()
        except (ModelError, KeyboardInterrupt):
            raise
        except Exception as e:
            said = one_line(e)
            if spec is not None and spec.num_classes is None and "None" in said and registry.takes_argument(factory):
                shape = f" of shape {tuple(spec.target_shape)} per example" if spec.target_shape else ""
                hint = (
                    "; for class labels pass y.astype(int)" if "float" in str(spec.target_dtype) and not shape else ""
                )
                said += (
                    " (spec.num_classes is None: tpukit counts classes from integer or one-hot labels, and y "
                    f"holds {spec.target_dtype} values{shape}{hint})"
                )
            raise ModelError(f"the model factory {name!r} raised {said}") from e
        if model is spec and spec is not None:
            raise ModelError(
                f"model=: tpukit called {name} as a factory (a function that builds the model) and it "
                f"returned its argument, the DataSpec: a {_kind(factory)} object is not a Keras model. "
                "Pass a keras.Model, or a function (or class) that returns one."
            )
        if not isinstance(model, keras.Model):
            raise ModelError(
                f"the model factory {name!r} returned {type(model).__name__}; expected a keras.Model "
                f"(a Sequential, functional or subclassed model). Received: {_short_repr(model)}."
            )
        return model, "built by the factory inside the run's scope"


class BuiltModel(ModelSource):
    """A keras.Model handed to `train()`: trained in place where its variables can serve the run (the user's
    object ends up trained, as with Keras' fit), else a clone whose weights are copied, said once."""

    def __init__(self, model):
        self.model = model
        self.description = f"your {type(model).__name__} object"
        self._compiled = compile_args(model) if getattr(model, "compiled", False) else None

    def build(self, config, spec, *, in_place: bool, policy: str):
        model = self.model
        why = _clone_reason(model) if in_place else "a trial of the batch-size tuner"
        if why is not None:
            return _clone(model, why), "a clone of the model handed over (weights copied)"
        name = type(model).__name__
        note = (
            f"tpukit trains your {name} object in place: after train() it holds the trained weights "
            f"(result.model is the same object)"
        )
        if model.dtype_policy.name != policy:
            note += (
                f"; its layers keep the dtype policy they were built with ({model.dtype_policy.name}, not "
                f"{policy}): pass a factory to build it under the run's policy"
            )
        warnings.warn(note, TrainedInPlace, stacklevel=5)
        return model, f"your {name} object, trained in place"

    def user_compile(self, model) -> Optional[dict]:
        """The user's compile arguments; a clone gets a fresh optimizer of the same kind (its own state)."""
        if not self._compiled:
            return None
        args = dict(self._compiled)
        optimizer = args.get("optimizer")
        if model is not self.model and optimizer is not None and hasattr(optimizer, "get_config"):
            args["optimizer"] = optimizer.__class__.from_config(optimizer.get_config())
        return args

    def rebuild(self, config, spec):
        return self.model


def choose(model_arg, config) -> ModelSource:
    """The source of the run's model, chosen once: a `ModelSource` handed over as it is, a keras.Model, a factory,
    or what `config.model` names (a registered or zoo factory, an import path, or a name provider's source).

    Keras is not imported here: the run chooses before it connects, and importing Keras fixes its backend.

    Raises:
        RegistryError: `config.model` names nothing.
    """
    return _source(model_arg, config).for_method(config)


def _source(model_arg, config) -> ModelSource:
    keras = sys.modules.get("keras")  # a keras.Model means Keras is loaded; never load it here, before connect
    if isinstance(model_arg, ModelSource):
        return model_arg
    if keras is not None and isinstance(model_arg, keras.Model):
        return BuiltModel(model_arg)
    if model_arg is not None:
        return Factory(model_arg, config.model)  # checked when it builds (`check_model_arg`), after connect
    entry = registry.entry("model", config.model)
    if isinstance(entry.target, ModelSource):
        return entry.target
    return Factory(entry.target, config.model)


def _clone_reason(model):
    """None where `model` itself can be trained in the current scope, else why a clone is needed.

    On JAX, a model built outside the run's distribution has its variables (and a built optimizer's) laid out
    for it here, as the distribution would have made them; TensorFlow cannot move a variable into a strategy.
    """
    import keras

    if keras.backend.backend() == "jax":
        distribution = keras.distribution.distribution()
        if distribution is None:
            return None
        optimizer = getattr(model, "optimizer", None)
        variables = list(model.variables) + list(getattr(optimizer, "variables", None) or [])
        try:
            for v in variables:
                v.assign(keras.distribution.distribute_tensor(v.value, distribution.get_variable_layout(v)))
        except Exception as e:
            return f"its variables could not be laid out for {type(distribution).__name__} ({one_line(e, 120)})"
        return None
    import tensorflow as tf

    if not tf.distribute.has_strategy():
        return None
    strategy = tf.distribute.get_strategy()
    outside = [v for v in model.weights if not strategy.extended.variable_created_in_scope(v.value)]
    if not outside:
        return None  # unbuilt (its variables will be made here), or built in this strategy's scope
    return (
        f"{type(strategy).__name__} over {strategy.num_replicas_in_sync} replicas makes its variables in its own "
        f"scope, and yours were made outside it"
    )


def _clone(model, why: str = ""):
    """Clone a built model inside the current scope and copy its weights; say once, in one line, that it happened."""
    import keras

    warnings.warn(
        f"tpukit trains a clone of your {type(model).__name__} ({why}); your object is left as it was and "
        "the trained model is result.model. Build it inside runtime.strategy.scope(), or pass a factory, "
        "to train it in place.",
        ClonedModelWarning,
        stacklevel=4,
    )
    try:
        clone = keras.models.clone_model(model)
    except Exception as e:
        raise ModelError(
            f"could not clone {type(model).__name__} ({one_line(e)}); pass a factory instead: "
            f"model=lambda: {type(model).__name__}(...)."
        ) from e
    if model.built and model.weights:
        if not clone.built:
            clone.build(modeling.input_shape(model))
        try:
            clone.set_weights(model.get_weights())
        except Exception as e:
            raise ModelError(
                f"could not copy the weights of {type(model).__name__} into its clone "
                f"({one_line(e)}); pass a factory instead."
            ) from e
    return clone


def _short_repr(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# Libraries whose models are not Keras 3 models (tf_keras is Keras 2), so never a factory of one.
_OTHER_LIBRARIES = ("tf_keras", "torch", "flax", "haiku", "equinox", "sklearn", "xgboost", "lightgbm", "catboost")


def check_model_arg(model_arg) -> None:
    """ModelError, in one line, for a `model=` that is neither a keras.Model nor a factory of one.

    Anything callable else is called as a factory; so an object that is plainly a model of another kind (a
    Keras layer, a scikit-learn estimator, a PyTorch module, a tf_keras model) is named as such first, instead
    of being called with the DataSpec.
    """
    import functools
    import inspect

    import keras

    if model_arg is None or isinstance(model_arg, keras.Model):
        return
    layer = (
        issubclass(model_arg, keras.layers.Layer) and not issubclass(model_arg, keras.Model)
        if inspect.isclass(model_arg)
        else isinstance(model_arg, keras.layers.Layer)
    )
    if layer:
        name = model_arg.__name__ if inspect.isclass(model_arg) else type(model_arg).__name__
        raise ModelError(
            f"model=: {name} is a Keras layer, not a model; wrap it (keras.Sequential([...])) or pass a "
            "function that builds the model."
        )
    if inspect.isclass(model_arg):
        return  # a class is a factory: calling it builds the model (a keras.Model subclass), checked when built
    plain = inspect.isroutine(model_arg) or isinstance(model_arg, functools.partial)
    root = type(model_arg).__module__.split(".")[0]
    other = root in _OTHER_LIBRARIES or hasattr(model_arg, "fit") or hasattr(model_arg, "predict")
    if not callable(model_arg) or (not plain and other):
        keras2 = " (tf_keras is Keras 2; tpukit trains Keras 3 models)" if root == "tf_keras" else ""
        own_repr = type(model_arg).__repr__ is not object.__repr__
        raise ModelError(
            f"model=: expected a keras.Model (Keras 3), or a function (or class) that returns one. "
            f"Received: a {_kind(model_arg)} object{keras2}, which is not a Keras model"
            f"{': ' + _short_repr(model_arg) if own_repr else ''}."
        )


def _kind(value) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__name__}" if cls.__module__ != "builtins" else cls.__name__
