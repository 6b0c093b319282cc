"""LoRA, in one module: adapters on a Keras model's layers, what they train, and their update merged into a kernel.

Keras' `Dense`, `EinsumDense` and `Embedding` layers carry LoRA themselves (`enable_lora`, `lora_kernel_a`/`_b`,
`lora_alpha` from Keras 3.15); KerasHub's backbones add `enable_lora(rank, target_layer_names)` and the adapters'
own file (`save_lora_weights`, which `save_adapters` and `load_adapters` use). Everything tpukit asks of them is
asked here, so the rest of tpukit says "adapted" and never reads a layer's LoRA attributes.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
from typing import List, Optional

from tpukit.models.modeling import ModelError


def adapted_layers(model) -> List:
    """The layers of `model` (nested ones included) that carry LoRA adapters."""
    flatten = getattr(model, "_flatten_layers", None)  # Keras' walk of every nested layer
    if flatten is None:
        return []
    return [layer for layer in flatten(include_self=False) if getattr(layer, "lora_enabled", False)]


def is_adapted(model) -> bool:
    """Whether some layer of `model` carries LoRA adapters."""
    return bool(adapted_layers(model))


def adapters_only(model) -> bool:
    """Whether the adapters are all that trains in `model` (the rest frozen): a run then keeps the adapters alone."""
    trainable = list(getattr(model, "trainable_weights", None) or [])
    return bool(trainable) and is_adapted(model) and all("lora_kernel" in w.path for w in trainable)


@contextlib.contextmanager
def adapters_off(model):
    """`model` as its base, for the length of the block: each adapter's B matrix zero (its update A B is then 0),
    its value put back after."""
    import keras

    kept = [(layer.lora_kernel_b, keras.ops.convert_to_numpy(layer.lora_kernel_b)) for layer in adapted_layers(model)]
    try:
        for variable, value in kept:
            variable.assign(keras.ops.zeros_like(value))
        yield model
    finally:
        for variable, value in kept:
            variable.assign(value)


def enable(backbone, rank: int, alpha: Optional[float], targets, source: str, quantize: Optional[str] = None) -> None:
    """KerasHub's `enable_lora` on `targets` of `backbone`, then alpha on each adapted layer (KerasHub's call takes
    no alpha; Keras' layers read theirs at every call). Targets that match no layer, a rank above the adapted
    layers' own sizes, or an alpha this Keras cannot set are a one-line ModelError. With `quantize` ("int8"), the
    frozen weights are quantized first (QLoRA: Keras' `quantize`, then LoRA on the quantized layers).

    The adapters are float32 whatever the frozen weights' dtype (see `_adapters_in_float32`)."""
    names = list(targets) if targets else list(backbone.default_lora_layer_names())
    _adapters_in_float32(backbone, names)
    if quantize:
        _quantize(backbone, quantize)
    backbone.enable_lora(rank, target_layer_names=names)
    adapted = adapted_layers(backbone)
    if not adapted:
        names = sorted(
            {
                layer.name
                for layer in backbone._flatten_layers(include_self=False)
                if hasattr(layer, "enable_lora") and layer.weights
            }
        )
        raise ModelError(
            f"preset {source!r}: no layer is named {', '.join(targets or ())}, so LoRA adapted none; "
            f"layers that take adapters: {', '.join(names)}."
        )
    widest = min(_width(layer) for layer in adapted)
    if rank > widest:
        raise ModelError(
            f"lora_rank={rank} is more than the adapted layers' own width ({widest}): the adapters would "
            f"hold more parameters than the update they express can use; use lora_rank={widest} or less "
            "(4, 8 or 16 are usual on real models)."
        )
    if alpha is not None:
        missing = [layer.name for layer in adapted if not hasattr(layer, "lora_alpha")]
        if missing:
            import keras

            raise ModelError(
                f"lora_alpha={alpha}: Keras {keras.__version__}'s layers have no LoRA alpha; leave "
                "lora_alpha=None (alpha = rank) or install a newer Keras."
            )
        for layer in adapted:
            layer.lora_alpha = alpha


def _adapters_in_float32(backbone, names) -> None:
    """Before Keras 3.15, `enable_lora` makes the adapters in the layer's variable dtype: bfloat16 on a preset loaded
    in bfloat16, whose steps round away updates smaller than 1/128 of a weight, so the fine-tune learns almost
    nothing (Colab's CPU/GPU runtime, Keras 3.13.2: the validation loss stayed at 5.6005 for 3 epochs). There, each
    layer about to be adapted gets the mixed policy of its compute dtype (`mixed_bfloat16`: float32 variables,
    bfloat16 compute) first, so its adapters are float32 and read in bfloat16 inside the call, as Keras 3.15 does
    them; the frozen kernel stays as loaded. From Keras 3.15 nothing changes."""
    from tpukit import precision

    if _float32_adapters_built_in():
        return
    for layer in backbone._flatten_layers(include_self=False):
        mixed = precision.mixed(str(getattr(layer, "compute_dtype", "float32")))
        if layer.name in names and hasattr(layer, "enable_lora") and layer.weights and mixed is not None:
            if str(layer.variable_dtype) != mixed.variables:
                layer.dtype_policy = mixed.name


def _quantize(backbone, mode: str) -> None:
    """Keras' `quantize(mode)` on each dense projection of `backbone` (int8: int8 kernels and a float scale per
    output; int4: two 4-bit values packed in each int8, scaled per output on Keras 3.13, per group of 128 inputs with
    a zero point on 3.15), before the adapters, so that they stay float. The token embedding stays as loaded: in
    Keras 3.13-3.15 an int8 `ReversibleEmbedding` gives its reverse projection (the logits) a gradient about 4x too
    large, and the adapters below it then learn almost nothing (docs/decisions.md, "QLoRA")."""
    import keras

    for layer in backbone._flatten_layers(include_self=False):
        if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)) and layer.built and layer.weights:
            layer.quantize(mode)


