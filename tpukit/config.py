"""RunConfig: one plain, validated description of a training run.

A notebook, the widget panel and the CLI all build a `RunConfig` and hand it to
the same engine calls. It is frozen and checked once, when it is built, so a
bad value fails at the line that made it, with a one-line message that names
the field, the value received and the valid choices.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
from typing import Any, Optional, Tuple


from tpukit import precision as precisions
from tpukit.validation import (  # noqa: F401  (what config users import from here)
    ACCELERATORS,
    BACKENDS,
    OPTIMIZERS,
    METHODS,
    QUANTIZE_MODES,
    ConfigError,
    PreferenceOptions,
    PaddingWarning,
    advising,
    check_config,
    check_one_batch,
    check_precision,
    global_batch,
    model_copies,
    padding_advice,
    padding_waste,
    window_fits,
    window_problem,
)

# How a field's value is written as text (the CLI's options; `cli.options` parses each kind).
FIELD_KINDS = (
    "choice",
    "name",
    "str",
    "optional_str",
    "int",
    "optional_int",
    "float",
    "optional_float",
    "fraction",
    "int_or_auto",
    "auto_on_off",
    "window",
    "names",
    "bool",
    "options",
)


def _field(
    default,
    kind: str,
    help: str,
    metavar: Optional[str] = None,
    *,
    label: Optional[str] = None,
    hint: Optional[str] = None,
    choices: Optional[Tuple] = None,
):
    """A RunConfig field: its default, how its value is written as text (`FIELD_KINDS`), and its help, with
    `{placeholders}` the CLI fills from the layers above (names, limits). A field with a `label` is one of the
    panel's settings: `hint` is what its empty text box shows, `choices` the values its dropdown offers (None
    shown as "none"). The CLI's options and the panel's form are both made from these (`cli.options`, `ui.form`)."""
    assert kind in FIELD_KINDS, kind
    shown = {"label": label, "hint": hint, "choices": choices}
    return dataclasses.field(default=default, metadata={"kind": kind, "help": help, "metavar": metavar, **shown})


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run. Build it, `replace()` it, save it as JSON.

    `batch_size` is per replica; `global_batch_size` is derived from it.
    `profile` is an inclusive (start, stop) window of training steps, or None.
    `steps_per_execution` is how many training steps run per call of the
    compiled train function: an integer, or "auto", which `train()` resolves
    once it knows the hardware and the epoch (`training.resolve_steps_per_execution`).
    `model` and `dataset` name what is trained: a zoo or registered name, an
    import path `package.module:function`, or the label `train()` records for
    an object handed to it. `loss` and `metrics` compile a model that comes
    uncompiled. `validation_split` holds out that fraction of the training
    data (seeded) for validation; the test split stays for the final evaluation.
    `init_from` is a run directory whose final weights the model starts from (fine-tuning).
    `lora_rank` and `sequence_length` apply to a pretrained model (a KerasHub preset): the rank of its LoRA
    adapters (None: every weight trains), and the tokens per row of its text. `lora_alpha` scales the
    adapters' update by alpha / rank (None: Keras' default, alpha = rank), and `lora_targets` names the layers that
    get adapters (None: KerasHub's default, the attention's query and value projections). `quantize="int8"`
    (or `"int4"`) stores the frozen projections in int8 (or 4 bits) under the float32 adapters (QLoRA; it needs
    `lora_rank`). `sample_prompt` is the
    text a pretrained model continues before and after training, in the run's summary (None: the first words of
    the training text; "": no samples).
    `remat` rematerializes a KerasHub transformer's blocks (`keras.RematScope`: each keeps only its input for the
    backward pass, which computes it again); "auto" turns it on only where the step's estimated memory does not fit
    the device (`models.memory`). `gradient_accumulation` applies the optimizer's update every that many steps,
    over their batches together (Keras' `gradient_accumulation_steps`); "auto" is 1, and where a step does not fit
    the run's notes say which smaller batch_size and accumulation fit.
    `compilation_cache` is where a JAX run keeps its compiled programs for the next run (JAX's persistent cache):
    "auto" (`JAX_COMPILATION_CACHE_DIR` where set, else `<logdir>/.jax-cache`), a directory (on Colab, one on
    Drive survives a runtime restart), or None/"off" (`training.compile_cache`). `model_parallel` splits each copy of
    the model over that many devices (on JAX, by the model's layout map: `keras.distribution.ModelParallel`), so the
    copies of the model, over which the global batch is split, are the devices divided by it; 1 is data parallelism.
    `method` is what a pretrained model learns: "sft" its text's next tokens; "dpo" or "simpo" which of two answers
    people prefer (`models.preference`), from data of a prompt, a chosen and a rejected answer; `preference`
    holds that method's options (`PreferenceOptions`: beta, gamma, reference; None: the method's defaults).

    >>> RunConfig(batch_size=32, replicas=8).global_batch_size
    256
    """

    # Each field's kind and help are declared once, here: the CLI's options are made from them
    # (`cli.options`). The kinds say how text becomes a value (`FIELD_KINDS`).
    backend: str = _field(
        "auto",
        "choice",
        "one of {backends} (auto: KERAS_BACKEND if set, else JAX only for a TPU TensorFlow cannot drive)",
        label="backend",
        choices=BACKENDS,
    )
    accelerator: str = _field("auto", "choice", "one of {accelerators}", label="accelerator", choices=ACCELERATORS)
    tpu: Optional[str] = _field(
        None,
        "optional_str",
        "'local', grpc://host:port or a Cloud TPU name",
        metavar="ADDRESS",
        label="TPU address",
        hint="from the environment",
    )
    replicas: Optional[int] = _field(
        None,
        "optional_int",
        "simulated replicas on the CPU (or the first N GPUs); default: every device found (one on the CPU)",
        label="replicas",
        hint="all devices (CPU: 1)",
    )
    dataset: str = _field(
        "mnist5k",
        "name",
        "a built-in or registered name: {datasets}; or tfds:NAME, a JSONL file (lines of "
        '{{"text": ...}}, {{"messages": [...]}} or {{"prompt": ..., "response": ...}}; or a .json file of one array '
        "of them) for a pretrained model, or an import path package.module:function",
        label="dataset",
    )
    dataset_size: Optional[int] = _field(
        None, "optional_int", "training examples (generated sets: any size); default: the dataset's own size"
    )
    model: str = _field(
        "cnn",
        "name",
        "a zoo or registered name: {models}; an import path package.module:function "
        "returning a keras.Model; or a KerasHub preset: a preset directory, kaggle://..., hf://... or a "
        "name such as gemma3_instruct_1b (downloaded when the run starts)",
        label="model",
        hint="zoo name, preset dir, hf://, kaggle://, KerasHub name",
    )
    loss: str = _field("sparse_categorical_crossentropy", "str", "for models that come uncompiled")
    metrics: Tuple[str, ...] = _field(("accuracy",), "names", "comma-separated metric names, e.g. mae,mse")
    validation_split: Optional[float] = _field(
        0.1,
        "fraction",
        "held out from the training data for validation (seeded); 'none' for no validation",
        metavar="FRACTION",
    )
    epochs: int = _field(
        3,
        "int",
        "default {epochs}; with --resume, extends a completed run to N epochs in a new run directory",
        label="epochs",
    )
    steps_per_epoch: Optional[int] = _field(
        None,
        "optional_int",
        "default: the training examples // the global batch "
        "(unlike Keras' fit, the last partial batch is dropped, so every step has "
        "the same shape)",
        label="steps / epoch",
        hint="whole dataset",
    )
    batch_size: int = _field(
        64, "int", "per replica, unlike Keras' batch_size: the global batch is this x replicas", label="batch / replica"
    )
    precision: str = _field("auto", "choice", "one of {precisions}", label="precision", choices=precisions.CHOICES)
    deterministic: bool = _field(
        False, "bool", "seeds + op determinism: same config, same weights", label="deterministic"
    )
    seed: int = _field(42, "int", "for the weights and the data's order", label="seed")
    learning_rate: float = _field(1e-3, "float", "the optimizer's", label="learning rate")
    optimizer: str = _field("adam", "choice", "one of {optimizers}", label="optimizer", choices=OPTIMIZERS)
    steps_per_execution: Any = _field(
        "auto",
        "int_or_auto",
        "training steps per call of the compiled train function; "
        "auto: the largest divisor of the steps per epoch up to {steps_cap}, on the CPU "
        "only while a call stays under {cpu_call_ms} ms (estimated from the model's "
        "FLOPs), and 1 with --profile or where the engine cannot run more (several GPUs "
        "under TensorFlow); the run's notes say what it chose",
        label="steps / execution",
    )
    jit_compile: Any = _field(
        "auto", "auto_on_off", "XLA for the train step; auto: Keras' choice, or XLA on a CPU where it measured faster"
    )
    early_stopping: Optional[int] = _field(
        None,
        "optional_int",
        "stop after this many epochs without a better "
        "validation loss (training loss without validation), keeping the best "
        "weights; default: off",
        metavar="PATIENCE",
    )
    profile: Optional[Tuple[int, int]] = _field(
        None,
        "window",
        "capture these training steps (inclusive) for TensorBoard's profiler; default: off",
        metavar="START:STOP",
        label="profile steps",
        hint="none, or start:stop e.g. 10:14",
    )
    logdir: str = _field("runs", "str", "each run gets a directory here", label="logdir")
    name: str = _field(
        "", "str", "the run directory's suffix; default: MODEL-DATASET", label="run name", hint="model-dataset"
    )
    init_from: Optional[str] = _field(
        None,
        "optional_str",
        "start from that run's final weights (fine-tuning: e.g. more epochs at a lower learning rate)",
        metavar="RUN_DIR",
        label="start from run",
        hint="none: fresh weights",
    )
    lora_rank: Optional[int] = _field(
        4,
        "optional_int",
        "a pretrained model's LoRA rank (its weights frozen in bfloat16); none: every weight trains",
        metavar="RANK|none",
        label="LoRA rank",
        hint="none: every weight trains",
    )
    sequence_length: int = _field(
        128,
        "int",
        "tokens per row of text (each document starts its own), for a pretrained model",
        label="sequence length",
    )
    quantize: Optional[str] = _field(
        None,
        "optional_str",
        "store a pretrained model's frozen projections in int8 or int4 under its float32 LoRA adapters (QLoRA: "
        "int8 half of bfloat16's memory, int4 a quarter); default: none, bfloat16",
        metavar="int8|int4",
        label="quantize",
        choices=(None,) + QUANTIZE_MODES,
    )
    lora_alpha: Optional[float] = _field(
        None, "optional_float", "scale LoRA's update by ALPHA / RANK; default: Keras' (ALPHA = RANK)", metavar="ALPHA"
    )
    lora_targets: Optional[Tuple[str, ...]] = _field(
        None,
        "names",
        "comma-separated layer names that get LoRA adapters; default: KerasHub's (query,value)",
        metavar="NAMES",
    )
    sample_prompt: Optional[str] = _field(
        None,
        "optional_str",
        "text a pretrained model continues before and after "
        "training; default: the first words of the training text; '' for none",
        metavar="TEXT",
    )
    remat: Any = _field(
        "auto",
        "auto_on_off",
        "rematerialize a pretrained model's transformer blocks (less memory, "
        "one more forward pass); auto: on only where the step's estimated memory does not fit the "
        "device",
    )
    gradient_accumulation: Any = _field(
        "auto",
        "int_or_auto",
        "apply the optimizer's update every N steps, over their batches together; auto: 1",
        metavar="N|auto",
    )
    compilation_cache: Optional[str] = _field(
        "auto",
        "optional_str",
        "where a JAX run keeps its compiled programs for "
        "the next run; auto: $JAX_COMPILATION_CACHE_DIR, else "
        "LOGDIR/.jax-cache; off: none",
        metavar="DIR|auto|off",
    )
    model_parallel: int = _field(
        1,
        "int",
        "split each copy of the model over N devices by its layout map (JAX); default: 1, data parallelism",
        metavar="N",
    )
    method: str = _field(
        "sft",
        "choice",
        "what a pretrained model learns: sft, its text's next tokens; dpo, which of two answers people prefer "
        "(data of prompt, chosen and rejected), against the model as it starts; simpo, the same without a reference",
        label="method",
        choices=METHODS,
    )
    preference: Optional[PreferenceOptions] = _field(
        None,
        "options",
        "a preference method's options: beta (dpo 0.1, simpo 2.0), gamma (simpo's margin, 1.0), reference (dpo: "
        "start or base, the preset with its adapters off)",
        metavar="beta=B[,gamma=G][,reference=start|base]",
    )

    def __post_init__(self):
        check_config(self)

    # ---- derived values -------------------------------------------------
    @property
    def global_batch_size(self) -> int:
        """Examples per step over all replicas: batch_size x replicas (1 when replicas is unset), over
        `model_parallel` where each copy of the model takes that many of the devices."""
        return self.global_batch(model_copies(self.replicas or 1, self.model_parallel))

    def global_batch(self, replicas: int) -> int:
        """Examples per step when this config runs on `replicas` replicas (`global_batch`)."""
        return global_batch(self.batch_size, replicas)

    @property
    def accumulation_steps(self) -> int:
        """Steps whose gradients one optimizer update applies: `gradient_accumulation`, "auto" being 1."""
        return 1 if self.gradient_accumulation == "auto" else self.gradient_accumulation

    @property
    def run_name(self) -> str:
        return self.name or f"{short_name(self.model)}-{short_name(self.dataset)}"

    def padding_advice(self, kind: Optional[str] = None) -> Optional[str]:
        """Padding advice for this batch size on `kind` (default: the configured accelerator)."""
        return padding_advice(self.batch_size, kind or self.accelerator)

    def check_for(self, kind: str, replicas: int) -> None:
        """Checks that hold only once the hardware is known (at build time and again at connect).

        What the data must satisfy (one global batch at least) is checked by
        `train()`, which loads it.
        """
        check_precision(self.precision, kind)

    def check_examples(self, available: int, replicas: int, after_split: bool = False) -> None:
        """At least one global batch must fit in the `available` training examples (known once the data is)."""
        split = " after the validation split" if after_split else ""
        check_one_batch(
            available,
            self.batch_size,
            replicas,
            has=f"dataset {self.dataset!r} has {available} training examples{split}",
        )

    # ---- copies and JSON ------------------------------------------------
    def replace(self, **changes) -> "RunConfig":
        """A validated copy with some fields changed; the padding advice again only if the batch or the accelerator
        changed."""
        _check_fields(changes)
        again = any(k in changes and changes[k] != getattr(self, k) for k in ("batch_size", "accelerator"))
        with advising(again):
            copy = dataclasses.replace(self, **changes)
        changed = {k for k, v in changes.items() if v != getattr(self, k)}
        object.__setattr__(copy, "_given", self._set | frozenset(changed))
        return copy

    @property
    def _set(self) -> frozenset:
        return self.__dict__.get("_given", frozenset())

    def is_set(self, name: str) -> bool:
        """Whether the user set field `name`: passed it to RunConfig(), changed it with replace(), or (a config
        read back from a run) it holds another value than the default. A setting a kind of model has no use for is
        refused only where set (`models.source.ModelSource.check`), never for its default."""
        return name in self._set

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        if self.profile is not None:
            out["profile"] = list(self.profile)
        if self.preference is not None:
            out["preference"] = self.preference.given()
        out["metrics"] = list(self.metrics)
        return out

    @classmethod
    def from_dict(cls, values: dict, *, advise: bool = True) -> "RunConfig":
        """A config from a dict of fields; `advise=False` for a view that shows the padding advice itself."""
        _check_fields(values)
        with advising(advise):
            config = cls(**values)
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        object.__setattr__(config, "_given", frozenset(k for k in values if getattr(config, k) != defaults[k]))
        return config

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        """The config in `text`; ConfigError (one line) for text that is not a JSON object of RunConfig fields."""
        try:
            values = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise ConfigError(
                f"RunConfig.from_json: not valid JSON ({type(e).__name__}: "
                f"{str(e).splitlines()[0][:120] if str(e) else 'too deeply nested'})."
            ) from None
        if not isinstance(values, dict):
            raise ConfigError(
                f"RunConfig.from_json: expected a JSON object of RunConfig fields. "
                f"Received: a JSON {type(values).__name__}."
            )
        return cls.from_dict(values)


