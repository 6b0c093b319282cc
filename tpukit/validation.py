"""RunConfig's checks: `ConfigError` and the rules each field's value must meet, in one line per refusal.

`RunConfig` declares the fields and their defaults (`tpukit.config`); what a value may be, and the sentence that
says so when it is not, lives here, so the declaration reads as a list of settings. The batch's padding advice and
the profile window's rules are here too: the config, the run's plan and the profiler check with them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
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
ADVISE = contextvars.ContextVar("tpukit_padding_advice", default=True)


@contextlib.contextmanager
def advising(on: bool):
    """Configs built inside give the padding advice only if `on` (and it is not off around them already)."""
    token = ADVISE.set(on and ADVISE.get())
    try:
        yield
    finally:
        ADVISE.reset(token)


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


def fail(field: str, value: Any, expected: str, choices=None) -> None:
    raise ConfigError(
        f"RunConfig.{field}: expected {expected}. Received: {field}={value!r}.",
        field=field,
        value=value,
        expected=expected,
        choices=choices,
        detail=None,
    )


def check_choice(field: str, value: Any, choices) -> None:
    if value not in choices or isinstance(value, bool) != any(isinstance(c, bool) and c == value for c in choices):
        fail(field, value, "one of " + ", ".join(repr(c) for c in choices), choices)


def check_name(field: str, value: Any) -> None:
    """Model, dataset and loss names: checked for form here; what they name is resolved by train()."""
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\n\r\t"):
        text = field == "dataset" and isinstance(value, str) and len(value.split()) > 1  # text, passed as a name
        fail(
            field,
            value,
            "a name: built in, registered, or an import path 'package.module:function'"
            + ("; text itself goes in a list of documents: train(data=[text])" if text else ""),
        )


def check_int(field: str, value: Any, minimum: int, optional: bool = False, maximum: Optional[int] = None) -> None:
    if optional and value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        what = f"an integer >= {minimum}" + (f" and <= {maximum:,}" if maximum is not None else "")
        fail(field, value, what + (" or None" if optional else ""))


# Bounds past which a run can never train: NumPy seeds are 32-bit; the others are far beyond any real run.
MAX_SEED = 2**32 - 1
MAX_EPOCHS = 1_000_000
MAX_EXAMPLES = 100_000_000
MAX_NAME = 100
MAX_LORA_RANK = 4096
# What `RunConfig.quantize` stores frozen weights in (Keras: models.lora), and the bits each weight then takes
# (models.memory counts them): a new mode joins here alone.
QUANTIZE_BITS = {"int8": 8, "int4": 4}
QUANTIZE_MODES = tuple(QUANTIZE_BITS)
MAX_SEQUENCE_LENGTH = 1_048_576
# What a run of a language model learns from (`RunConfig.method`): its next tokens (supervised fine-tuning), or which
# of two answers people prefer (`models.preference`): DPO against a reference model, SimPO without one. Each
# preference method's default options; a new method joins here and in `models.preference.METHODS`.
PREFERENCE_DEFAULTS = {"dpo": {"beta": 0.1, "reference": "start"}, "simpo": {"beta": 2.0, "gamma": 1.0}}
METHODS = ("sft",) + tuple(PREFERENCE_DEFAULTS)
REFERENCES = ("start", "base")  # DPO's reference: the model as the run starts, or the preset without its adapters
MAX_MODEL_PARALLEL = 4096
_RESERVED_NAMES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}


@dataclasses.dataclass(frozen=True)
class PreferenceOptions:
    """The options of a preference method (`RunConfig.preference`); None takes the method's default
    (`PREFERENCE_DEFAULTS`).

    `beta` scales the reward (DPO: the log-probability ratio to the reference, 0.1 as in Rafailov et al.; SimPO: the
    length-normalized log-probability, 2.0 as in Meng et al.); `gamma` is SimPO's target margin (1.0); `reference`
    is what DPO compares with: "start", the model as the run starts (the preset, or `init_from`'s fine-tune), or
    "base", the preset with its LoRA adapters off.

    >>> PreferenceOptions(beta=0.2)
    PreferenceOptions(beta=0.2, gamma=None, reference=None)
    """

    beta: Optional[float] = None
    gamma: Optional[float] = None
    reference: Optional[str] = None

    def given(self) -> dict:
        """The options set, by name."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def _check_preference(c) -> None:
    """`method` and `preference`, which must agree: options only for a preference method, and only its own."""
    check_choice("method", c.method, METHODS)
    options = c.preference
    if isinstance(options, dict):
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(PreferenceOptions)})
        if unknown:
            fail("preference", options, "options among beta, gamma and reference; no " + ", ".join(map(repr, unknown)))
        options = PreferenceOptions(**options)
        object.__setattr__(c, "preference", options)
    if options is not None and not isinstance(options, PreferenceOptions):
        fail("preference", options, "None or PreferenceOptions(beta=..., gamma=..., reference=...)")
    if options is None or not options.given():
        return
    if c.method == "sft":
        fail(
            "preference",
            options,
            f"None for method='sft' (these are a preference method's options: set method to one of "
            f"{', '.join(map(repr, PREFERENCE_DEFAULTS))}, or leave preference unset)",
        )
    own = PREFERENCE_DEFAULTS[c.method]
    for name in options.given():
        if name not in own:
            fail("preference", options, _NOT_ITS_OWN[name].format(method=c.method))
    beta = options.beta
    if beta is not None and (isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta < math.inf):
        fail("preference", options, f"beta > 0 (it scales the reward; {c.method}'s default is {own['beta']})")
    gamma = options.gamma
    if gamma is not None and (
        isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < math.inf
    ):
        fail("preference", options, "gamma >= 0 (SimPO's target margin between the two answers' rewards)")
    if options.reference is not None:
        check_choice("preference.reference", options.reference, REFERENCES)
        if options.reference == "base" and c.lora_rank is None:
            fail(
                "preference",
                options,
                "reference='start' where every weight trains (lora_rank=None): 'base' turns LoRA adapters off, and "
                "there are none",
            )