def quantized(model) -> Optional[str]:
    """The mode `model`'s frozen weights are quantized in ("int8", "int4"), or None."""
    modes = {getattr(layer, "quantization_mode", None) for layer in model._flatten_layers(include_self=False)}
    modes.discard(None)
    return ", ".join(sorted(modes)) or None


def _quantized_kernels(model) -> dict:
    """{kernel variable path: layer} for each quantized Dense or EinsumDense of `model` (its `_kernel`: int8, or two
    int4 values packed in each int8)."""
    return {
        layer._kernel.path: layer
        for layer in model._flatten_layers(include_self=False)
        if getattr(layer, "quantization_mode", None) and getattr(layer, "_kernel", None) is not None
    }


def quantized_sizes(model) -> dict:
    """{kernel variable path: the number of values it holds} for each quantized kernel of `model`: its shape's for
    int8, twice its bytes' for int4 (two to a byte)."""
    return {path: math.prod(_kernel_shape(layer)) for path, layer in _quantized_kernels(model).items()}


def float_kernels(model) -> dict:
    """{variable path: float32 value} for each quantized weight of `model`, as the layer's own call reads it: what a
    float copy of the model holds in their place. A projection's kernel is read by running the layer
    (`_dequantized`), so every mode and layout Keras has reads alike; an int8 embedding is divided by its scale."""
    import numpy as np

    values = {path: _dequantized(layer) for path, layer in _quantized_kernels(model).items()}
    for layer in model._flatten_layers(include_self=False):
        if getattr(layer, "quantization_mode", None) and getattr(layer, "embeddings_scale", None) is not None:
            scale = np.asarray(layer.embeddings_scale.numpy(), dtype="float32")[:, None]  # a scale per token's row
            values[layer.embeddings.path] = np.asarray(layer.embeddings.numpy(), dtype="float32") / scale
    return values


# Rows of the identity per call of `_dequantized`: 64 MiB of float32 inputs for a 16,384-wide contraction (a 2B
# model's feed-forward output), where the whole identity would be 1 GiB.
_IDENTITY_ROWS = 1024


