"""What XLA's TPU tiling pads in a model: feature sizes that are not a multiple of 128.

A TPU tiles an array's two minor dimensions, one to a multiple of 8 and another to 128 (Cloud TPU performance
guide, "Consequences of tiling"). In a Dense layer's [batch, units] the units take the 128 side, so 100 units
compute as 128. Convolutions are left out: XLA lays them out either way (the batch on 128 and the filters on 8, or
the reverse), so their padding is the profiler's to show, not a rule's. `config.padding_advice` covers the batch
(the 8 side); this covers the model, for any Keras model, the user's own included. A model's output layers are left out: their size is the
task's (10 classes are 10), not a choice.
"""

from __future__ import annotations

from typing import List, Tuple

LANES = 128


def _width(layer):
    value = getattr(layer, "units", None)
    return value if isinstance(value, int) and value > 0 else None


def _leaves(layer):
    inner = getattr(layer, "layers", None)
    if inner:
        for sub in inner:
            yield from _leaves(sub)
    else:
        yield layer


def padded_features(model) -> List[Tuple[str, int, int]]:
    """(layer name, units, padded units) for each hidden layer with `units` that is not a multiple of 128.

    A functional or Sequential model's output layers are known; a subclassed model's last such layer is taken as
    its output.
    """
    outputs = {id(t) for t in getattr(model, "outputs", None) or []}
    layers = [layer for layer in _leaves(model) if _width(layer) is not None]
    if not outputs and layers:
        layers = layers[:-1]
    found = []
    for layer in layers:
        width = _width(layer)
        produced = getattr(layer, "_inbound_nodes", None) or []
        is_output = any(id(t) in outputs for node in produced for t in getattr(node, "output_tensors", ()))
        if width % LANES == 0 or is_output:
            continue
        found.append((layer.name, width, -(-width // LANES) * LANES))
    return found


def note(model) -> str:
    """One line for a TPU run's notes, or "" when every hidden width fills the 128 lanes."""
    found = padded_features(model)
    if not found:
        return ""
    shown = ", ".join(f"{name} {width}->{padded}" for name, width, padded in found[:4])
    more = f" and {len(found) - 4} more" if len(found) > 4 else ""
    return (
        f"tiling: on a TPU these feature sizes are padded to a multiple of 128 lanes, so part of each matmul is "
        f"padding: {shown}{more} (a multiple of 128 wastes none)"
    )
