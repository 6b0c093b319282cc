"""RunConfig: one plain, validated description of a training run.

A notebook, the widget panel and the CLI all build a `RunConfig` and hand it to
the same engine calls. It is frozen and checked once, when it is built, so a
bad value fails at the line that made it, with a one-line message that names
the field, the value received and the valid choices.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import difflib
import functools
import json
import math
import re
import warnings
from typing import Any, Optional, Tuple

from tpukit import precision as precisions
from tpukit.errors import TpukitError, TpukitWarning

BACKENDS = ("auto", "tensorflow", "jax")
ACCELERATORS = ("auto", "tpu", "gpu", "cpu")
OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
JIT_CHOICES = ("auto", True, False)
REMAT_CHOICES = ("auto", True, False)
MAX_ACCUMULATION = 1024

# The multiple a per-replica batch should be. A TPU tiles each array's two minor dimensions, one to a multiple of 8
# and another to 128 (Cloud TPU performance guide, "Consequences of tiling"); in a layer's [batch, features] the
# batch usually takes the 8 and the features the 128, so another batch is padded. A GPU pads nothing: cuBLAS and
# cuDNN run any size, and their Tensor Core kernels for 16-bit math run fastest on multiples of 8 (NVIDIA's "Matrix
# multiplication background" guide). A CPU has no such tile.
PAD_MULTIPLE = {"tpu": 8, "gpu": 8}
# Where each rule comes from, for the advice's text and the notebooks.
PAD_RULE = {
    "tpu": "a TPU tiles the batch to 8 rows (and the features to 128 lanes)",
    "gpu": "cuBLAS and cuDNN run any size and pad nothing, but their Tensor Core kernels for float16 and bfloat16 "
    "run fastest on multiples of 8",
}
PADS = ("tpu",)  # the kinds whose XLA layout pads the batch up to the multiple (a GPU runs it as it is)


# False while a config is rebuilt without a new batch size or accelerator (RunConfig.replace) or built for a view
# that shows the advice itself (RunConfig.from_dict(advise=False)): the advice is said once, where the user chose.
_ADVISE = contextvars.ContextVar("tpukit_padding_advice", default=True)


@contextlib.contextmanager
def _advising(on: bool):
    """Configs built inside give the padding advice only if `on` (and it is not off around them already)."""
    token = _ADVISE.set(on and _ADVISE.get())
    try:
        yield
    finally:
        _ADVISE.reset(token)


_FROM_MESSAGE = object()  # ConfigError's default detail: the message after its "RunConfig.<field>: " prefix


class ConfigError(TpukitError, ValueError):
    """A RunConfig field got a value it cannot take. The message is one line.

    The facts come as attributes too, so the panel and the CLI render them without reading the sentence:
    `field` (the RunConfig field, or None), `value` (what it received), `expected` (what it takes, as a phrase),
    `choices` (the valid values, where they are a list) and `detail` (the sentence after "RunConfig.<field>: ",
    or None where the error is fully said by `expected` and `value`).
    """

    bad_input = True

    def __init__(
        self,
        message: str,
        *,
        field: Optional[str] = None,
        value: Any = None,
        expected: Optional[str] = None,
        choices: Optional[Tuple[Any, ...]] = None,
        detail: Any = _FROM_MESSAGE,
    ):
        super().__init__(message)
        self.field, self.value, self.expected = field, value, expected
        self.choices = tuple(choices) if choices is not None else None
        prefix = f"RunConfig.{field}: "
        if detail is _FROM_MESSAGE:
            detail = message[len(prefix) :] if field and message.startswith(prefix) else message
        self.detail = detail

    def facts(self) -> dict:
        """The attributes, for a caller that re-raises with more context."""
        return {
            "field": self.field,
            "value": self.value,
            "expected": self.expected,
            "choices": self.choices,
            "detail": self.detail,
        }


class PaddingWarning(TpukitWarning):
    """The per-replica batch does not suit the accelerator: a TPU pads it (part of each step is padding); a GPU pads
    nothing, but its Tensor Core kernels run fastest on multiples of 8."""


def padding_waste(size: int, multiple: int) -> float:
    """Percent of a padded dimension that is padding when `size` is padded up to `multiple`."""
    padded = math.ceil(size / multiple) * multiple
    return 100.0 * (padded - size) / padded


def padding_advice(batch_size: int, kind: str) -> Optional[str]:
    """Advice for a per-replica batch on an accelerator kind, or None when it fits the tiles."""
    multiple = PAD_MULTIPLE.get(kind)
    if multiple is None or batch_size % multiple == 0:
        return None
    lower = (batch_size // multiple) * multiple
    upper = lower + multiple
    choices = f"{lower} or {upper}" if lower else f"{upper}"
    cost = (
        f": padded to {upper}, {padding_waste(batch_size, multiple):.1f}% of each step is padding"
        if kind in PADS
        else ""
    )
    return (
        f"batch_size={batch_size} per replica is not a multiple of {multiple} on {kind.upper()} "
        f"({PAD_RULE[kind]}){cost}; try {choices}."
    )


def _fail(field: str, value: Any, expected: str, choices=None) -> None:
    raise ConfigError(
        f"RunConfig.{field}: expected {expected}. Received: {field}={value!r}.",
        field=field,
        value=value,
        expected=expected,
        choices=choices,
        detail=None,
    )


def _check_choice(field: str, value: Any, choices) -> None:
    if value not in choices or isinstance(value, bool) != any(isinstance(c, bool) and c == value for c in choices):
        _fail(field, value, "one of " + ", ".join(repr(c) for c in choices), choices)


def _check_name(field: str, value: Any) -> None:
    """Model, dataset and loss names: checked for form here; what they name is resolved by train()."""
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\n\r\t"):
        _fail(field, value, "a name: built in, registered, or an import path 'package.module:function'")


def _check_int(field: str, value: Any, minimum: int, optional: bool = False, maximum: Optional[int] = None) -> None:
    if optional and value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        what = f"an integer >= {minimum}" + (f" and <= {maximum:,}" if maximum is not None else "")
        _fail(field, value, what + (" or None" if optional else ""))


# Bounds past which a run can never train: NumPy seeds are 32-bit; the others are far beyond any real run.
MAX_SEED = 2**32 - 1
MAX_EPOCHS = 1_000_000
MAX_EXAMPLES = 100_000_000
MAX_NAME = 100
MAX_LORA_RANK = 4096
MAX_SEQUENCE_LENGTH = 1_048_576
MAX_MODEL_PARALLEL = 4096
_RESERVED_NAMES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}


def _check_run_name(name: Any) -> None:
    """A name that is a valid directory name on Linux, macOS and Windows (it ends every run directory's name)."""
    bad = (
        not isinstance(name, str)
        or len(name) > MAX_NAME
        or any(c in name for c in '<>:"/\\|?*')
        or any(ord(c) < 32 for c in name)
        or name.endswith((" ", "."))
        or name.split(".")[0].lower() in _RESERVED_NAMES
    )
    if bad and name != "":
        _fail(
            "name",
            name,
            f'a run name of at most {MAX_NAME} characters, without / \\ : * ? " < > | or control '
            "characters, not ending in a dot or space, and not a Windows device name",
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
)


def _field(default, kind: str, help: str, metavar: Optional[str] = None):
    """A RunConfig field: its default, how its value is written as text (`FIELD_KINDS`), and its help, with
    `{placeholders}` the CLI fills from the layers above (names, limits)."""
    assert kind in FIELD_KINDS, kind
    return dataclasses.field(default=default, metadata={"kind": kind, "help": help, "metavar": metavar})


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
    adapters (None: every weight trains), and the tokens per row its text is packed into. `lora_alpha` scales the
    adapters' update by alpha / rank (None: Keras' default, alpha = rank), and `lora_targets` names the layers that
    get adapters (None: KerasHub's default, the attention's query and value projections). `sample_prompt` is the
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
    replicas are the devices divided by it; 1 is data parallelism.

    >>> RunConfig(batch_size=32, replicas=8).global_batch_size
    256
    """

    # Each field's kind and help are declared once, here: the CLI's options are made from them
    # (`cli.options`). The kinds say how text becomes a value (`FIELD_KINDS`).
    backend: str = _field(
        "auto",
        "choice",
        "one of {backends} (auto: KERAS_BACKEND if set, else JAX only for a TPU TensorFlow cannot drive)",
    )
    accelerator: str = _field("auto", "choice", "one of {accelerators}")
    tpu: Optional[str] = _field(
        None, "optional_str", "'local', grpc://host:port or a Cloud TPU name", metavar="ADDRESS"
    )
    replicas: Optional[int] = _field(
        None,
        "optional_int",
        "simulated replicas on the CPU (or the first N GPUs); default: every device found (one on the CPU)",
    )
    dataset: str = _field(
        "mnist5k",
        "name",
        "a built-in or registered name: {datasets}; or tfds:NAME, a JSONL file "
        '(lines of {{"text": ...}} or {{"prompt": ..., "response": ...}}) for a pretrained '
        "model, or an import path package.module:function",
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
        3, "int", "default {epochs}; with --resume, extends a completed run to N epochs in a new run directory"
    )
    steps_per_epoch: Optional[int] = _field(
        None,
        "optional_int",
        "default: the training examples // the global batch "
        "(unlike Keras' fit, the last partial batch is dropped, so every step has "
        "the same shape)",
    )
    batch_size: int = _field(64, "int", "per replica, unlike Keras' batch_size: the global batch is this x replicas")
    precision: str = _field("auto", "choice", "one of {precisions}")
    deterministic: bool = _field(False, "bool", "seeds + op determinism: same config, same weights")
    seed: int = _field(42, "int", "for the weights and the data's order")
    learning_rate: float = _field(1e-3, "float", "the optimizer's")
    optimizer: str = _field("adam", "choice", "one of {optimizers}")
    steps_per_execution: Any = _field(
        "auto",
        "int_or_auto",
        "training steps per call of the compiled train function; "
        "auto: the largest divisor of the steps per epoch up to {steps_cap}, on the CPU "
        "only while a call stays under {cpu_call_ms} ms (estimated from the model's "
        "FLOPs), and 1 with --profile or where the engine cannot run more (several GPUs "
        "under TensorFlow); the run's notes say what it chose",
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
    )
    logdir: str = _field("runs", "str", "each run gets a directory here")
    name: str = _field("", "str", "the run directory's suffix; default: MODEL-DATASET")
    init_from: Optional[str] = _field(
        None,
        "optional_str",
        "start from that run's final weights (fine-tuning: e.g. more epochs at a lower learning rate)",
        metavar="RUN_DIR",
    )
    lora_rank: Optional[int] = _field(
        4,
        "optional_int",
        "a pretrained model's LoRA rank (its weights frozen in bfloat16); none: every weight trains",
        metavar="RANK|none",
    )
    sequence_length: int = _field(128, "int", "tokens per row that text is packed into, for a pretrained model")
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

    def __post_init__(self):
        _check_choice("backend", self.backend, BACKENDS)
        _check_choice("accelerator", self.accelerator, ACCELERATORS)
        if self.tpu is not None and (not isinstance(self.tpu, str) or not self.tpu):
            _fail("tpu", self.tpu, "a TPU name, 'local' or a grpc:// address")
        _check_int("replicas", self.replicas, 1, optional=True)
        _check_name("dataset", self.dataset)
        _check_int("dataset_size", self.dataset_size, 1, optional=True, maximum=MAX_EXAMPLES)
        _check_name("model", self.model)
        _check_name("loss", self.loss)
        if isinstance(self.metrics, (list, str)):
            object.__setattr__(
                self, "metrics", (self.metrics,) if isinstance(self.metrics, str) else tuple(self.metrics)
            )
        if not isinstance(self.metrics, tuple) or not all(isinstance(m, str) and m for m in self.metrics):
            _fail("metrics", self.metrics, "a tuple of metric names such as ('accuracy',) or ('mae',)")
        split = self.validation_split
        if split is not None and (isinstance(split, bool) or not isinstance(split, (int, float)) or not 0 < split < 1):
            _fail("validation_split", split, "a fraction between 0 and 1 (exclusive), or None for no validation")
        _check_int("epochs", self.epochs, 1, maximum=MAX_EPOCHS)
        _check_int("steps_per_epoch", self.steps_per_epoch, 1, optional=True)
        _check_int("batch_size", self.batch_size, 1)
        _check_choice("precision", self.precision, precisions.CHOICES)
        if not isinstance(self.deterministic, bool):
            _fail("deterministic", self.deterministic, "True or False")
        _check_int("seed", self.seed, 0, maximum=MAX_SEED)
        lr = self.learning_rate
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < math.inf:
            _fail("learning_rate", lr, "a positive number")
        _check_choice("optimizer", self.optimizer, OPTIMIZERS)
        spe = self.steps_per_execution
        if spe != "auto" and (isinstance(spe, bool) or not isinstance(spe, int) or spe < 1):
            _fail("steps_per_execution", spe, "'auto' or an integer >= 1")
        _check_choice("jit_compile", self.jit_compile, JIT_CHOICES)
        _check_int("early_stopping", self.early_stopping, 1, optional=True)
        if self.profile is not None:
            window = self.profile
            if isinstance(window, list):
                window = tuple(window)
                object.__setattr__(self, "profile", window)
            if not isinstance(window, tuple) or len(window) != 2 or window_problem(*window):
                _fail("profile", self.profile, "None or (start, stop) steps with 0 <= start <= stop")
            if not window_fits(window, self.steps_per_epoch, self.epochs):
                _fail(
                    "profile",
                    self.profile,
                    f"a window within the run's {self.steps_per_epoch * self.epochs} "
                    f"steps ({self.epochs} epochs x steps_per_epoch={self.steps_per_epoch})",
                )
        if not isinstance(self.logdir, str) or not self.logdir:
            _fail("logdir", self.logdir, "a directory path")
        _check_run_name(self.name)
        if hasattr(self.init_from, "__fspath__"):
            object.__setattr__(self, "init_from", str(self.init_from.__fspath__()))
        if self.init_from is not None and (not isinstance(self.init_from, str) or not self.init_from.strip()):
            _fail("init_from", self.init_from, "None or the directory of a run whose final weights start this one")
        rank = self.lora_rank
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_LORA_RANK):
            _fail(
                "lora_rank",
                rank,
                f"an integer from 1 to {MAX_LORA_RANK:,} (the LoRA adapters' rank; 4, 8 or 16 "
                "are usual), or None to train every weight",
            )
        _check_int("sequence_length", self.sequence_length, 1, maximum=MAX_SEQUENCE_LENGTH)
        alpha = self.lora_alpha
        if alpha is not None and (
            isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < math.inf
        ):
            _fail(
                "lora_alpha",
                alpha,
                "a positive number (the adapters' update is scaled by alpha / rank; 2 x rank "
                "is usual), or None for Keras' default, alpha = rank",
            )
        if self.sample_prompt is not None and not isinstance(self.sample_prompt, str):
            _fail(
                "sample_prompt",
                self.sample_prompt,
                'text for the model to continue, "" for no samples, or None for the first words of the training text',
            )
        targets = self.lora_targets
        if isinstance(targets, (list, str)):
            targets = (targets,) if isinstance(targets, str) else tuple(targets)
            object.__setattr__(self, "lora_targets", targets)
        if targets is not None and (
            not isinstance(targets, tuple) or not targets or not all(isinstance(t, str) and t for t in targets)
        ):
            _fail(
                "lora_targets",
                self.lora_targets,
                "None (KerasHub's default: the attention's query and value "
                "projections) or layer names such as ('query', 'value')",
            )
        _check_choice("remat", self.remat, REMAT_CHOICES)
        steps = self.gradient_accumulation
        if steps != "auto" and (
            isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_ACCUMULATION
        ):
            _fail(
                "gradient_accumulation",
                steps,
                f"'auto' or an integer from 1 to {MAX_ACCUMULATION:,} (steps whose gradients one update applies)",
            )
        if hasattr(self.compilation_cache, "__fspath__"):
            object.__setattr__(self, "compilation_cache", str(self.compilation_cache.__fspath__()))
        if self.compilation_cache == "off":  # the CLI's word for None: one value means off
            object.__setattr__(self, "compilation_cache", None)
        cache = self.compilation_cache
        if cache is not None and (not isinstance(cache, str) or not cache.strip() or any(c in cache for c in "\n\r")):
            _fail("compilation_cache", cache, "'auto', a directory for JAX's compiled programs, or None or 'off'")
        _check_int("model_parallel", self.model_parallel, 1, maximum=MAX_MODEL_PARALLEL)
        self.check_for(self.accelerator, self.replicas or 1)
        advice = padding_advice(self.batch_size, self.accelerator) if _ADVISE.get() else None
        if advice:
            warnings.warn(advice, PaddingWarning, stacklevel=3)

    # ---- derived values -------------------------------------------------
    @property
    def global_batch_size(self) -> int:
        """Examples per step over all replicas: batch_size x replicas (1 when replicas is unset)."""
        return self.global_batch(self.replicas or 1)

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
        with _advising(again):
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
        out["metrics"] = list(self.metrics)
        return out

    @classmethod
    def from_dict(cls, values: dict, *, advise: bool = True) -> "RunConfig":
        """A config from a dict of fields; `advise=False` for a view that shows the padding advice itself."""
        _check_fields(values)
        with _advising(advise):
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
    or URL -> its last part (`kaggle://keras/gemma3/keras/gemma3_instruct_1b` -> `gemma3_instruct_1b`)."""
    tail = name.rstrip("/\\").rsplit(":", 1)[-1]
    tail = re.split(r"[/\\]", tail)[-1] if re.search(r"[/\\]", tail) else tail.rsplit(".", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.\-]+", "", tail).strip(".-") or "run"