def _dequantized(layer):
    """The float32 kernel a quantized Dense or EinsumDense `layer` computes with, read by running it: on inputs that
    hold the identity across the contracted axes, its output is the kernel, dequantized by the layer's own call.
    Int8's scales and int4's packing, groups and zero points (which differ between Keras 3.13 and 3.15) are then
    Keras' to read, not tpukit's. The call runs with the adapters off, in float32 (its quantized policy computing in
    float32: one-hot rows quantize exactly), on `_IDENTITY_ROWS` rows of the identity at a time, and the bias (the
    output for zeros) is taken away."""
    import keras
    import numpy as np

    inputs, kernel, output = _contraction(layer)
    size = dict(zip(kernel, _kernel_shape(layer)))
    contracted = [c for c in inputs if c in kernel]
    made = [c for c in kernel if c not in inputs]
    rows = [c for c in inputs if c not in kernel]  # the first enumerates the identity's rows; any other is 1 long
    if not rows or any(c in output for c in contracted) or any(c not in output for c in made):
        raise ModelError(f"cannot read the quantized kernel of {layer.name} ({inputs},{kernel}->{output}) as floats")
    count = math.prod(size[c] for c in contracted)
    shape = [size[c] for c in contracted] + [1] * (len(rows) - 1)  # after the row axis
    order = [(rows[:1] + contracted + rows[1:]).index(c) for c in inputs]

    def call(x):
        return keras.ops.convert_to_numpy(layer(np.transpose(x.reshape([-1] + shape), order)))

    def identity(start: int):
        block = np.zeros((min(_IDENTITY_ROWS, count - start), count), dtype="float32")
        block[np.arange(len(block)), start + np.arange(len(block))] = 1.0
        return block

    kept, enabled = layer._dtype_policy, layer.lora_enabled
    working = copy.copy(layer.dtype_policy)  # its quantized mode and layout as they are (by name, no way back:
    working._compute_dtype = "float32"  # Keras 3.15 loses an int4 policy's name once the model is serialized)
    try:
        layer._dtype_policy, layer.lora_enabled = working, False
        bias = call(np.zeros((1, count), dtype="float32"))  # the output for zeros, the same on every row
        y = np.concatenate([call(identity(i)) for i in range(0, count, _IDENTITY_ROWS)], output.index(rows[0])) - bias
    finally:
        layer._dtype_policy, layer.lora_enabled = kept, enabled
    y = np.transpose(y, [output.index(c) for c in rows[:1] + made + [c for c in output if c not in rows[:1] + made]])
    y = y.reshape([size[c] for c in contracted + made])
    return np.transpose(y, [(contracted + made).index(c) for c in kernel]).astype("float32")


def _kernel_shape(layer) -> tuple:
    """The shape of a quantized layer's float kernel (int4 packs two values in each int8 of its `_kernel`), as Keras'
    `kernel` unpacks it, read with the adapters off: Keras 3.13 adds them to the int8 kernel there, which
    TensorFlow refuses."""
    enabled = layer.lora_enabled
    try:
        layer.lora_enabled = False
        return tuple(int(d) for d in layer.kernel.shape)
    finally:
        layer.lora_enabled = enabled


def _contraction(layer):
    """The (inputs, kernel, output) axis letters of `layer`'s product: its einsum equation, `ai,io->ao` for a Dense
    (Keras quantizes no EinsumDense whose equation has an ellipsis)."""
    equation = getattr(layer, "equation", None)
    if equation is None:
        return "ai", "io", "ao"
    inputs, rest = equation.replace(" ", "").split(",")
    kernel, output = rest.split("->")
    return inputs, kernel, output


