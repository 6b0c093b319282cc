"""How much accelerator memory a training step of a transformer (a KerasHub preset) takes, said before it compiles.

Why: an out-of-memory error comes after the download, the load and the compile, and XLA's message names buffers,
not settings. Before compiling, the step's memory is added up from what drives it: the weights at their dtype, the
trainable weights' gradients and optimizer slots (Adam keeps 2), the activations each layer keeps for the backward
pass (with `remat`, only each block's input), and the logits at the vocabulary's size (batch x sequence x vocabulary,
the big term for Gemma's 256k tokens). It is compared with the device's memory (`Runtime.device_memory`) and said in
one line, with the setting that makes a step fit where it does not.

The bytes each element costs were measured against XLA's own figure for the compiled step (`xla_step_bytes`, on
JAX; docs/decisions.md "Memory before the run"). The widths come from the model's source (`ModelSource.shape`,
which knows its family's names for them); a model whose source has none gets no estimate.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

from tpukit.errors import TpukitError, one_line
from tpukit.validation import QUANTIZE_BITS
from tpukit.models import lora

GIB, MIB = 2**30, 2**20
# A step "fits" in this share of the device's memory: XLA's own buffers, fragmentation and the estimate's error
# (within 25% of XLA's figure) need the rest.
HEADROOM = 0.9
# What XLA kept per element, measured on KerasHub's Gemma (no remat; docs/decisions.md): the logits' float32 copy,
# softmax and gradient (3 x 4 bytes) and their own copy in the compute dtype (c bytes); the attention scores'
# float32 logits and probabilities (2 x 4) and a copy (c); per token and layer, in activation elements (c bytes, or
# 4 where XLA computes 16-bit math in float32, as on the CPU), 5.5 tensors of the hidden width, 2 of the
# query heads' width and 3 of the feed-forward width.
LOGITS_F32_COPIES, SCORES_F32_COPIES = 3, 2
HIDDEN_COPIES, HEADS_COPIES, FEEDFORWARD_COPIES = 5.5, 2, 3
# What XLA (RESOURCE_EXHAUSTED, "Out of memory ...") and TensorFlow ("OOM when allocating", ResourceExhaustedError)
# say when a device runs out of memory.
OUT_OF_MEMORY = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM when allocating")
OPTIMIZER_SLOTS = {"adam": 2, "adamw": 2, "rmsprop": 1, "sgd": 0}
# Bytes per frozen projection weight under QLoRA (RunConfig.quantize), from the bits of its mode.
QUANTIZED_BYTES = {mode: bits / 8 for mode, bits in QUANTIZE_BITS.items()}


@dataclasses.dataclass(frozen=True)
class Shape:
    """What a transformer's activations scale with: its vocabulary and layer widths. `feedforward` is the width
    of the feed-forward layers as they are (not a config's name for it, which some families double); `kv_heads`
    the key and value heads (grouped-query attention), where the LoRA adapters of the value projection sit. The
    model's source reads them from its own config (`ModelSource.shape`)."""

    vocabulary: int
    layers: int
    hidden: int
    heads: int
    head_dim: int
    feedforward: int
    kv_heads: int


# Backbones whose config's intermediate_dim is twice their feed-forward layers' width (their gates halve it:
# KerasHub's Gemma and Gemma 2; Gemma 3's `gate_dim_reduction` is 1).
_HALVED_FEEDFORWARD = ("GemmaBackbone",)


def backbone_shape(backbone_class: str, config: dict) -> Optional[Shape]:
    """A KerasHub backbone's widths (`Shape`) from its class name and config (config.json's, or
    `get_config()`), whatever its family calls them (GPT-2's `num_heads`; Llama's and Qwen's head_dim is
    hidden_dim / heads), or None where one is missing."""
    heads, hidden = config.get("num_query_heads") or config.get("num_heads"), config.get("hidden_dim")
    if not all(isinstance(v, int) and v > 0 for v in (heads, hidden)):
        return None
    feedforward = config.get("intermediate_dim")
    if isinstance(feedforward, int) and backbone_class in _HALVED_FEEDFORWARD:
        feedforward //= 2
    widths = (config.get("vocabulary_size"), config.get("num_layers"), hidden, heads)
    widths += (config.get("head_dim") or hidden // heads, feedforward, config.get("num_key_value_heads") or heads)
    return Shape(*widths) if all(isinstance(v, int) and v > 0 for v in widths) else None


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A training step's memory on one device, in bytes, by term; `device`: the device's memory, None where unknown
    (the CPU: host memory, no device limit)."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    logits: int
    device: Optional[int] = None
    remat: bool = False
    upcast: bool = False  # 16-bit math computed in float32 here (the CPU): larger activations, float32 weight copies

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.activations + self.logits

    @property
    def fits(self) -> bool:
        """Whether the step fits in `HEADROOM` of the device's memory (always, where no limit is known)."""
        return self.device is None or self.total <= HEADROOM * self.device

    def note(self) -> str:
        """`memory: about 3.1 GiB of 16 GiB (weights 2.0, gradients 0.0, optimizer 0.1, activations 0.6,
        logits 0.4)`: in GiB, or MiB where the step and the device are both under 1 GiB."""
        unit, size = ("GiB", GIB) if max(self.total, self.device or 0) >= GIB else ("MiB", MIB)
        of = f" of {self.device / size:.3g} {unit}" if self.device else ""
        terms = ", ".join(
            f"{name} {getattr(self, name) / size:.1f}"
            for name in ("weights", "gradients", "optimizer", "activations", "logits")
        )
        why = ", 16-bit math computed in float32 on this CPU" if self.upcast else ""  # why it grows at Connect
        return f"memory: about {self.total / size:.1f} {unit}{of} ({terms}{', remat on' if self.remat else ''}{why})"


def estimate(
    model,
    shape: Optional[Shape],
    *,
    batch_size: int,
    sequence_length: int,
    optimizer: str = "adam",
    remat: bool = False,
    accumulation: int = 1,
    device: Optional[int] = None,
    upcast: bool = False,
) -> Optional[Estimate]:
    """The memory of one training step of `model` on one device, or None where it has no `shape` (not a transformer
    whose widths its source knows).

    Args:
        model: a built transformer (its weights as the run holds them: LoRA, dtype).
        shape: its widths (`ModelSource.shape`), or None.
        batch_size: examples per step on the device; sequence_length: tokens per example.
        optimizer: the RunConfig optimizer's name (its slots per trainable weight).
        remat: whether each transformer block is rematerialized (keeps only its input for the backward pass).
        accumulation: gradient accumulation steps (above 1, one more slot per trainable weight).
        device: the device's memory in bytes, None where unknown.
        upcast: whether XLA computes 16-bit math in float32 here (the CPU: `Runtime.upcasts`): the activations are
            float32, and each 16-bit weight gets a float32 copy for its matmuls.
    """
    if shape is None:
        return None
    values = lora.quantized_sizes(model) if upcast else {}  # an int4 kernel holds two values to a byte
    weights = sum(_bytes(w) + (4 * values.get(w.path, _size(w)) if upcast and _upcast(w) else 0) for w in model.weights)
    return _step(
        shape,
        weights,
        sum(_bytes(w) for w in model.trainable_weights),
        _itemsize(model.dtype_policy.compute_dtype),
        batch_size=batch_size,
        sequence_length=sequence_length,
        optimizer=optimizer,
        remat=remat,
        accumulation=accumulation,
        device=device,
        upcast=upcast,
    )


def estimate_unbuilt(
    shape: Optional[Shape],
    parameters: int,
    *,
    lora_rank: Optional[int],
    batch_size: int,
    quantize: Optional[str] = None,
    sequence_length: int,
    optimizer: str = "adam",
    remat: bool = False,
    accumulation: int = 1,
    device: Optional[int] = None,
    upcast: bool = False,
) -> Optional[Estimate]:
    """`estimate` for a model not loaded yet, from its widths and parameter count (a preset's config.json and
    metadata.json), as a run would build it: with LoRA, every weight in bfloat16 (the projections int8 or int4 with
    `quantize`) and adapters of `lora_rank` on the query and value projections (float32); without, every weight
    trains, in float32. None where the shape or the count is unknown."""
    if shape is None or parameters <= 0:
        return None
    if lora_rank:  # A: (hidden, heads, rank) and B: (rank, head_dim), for the query's heads and the value's
        adapters = shape.layers * lora_rank * ((shape.heads + shape.kv_heads) * shape.hidden + 2 * shape.head_dim)
        embedding = shape.vocabulary * shape.hidden  # stays bfloat16 under QLoRA (models.lora._quantize)
        stored = 2 * embedding + QUANTIZED_BYTES.get(quantize, 2) * (parameters - embedding)
        weights, trainable, c = stored + (4 * parameters if upcast else 0) + 4 * adapters, 4 * adapters, 2
    else:
        weights = trainable = 4 * parameters
        c = 4
    return _step(
        shape,
        weights,
        trainable,
        c,
        batch_size=batch_size,
        sequence_length=sequence_length,
        optimizer=optimizer,
        remat=remat,
        accumulation=accumulation,
        device=device,
        upcast=upcast,
    )


def _step(
    shape: Shape,
    weights: int,
    trainable: int,
    c: int,
    *,
    batch_size: int,
    sequence_length: int,
    optimizer: str,
    remat: bool,
    accumulation: int,
    device: Optional[int],
    upcast: bool,
) -> Estimate:
    """The step's terms from the model's shape, its weights' and trainable weights' bytes and its compute dtype's
    item size `c`."""
    slots = OPTIMIZER_SLOTS.get(optimizer, 2) + (1 if accumulation > 1 else 0)
    a = 4 if upcast else c
    tokens = batch_size * sequence_length
    per_token = a * (
        HIDDEN_COPIES * shape.hidden
        + HEADS_COPIES * shape.heads * shape.head_dim
        + FEEDFORWARD_COPIES * shape.feedforward
    )
    scores = (SCORES_F32_COPIES * 4 + c) * batch_size * shape.heads * sequence_length**2
    layer = tokens * per_token + scores
    kept = shape.layers * tokens * shape.hidden * a + layer if remat else shape.layers * layer
    return Estimate(
        weights=int(weights),
        gradients=trainable,
        optimizer=slots * trainable,
        activations=int(kept),
        logits=(LOGITS_F32_COPIES * 4 + c) * tokens * shape.vocabulary,
        device=device,
        remat=remat,
        upcast=upcast,
    )


def advice(
    model,
    shape: Optional[Shape],
    *,
    batch_size: int,
    sequence_length: int,
    remat: bool = False,
    rows: int = 1,
    **settings,
) -> Tuple[Optional[str], Optional[Estimate]]:
    """(the settings that make a step fit, or None where it fits or nothing tried does; their estimate).

    Tried in order: remat on; a smaller batch with gradient accumulation making up the examples per update; batch
    size 1 with a shorter sequence_length. `batch_size` counts rows of tokens, `rows` of them an example (2 for a
    preference pair), and the advice is in examples. `settings`: `estimate`'s other arguments (optimizer, device,
    upcast)."""

    def fits(**changes):
        found = estimate(
            model,
            shape,
            **{"batch_size": batch_size, "sequence_length": sequence_length, "remat": remat, **settings, **changes},
        )
        return found if found is not None and found.fits else None

    if fits() or settings.get("device") is None:
        return None, None
    if not remat and fits(remat=True):
        return "remat=True", fits(remat=True)
    examples = batch_size // rows
    smaller = examples // 2
    while smaller >= 1:
        steps = math.ceil(examples / smaller)
        found = fits(remat=True, batch_size=smaller * rows, accumulation=steps)
        if found:
            return (
                f"remat=True, batch_size={smaller} and gradient_accumulation={steps} (the same examples per update)"
            ), found
        smaller //= 2
    length = sequence_length // 2
    while length >= 16:
        found = fits(remat=True, batch_size=rows, sequence_length=length)
        if found:
            return f"remat=True, batch_size=1 and sequence_length={length}", found
        length //= 2
    return None, None


def verdict(found: Estimate, fix: Optional[str], fixed: Optional[Estimate]) -> str:
    """`found`'s note and, in one line, whether it fits and what makes it fit."""
    if found.device is None:
        return f"{found.note()}; no device limit here (the CPU trains in host memory)"
    if found.fits:
        return f"{found.note()}: fits"
    return f"{found.note()}: does not fit; {remedy(fix, fixed)}"


def remedy(fix: Optional[str], fixed: Optional[Estimate] = None) -> str:
    """What to change where a step does not fit: `advice`'s settings, or the usual ones where none was found."""
    if fix is None:
        return (
            "try remat=True, a smaller batch_size with gradient_accumulation (the same examples per update), or "
            "a shorter sequence_length"
        )
    return f"{fix} brings it to about {fixed.total / GIB:.1f} GiB" if fixed else f"try {fix}"


def decide(model, shape: Optional[Shape], config, runtime, rows: int = 1) -> Tuple[bool, Optional[str], Optional[str]]:
    """(whether the run rematerializes, the notes' memory line, what to change where the step does not fit) for
    `model` (of widths `shape`) built for `config` on `runtime`, each example `rows` rows of tokens (2 for a
    preference pair): `config.remat` where set; "auto" is on only where the step does not fit without it. A model
    with no shape gets no line, and "auto" leaves it as it is."""
    settings = dict(
        batch_size=config.batch_size * rows,
        sequence_length=config.sequence_length,
        optimizer=config.optimizer,
        device=runtime.device_memory,
        upcast=runtime.upcasts,
    )
    remat = config.remat is True
    found = estimate(model, shape, remat=remat, accumulation=config.accumulation_steps, **settings)
    if found is None:
        return remat, None, None
    chose = ""
    if config.remat == "auto" and not found.fits:
        remat, chose = True, "; remat=auto turned remat on, since the step does not fit without it"
        found = estimate(model, shape, remat=True, accumulation=config.accumulation_steps, **settings)
    fix, fixed = advice(model, shape, remat=remat, rows=rows, **settings)
    return remat, verdict(found, fix, fixed) + chose, None if found.fits else remedy(fix, fixed)


class OutOfMemory(TpukitError, RuntimeError):
    """The device ran out of memory during the run; the message says what to change."""

    topic = "out of memory"


def out_of_memory(error: BaseException) -> bool:
    """Whether `error` is a device running out of memory (XLA's or TensorFlow's)."""
    return type(error).__name__ == "ResourceExhaustedError" or any(mark in str(error) for mark in OUT_OF_MEMORY)


def out_of_memory_message(error: BaseException, fix: Optional[str]) -> str:
    """One line for a run the device ran out of memory in: what to change (the estimate's `fix`, else the usual
    settings), then the start of the error."""
    return f"the device ran out of memory: {fix or remedy(None)} ({one_line(error, limit=120)})"


def xla_step_bytes(model, x, y) -> int:
    """XLA's own figure for `model`'s compiled training step on batch (`x`, `y`) (JAX only): its arguments, its
    temporary buffers and the outputs not written over donated arguments (the state Keras donates is counted once).
    Nothing runs: the step is lowered on shapes alone."""
    import jax
    import numpy as np

    model._symbolic_build(data_batch=(x, y, None))  # what fit does first (Keras' private build from a batch)
    model.optimizer.build(model.trainable_variables)
    state = tuple(
        [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in group]
        for group in (
            model.trainable_variables,
            model.non_trainable_variables,
            model.optimizer.variables,
            model.metrics_variables,
        )
    )
    data = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype), (x, y, None))
    stats = jax.jit(model.train_step, donate_argnums=0).lower(state, data).compile().memory_analysis()
    return (
        stats.argument_size_in_bytes + stats.temp_size_in_bytes + stats.output_size_in_bytes - stats.alias_size_in_bytes
    )


def _upcast(variable) -> bool:
    """Whether XLA computes with a float32 copy of `variable` where it upcasts (the CPU): a 16-bit weight, and a
    quantized one (QLoRA's base: int8, or int4 packed two to an int8, whose copy holds every value), measured so
    against `xla_step_bytes`."""
    return _itemsize(variable.dtype) == 2 or str(getattr(variable.dtype, "name", variable.dtype)) == "int8"


def _size(variable) -> int:
    return math.prod(int(d) for d in variable.shape)


def _bytes(variable) -> int:
    return _size(variable) * _itemsize(variable.dtype)


def _itemsize(dtype) -> int:
    import numpy as np

    name = str(getattr(dtype, "name", dtype))
    return 2 if name in ("bfloat16", "float16") else np.dtype(name).itemsize
