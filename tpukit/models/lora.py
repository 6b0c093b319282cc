"""LoRA, in one module: adapters on a Keras model's layers, what they train, and their update merged into a kernel.

Keras' `Dense`, `EinsumDense` and `Embedding` layers carry LoRA themselves (`enable_lora`, `lora_kernel_a`/`_b`,
`lora_alpha` from Keras 3.15); KerasHub's backbones add `enable_lora(rank, target_layer_names)` and the adapters'
own file (`save_lora_weights`). Everything tpukit asks of them is asked here, so the rest of tpukit says "adapted"
and never reads a layer's LoRA attributes.
"""

from __future__ import annotations

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


def enable(backbone, rank: int, alpha: Optional[float], targets, source: str) -> None:
    """KerasHub's `enable_lora` on `targets` of `backbone`, then alpha on each adapted layer (KerasHub's call takes
    no alpha; Keras' layers read theirs at every call). Targets that match no layer, a rank above the adapted
    layers' own sizes, or an alpha this Keras cannot set are a one-line ModelError."""
    backbone.enable_lora(rank, target_layer_names=list(targets) if targets else None)
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


def _width(layer) -> int:
    """The largest rank an update of `layer`'s kernel can have: the smaller of what its adapters map from (A's
    dimensions before the rank) and to (B's after it)."""
    a, b = layer.lora_kernel_a.shape, layer.lora_kernel_b.shape
    return min(math.prod(int(d) for d in a[:-1]), math.prod(int(d) for d in b[1:]))


def merged_kernels(model) -> dict:
    """{kernel path: float32 kernel + alpha / rank x A B} for each adapted layer of `model`, merged in float32 (as
    Keras merges them, without a 16-bit kernel's rounding, which would lose updates smaller than its step)."""
    import numpy as np

    merged = {}
    for layer in adapted_layers(model):
        a, b = (np.asarray(v.numpy(), dtype="float32") for v in (layer.lora_kernel_a, layer.lora_kernel_b))
        kernel = np.asarray(layer._kernel.numpy(), dtype="float32")  # the frozen kernel, without the adapters
        alpha = getattr(layer, "lora_alpha", layer.lora_rank)  # Keras before 3.15: alpha = rank
        merged[layer._kernel.path] = kernel + (alpha / layer.lora_rank) * np.matmul(a, b)
    return merged


def trainable_note(model, rank: Optional[int], alpha: Optional[float] = None) -> str:
    """`LoRA rank 4: 704 of 7,696 parameters train (9.1%), frozen weights in bfloat16`: what trains, in one line
    (`LoRA rank 4, alpha 8` where alpha is set)."""
    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    total = sum(math.prod(w.shape) for w in model.weights)
    frozen = {w.dtype for w in model.weights if not w.trainable}
    what = (f"LoRA rank {rank}" + (f", alpha {alpha:g}" if alpha is not None else "")) if rank else "full fine-tuning"
    where = f", frozen weights in {', '.join(sorted(frozen))}" if frozen else ""
    return f"{what}: {trainable:,} of {total:,} parameters train ({trainable / max(1, total):.1%}){where}"