_NOT_ITS_OWN = {  # an option that the method has no use for, and why
    "reference": "no reference for method='{method}': it is reference-free (each answer is scored by its own "
    "length-normalized log-probability); leave reference unset, or use method='dpo'",
    "gamma": "no gamma for method='{method}': gamma is SimPO's target margin; leave it unset, or use method='simpo'",
}


def preference_option(c, name: str):
    """`c`'s preference option `name`, its method's default where unset (None where the method has none)."""
    options = c.preference.given() if c.preference is not None else {}
    return options.get(name, PREFERENCE_DEFAULTS.get(c.method, {}).get(name))


def check_run_name(name: Any) -> None:
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
        fail(
            "name",
            name,
            f'a run name of at most {MAX_NAME} characters, without / \\ : * ? " < > | or control '
            "characters, not ending in a dot or space, and not a Windows device name",
        )


def check_config(c) -> None:
    """Check every field of RunConfig `c` (normalising lists to tuples and paths to text); ConfigError for the first
    that fails, and the padding advice where the batch would be padded."""
    _check_hardware_and_data(c)
    _check_training(c)
    _check_run_and_pretrained(c)
    c.check_for(c.accelerator, c.replicas or 1)
    advice = padding_advice(c.batch_size, c.accelerator) if ADVISE.get() else None
    if advice:
        warnings.warn(advice, PaddingWarning, stacklevel=4)


def _check_hardware_and_data(c) -> None:
    check_choice("backend", c.backend, BACKENDS)
    check_choice("accelerator", c.accelerator, ACCELERATORS)
    if c.tpu is not None and (not isinstance(c.tpu, str) or not c.tpu):
        fail("tpu", c.tpu, "a TPU name, 'local' or a grpc:// address")
    check_int("replicas", c.replicas, 1, optional=True)
    check_name("dataset", c.dataset)
    check_int("dataset_size", c.dataset_size, 1, optional=True, maximum=MAX_EXAMPLES)
    check_name("model", c.model)
    check_name("loss", c.loss)
    if isinstance(c.metrics, (list, str)):
        object.__setattr__(c, "metrics", (c.metrics,) if isinstance(c.metrics, str) else tuple(c.metrics))
    if not isinstance(c.metrics, tuple) or not all(isinstance(m, str) and m for m in c.metrics):
        fail("metrics", c.metrics, "a tuple of metric names such as ('accuracy',) or ('mae',)")
    split = c.validation_split
    if split is not None and (isinstance(split, bool) or not isinstance(split, (int, float)) or not 0 < split < 1):
        fail("validation_split", split, "a fraction between 0 and 1 (exclusive), or None for no validation")