@functools.lru_cache(maxsize=None)
def _float32_adapters_built_in() -> bool:
    """Whether this Keras makes LoRA adapters in float32 on a bfloat16 layer (Keras 3.15 and later): asked of a
    throwaway layer, named so that no automatic layer name moves, its weights zeros so that no random draw moves
    (a run's adapters start from the same draws whether or not this process asked before)."""
    import keras

    probe = keras.layers.Dense(1, dtype="bfloat16", kernel_initializer="zeros", name="tpukit_lora_probe")
    probe.build((None, 1))
    probe.enable_lora(1, a_initializer="zeros")
    return str(probe.lora_kernel_a.dtype) == "float32"


def _width(layer) -> int:
    """The largest rank an update of `layer`'s kernel can have: the smaller of what its adapters map from (A's
    dimensions before the rank) and to (B's after it)."""
    a, b = layer.lora_kernel_a.shape, layer.lora_kernel_b.shape
    return min(math.prod(int(d) for d in a[:-1]), math.prod(int(d) for d in b[1:]))


def merged_kernels(model, floats: Optional[dict] = None) -> dict:
    """{kernel path: float32 kernel + alpha / rank x A B} for each adapted layer of `model`, merged in float32 (as
    Keras merges them, without a 16-bit kernel's rounding, which would lose updates smaller than its step). A
    quantized kernel is read as its float value (`floats`: `float_kernels(model)`, computed here where not given)."""
    import numpy as np

    merged = {}
    floats = float_kernels(model) if floats is None else floats
    for layer in adapted_layers(model):
        a, b = (np.asarray(v.numpy(), dtype="float32") for v in (layer.lora_kernel_a, layer.lora_kernel_b))
        kernel = floats.get(layer._kernel.path)  # the frozen kernel, without the adapters
        if kernel is None:
            kernel = np.asarray(layer._kernel.numpy(), dtype="float32")
        alpha = getattr(layer, "lora_alpha", layer.lora_rank)  # Keras before 3.15: alpha = rank
        merged[layer._kernel.path] = kernel + (alpha / layer.lora_rank) * np.matmul(a, b)
    return merged


def trainable_note(model, rank: Optional[int], alpha: Optional[float] = None) -> str:
    """`LoRA rank 4: 704 of 7,696 parameters train (9.1%), frozen weights in bfloat16`: what trains, in one line
    (`LoRA rank 4, alpha 8` where alpha is set; `QLoRA rank 4` on a quantized base, saying which weights are int8 or
    int4, and counting an int4 kernel's values, not its packed bytes)."""
    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    kernels = quantized_sizes(model)
    total = sum({**{w.path: math.prod(w.shape) for w in model.weights}, **kernels}.values())
    extras = ("_scale", "_zero", "g_idx")  # a quantized kernel's scales, zero points and groups
    frozen = {
        w.dtype for w in model.weights if not w.trainable and w.path not in kernels and not w.path.endswith(extras)
    }
    mode = quantized(model)
    lora = "QLoRA" if mode else "LoRA"
    what = (f"{lora} rank {rank}" + (f", alpha {alpha:g}" if alpha is not None else "")) if rank else "full fine-tuning"
    where = f", frozen weights in {', '.join(sorted(frozen))}" if frozen else ""
    if mode:
        where += f" (the projections' kernels in {mode}, the embedding as loaded)"
    return f"{what}: {trainable:,} of {total:,} parameters train ({trainable / max(1, total):.1%}){where}"


def save_adapters(model, path) -> None:
    """Write `model`'s adapters alone to `path`, in KerasHub's file (`backbone.save_lora_weights`, `.lora.h5`)."""
    model.backbone.save_lora_weights(str(path))


def load_adapters(model, path) -> Optional[str]:
    """Load the adapters at `path` into `model` (KerasHub's `load_lora_weights`); what did not fit, or None."""
    load = getattr(getattr(model, "backbone", None), "load_lora_weights", None)
    if load is None:
        return f"{path} holds LoRA adapters, and this {type(model).__name__} has no KerasHub backbone to take them"
    try:
        load(str(path))
    except Exception as e:
        return f"{type(e).__name__}: {str(e).strip()}"
    return None