def _check_fields(names) -> None:
    """ConfigError naming the first unknown field, the known field it was probably meant to be, and all fields."""
    fields = [f.name for f in dataclasses.fields(RunConfig)]
    unknown = [n for n in names if n not in fields]
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(str(name), fields, n=1)  # as Keras suggests an argument name
    hint = f"; did you mean {close[0]!r}? " if close else ". "
    raise ConfigError(
        f"RunConfig has no field {name!r}{hint}Fields: {', '.join(fields)}.",
        value=name,
        expected=f"{close[0]!r}" if close else "a RunConfig field",
        choices=fields,
    )


def _init_with_field_check(init):
    """The dataclass __init__, with an unknown keyword answered by ConfigError instead of a TypeError."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        _check_fields(kwargs)
        init(self, *args, **kwargs)
        names = [f.name for f in dataclasses.fields(RunConfig)][: len(args)]
        object.__setattr__(self, "_given", frozenset(kwargs) | frozenset(names))  # what `is_set` answers

    return __init__


RunConfig.__init__ = _init_with_field_check(RunConfig.__init__)


def short_name(name: str) -> str:
    """A run-name-friendly form of a model or dataset name: `pkg.mod:build_cnn` -> `build_cnn`; a preset's directory
    or URL -> its last part (`kaggle://keras/gemma3/keras/gemma3_instruct_1b` -> `gemma3_instruct_1b`); a data file
    -> its name (`chat.jsonl`)."""
    tail = name.rstrip("/\\").rsplit(":", 1)[-1]
    a_file = re.search(r"[/\\]", tail) or tail.lower().endswith((".jsonl", ".json"))  # `chat.jsonl` is no import path
    tail = re.split(r"[/\\]", tail)[-1] if a_file else tail.rsplit(".", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.\-]+", "", tail).strip(".-") or "run"