def _check_training(c) -> None:
    check_int("epochs", c.epochs, 1, maximum=MAX_EPOCHS)
    check_int("steps_per_epoch", c.steps_per_epoch, 1, optional=True)
    check_int("batch_size", c.batch_size, 1)
    check_choice("precision", c.precision, precisions.CHOICES)
    if not isinstance(c.deterministic, bool):
        fail("deterministic", c.deterministic, "True or False")
    check_int("seed", c.seed, 0, maximum=MAX_SEED)
    lr = c.learning_rate
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < math.inf:
        fail("learning_rate", lr, "a positive number")
    check_choice("optimizer", c.optimizer, OPTIMIZERS)
    spe = c.steps_per_execution
    if spe != "auto" and (isinstance(spe, bool) or not isinstance(spe, int) or spe < 1):
        fail("steps_per_execution", spe, "'auto' or an integer >= 1")
    check_choice("jit_compile", c.jit_compile, JIT_CHOICES)
    check_int("early_stopping", c.early_stopping, 1, optional=True)
    if c.profile is not None:
        window = c.profile
        if isinstance(window, list):
            window = tuple(window)
            object.__setattr__(c, "profile", window)
        if not isinstance(window, tuple) or len(window) != 2 or window_problem(*window):
            fail("profile", c.profile, "None or (start, stop) steps with 0 <= start <= stop")
        if not window_fits(window, c.steps_per_epoch, c.epochs):
            fail(
                "profile",
                c.profile,
                f"a window within the run's {c.steps_per_epoch * c.epochs} "
                f"steps ({c.epochs} epochs x steps_per_epoch={c.steps_per_epoch})",
            )


def _check_run_and_pretrained(c) -> None:
    if not isinstance(c.logdir, str) or not c.logdir:
        fail("logdir", c.logdir, "a directory path")
    check_run_name(c.name)
    if hasattr(c.init_from, "__fspath__"):
        object.__setattr__(c, "init_from", str(c.init_from.__fspath__()))
    if c.init_from is not None and (not isinstance(c.init_from, str) or not c.init_from.strip()):
        fail("init_from", c.init_from, "None or the directory of a run whose final weights start this one")
    rank = c.lora_rank
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_LORA_RANK):
        fail(
            "lora_rank",
            rank,
            f"an integer from 1 to {MAX_LORA_RANK:,} (the LoRA adapters' rank; 4, 8 or 16 "
            "are usual), or None to train every weight",
        )
    check_int("sequence_length", c.sequence_length, 1, maximum=MAX_SEQUENCE_LENGTH)
    if c.quantize is not None and c.quantize not in QUANTIZE_MODES:
        fail("quantize", c.quantize, f"None or {' or '.join(map(repr, QUANTIZE_MODES))} (the frozen weights' storage)")
    if c.quantize is not None and rank is None:
        fail(
            "quantize",
            c.quantize,
            "None where every weight trains (lora_rank=None): a quantized weight cannot train; set lora_rank to "
            "quantize the frozen base under LoRA adapters (QLoRA)",
        )
    alpha = c.lora_alpha
    if alpha is not None and (
        isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < math.inf
    ):
        fail(
            "lora_alpha",
            alpha,
            "a positive number (the adapters' update is scaled by alpha / rank; 2 x rank "
            "is usual), or None for Keras' default, alpha = rank",
        )
    if c.sample_prompt is not None and not isinstance(c.sample_prompt, str):
        fail(
            "sample_prompt",
            c.sample_prompt,
            'text for the model to continue, "" for no samples, or None for the first words of the training text',
        )
    targets = c.lora_targets
    if isinstance(targets, (list, str)):
        targets = (targets,) if isinstance(targets, str) else tuple(targets)
        object.__setattr__(c, "lora_targets", targets)
    if targets is not None and (
        not isinstance(targets, tuple) or not targets or not all(isinstance(t, str) and t for t in targets)
    ):
        fail(
            "lora_targets",
            c.lora_targets,
            "None (KerasHub's default: the attention's query and value "
            "projections) or layer names such as ('query', 'value')",
        )
    _check_preference(c)
    check_choice("remat", c.remat, REMAT_CHOICES)
    steps = c.gradient_accumulation
    if steps != "auto" and (
        isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_ACCUMULATION
    ):
        fail(
            "gradient_accumulation",
            steps,
            f"'auto' or an integer from 1 to {MAX_ACCUMULATION:,} (steps whose gradients one update applies)",
        )
    if hasattr(c.compilation_cache, "__fspath__"):
        object.__setattr__(c, "compilation_cache", str(c.compilation_cache.__fspath__()))
    if c.compilation_cache == "off":  # the CLI's word for None: one value means off
        object.__setattr__(c, "compilation_cache", None)
    cache = c.compilation_cache
    if cache is not None and (not isinstance(cache, str) or not cache.strip() or any(c in cache for c in "\n\r")):
        fail("compilation_cache", cache, "'auto', a directory for JAX's compiled programs, or None or 'off'")
    check_int("model_parallel", c.model_parallel, 1, maximum=MAX_MODEL_PARALLEL)


def global_batch(batch_size: int, replicas: int) -> int:
    """Examples per step over all replicas: the per-replica batch times the replicas. The one place that says it."""
    return batch_size * replicas


def model_copies(devices: int, model_parallel: int) -> int:
    """The copies of the model `devices` hold, over which the global batch is split: the devices over the ones each
    copy is split across (`model_parallel`), at least 1. The one place that says it."""
    return max(1, devices // model_parallel)


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