def global_batch(batch_size: int, replicas: int) -> int:
    """Examples per step over all replicas: the per-replica batch times the replicas. The one place that says it."""
    return batch_size * replicas


def check_precision(name: str, kind: Optional[str]) -> None:
    """ConfigError where precision `name` cannot run on accelerator `kind`: the `Precision` says why and what to use
    instead ("auto" is resolved for the hardware, so it always can)."""
    refusal = precisions.get(name).refusal(kind) if name != "auto" else None
    if refusal:
        fits = " or ".join(repr(p.name) for p in precisions.PRECISIONS if not p.refusal(kind))
        raise ConfigError(
            f"RunConfig.precision: {name} is not supported on {kind.upper()}; {refusal}. Received: precision={name!r}.",
            field="precision",
            value=name,
            expected=f"{fits} on a {kind.upper()}",
        )


def check_one_batch(
    available: int,
    batch_size: int,
    replicas: int,
    *,
    has: str,
    where: str = "RunConfig.batch_size",
    name: str = "batch_size",
) -> None:
    """ConfigError unless `available` examples fill one global batch: the one check for "fewer than one batch".

    `has` says what holds the examples ("dataset 'digits' has 96 training examples"); `where` names the setting,
    and `name` the argument that received `batch_size` (per replica).
    """
    batch = global_batch(batch_size, replicas)
    if available < batch:
        parts = f" ({batch_size} x {replicas} replicas)" if replicas != 1 else ""
        raise ConfigError(
            f"{where}: {has}, fewer than one global batch of {batch}{parts}. Received: {name}={batch_size}.",
            field="batch_size" if where.startswith("RunConfig.") else None,
            value=batch_size,
            expected=f"at most {available // replicas}" + (" per replica" if replicas != 1 else ""),
        )


# ---- the profile window: its rules, here once (RunConfig, the run's plan and ProfileCallback check with them) ----


def window_problem(start, stop) -> Optional[str]:
    """What is wrong with `start`-`stop` as an inclusive window of 0-based step numbers, or None."""
    for name, value in (("start", start), ("stop", stop)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"Expected {name} to be a step number >= 0. Received: {name}={value!r}"
    if stop < start:
        return f"Expected start <= stop (an inclusive window). Received: start={start}, stop={stop}"
    return None


def window_fits(window, steps_per_epoch: Optional[int], epochs: int) -> bool:
    """Whether the window's last step is within the run's steps (True while the steps per epoch are unknown)."""
    return window is None or not steps_per_epoch or window[1] <= steps_per_epoch * epochs
