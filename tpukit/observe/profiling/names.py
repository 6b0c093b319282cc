"""Readable names for profiled ops: the layer and the op, from what the trace says about each.

A profiler names ops by where they sit, not by what a Keras user wrote:
TensorFlow by graph path ("StatefulPartitionedCall/gradient_tape/cnn_1/
conv2d_1_2/convolution/Conv2DBackpropFilter"), XLA by module and instruction
("jit_train_step/ynn_fusion.3"). The compiled module that XLA writes into a
capture keeps the framework's op name for most instructions ("jit(train_step)/
transpose(jvp(conv2d_1))/conv_general_dilated"); these functions turn either
into "<layer> <op>" ("conv2d_1 Conv2DBackpropFilter", "conv2d_1 conv (grad)"),
and `distinct` keeps the names of a table apart. Plain strings in, plain
strings out: nothing here reads a file.
"""

from __future__ import annotations

import re
from typing import Collection, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

__all__ = ["distinct", "forward_layer", "jax_name", "tf_layer_suffixes", "tf_name", "xla_name"]

# Graph scopes that say how an op was called, not which layer it belongs to.
_TF_WRAPPERS = frozenset({"StatefulPartitionedCall", "PartitionedCall", "while", "cond", "body"})
_TF_GRADIENT = "gradient_tape"
# Prefixes of TensorFlow's kernel-specific op types (oneDNN's, the grappler-fused).
_TF_KERNEL_PREFIX = re.compile(r"^_?(MklNative|Mkl)?_?")
_TF_UNIQUE_SUFFIX = re.compile(r"_\d+$")
# JAX primitives whose names are long for a chart label.
_PRIMITIVES = {"conv_general_dilated": "conv", "dot_general": "dot"}
_JAX_CALL = re.compile(r"^(?:p?jit|remat|checkpoint|custom_jvp_call|custom_vjp_call)\(")
_JAX_TRANSFORM = re.compile(r"^(jvp|transpose|vmap|vjp|pmap|shard_map)\((.*)\)$")
_GRAD = " (grad)"
# XLA opcodes of the work that has weights: the gradient of their weights is the same kind of op.
_WEIGHTED = {"convolution": "conv", "dot": "dot"}


def _split(path: str) -> List[str]:
    """A scope path's parts, split at the slashes outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(path):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "/" and depth == 0:
            parts.append(path[start:i])
            start = i + 1
    parts.append(path[start:])
    return [p for p in parts if p]


_TF_TYPED = re.compile(r"^(.*[^:]):([A-Za-z_]\w*)$")  # the trace's "name:Type" (not a dataset's "Iterator::Map")


def _untyped(path: str) -> Tuple[str, str]:
    """(name, op type) of the trace's "name:Type"; (path, "") for a plain name."""
    match = _TF_TYPED.match(path)
    return (match.group(1), match.group(2)) if match else (path, "")


def _tf_scopes(path: str) -> Tuple[List[str], bool]:
    """(the path's scopes without the call wrappers, whether it is in the gradient tape); "a:Type" loses ":Type"."""
    parts = [p for p in _split(_untyped(path)[0]) if p not in _TF_WRAPPERS]
    grad = _TF_GRADIENT in parts
    return [p for p in parts if p != _TF_GRADIENT], grad


def _tf_layer(scopes: Sequence[str]) -> str:
    """The layer of a TensorFlow op's scopes: the one under the model's (model/layer/.../op), else the first."""
    if len(scopes) >= 3:
        return scopes[1]
    return scopes[0] if len(scopes) == 2 else ""


def tf_layer_suffixes(paths: Iterable[str]) -> FrozenSet[str]:
    """The model scopes of these op paths under which TensorFlow made every layer scope unique with "_<n>".

    Keras 3 on TensorFlow traces the train step after building the model, so
    the graph names model `cnn` "cnn_1", its layer `conv2d` "conv2d_1" and
    layer `conv2d_1` "conv2d_1_2". Under a model scope that carries such a
    suffix and whose layer scopes all do, dropping it gives the layers' own
    names; elsewhere ("compile_loss/sparse_categorical_crossentropy") the
    names are kept as they are.
    """
    layers: Dict[str, List[str]] = {}
    for scopes, _ in map(_tf_scopes, paths):
        if len(scopes) >= 3:
            layers.setdefault(scopes[0], []).append(scopes[1])
    return frozenset(
        model
        for model, found in layers.items()
        if _TF_UNIQUE_SUFFIX.search(model) and all(_TF_UNIQUE_SUFFIX.search(x) for x in found)
    )


def tf_name(path: str, op_type: str = "", suffixed: Collection[str] = ()) -> str:
    """'<layer> <op type>' for a TensorFlow op's graph path, e.g. "conv2d_1 Conv2DBackpropFilter".

    Args:
        path: The op's name in the graph ("StatefulPartitionedCall/cnn_1/conv2d_1_2/convolution"), or the
            trace's "name:Type".
        op_type: The op's type as the profiler gives it ("_MklNativeConv2D"); the path's last part without one.
        suffixed: Model scopes whose layer scopes carry a "_<n>" TensorFlow added (see `tf_layer_suffixes`):
            it is dropped from the layer's name.
    """
    scopes, grad = _tf_scopes(path)
    if len(scopes) < 2:
        return _untyped(path)[0]  # an op of its own, not in a layer: "Iterator::Root", "cluster_0"
    kind = _TF_KERNEL_PREFIX.sub("", op_type or _untyped(path)[1]) or scopes[-1]
    layer = _tf_layer(scopes)
    if scopes[0] in suffixed:
        layer = _TF_UNIQUE_SUFFIX.sub("", layer)
    said_grad = grad and not re.search(r"grad|backprop", kind, re.IGNORECASE)
    name = f"{layer} {kind}" if layer and layer != kind else kind
    return name + (_GRAD if said_grad else "")


def _unwrap(scope: str) -> Tuple[str, bool]:
    """(the name inside JAX's transformation wrappers, whether one was a transpose): "transpose(jvp(x))" -> x."""
    grad = False
    while True:
        match = _JAX_TRANSFORM.match(scope)
        if not match:
            return scope, grad
        grad = grad or match.group(1) in ("transpose", "vjp")
        scope = match.group(2)


def _jax_parts(op_name: str) -> Tuple[str, str, bool]:
    """(layer, primitive, whether in the gradient) of JAX's op name; ("", "", False) for an empty one."""
    parts = _split(op_name)
    while parts and _JAX_CALL.match(parts[0]):
        parts = parts[1:]  # the jitted function: every op of the step is in it
    if not parts:
        return "", "", False
    leaf, grad = _unwrap(parts[-1])
    layer = ""
    for scope in parts[:-1]:
        if _JAX_CALL.match(scope):
            continue  # a function called inside the layer, e.g. jit(relu)
        name, transposed = _unwrap(scope)
        grad = grad or transposed
        layer = layer or name
    return layer, _PRIMITIVES.get(leaf, leaf), grad


def _combined(op_name: str) -> List[str]:
    """The op names XLA merged into one ("a/(b/x:c/y)" when it combines ops, as an all-reduce of several
    gradients): ["a/b/x", "a/c/y"]; [op_name] for one that is not combined."""
    parts = _split(op_name)
    for i, part in enumerate(parts):
        if part.startswith("(") and part.endswith(")") and ":" in part:
            inner, depth, start, pieces = part[1:-1], 0, 0, []
            for j, ch in enumerate(inner):
                depth += (ch == "(") - (ch == ")")
                if ch == ":" and depth == 0:
                    pieces.append(inner[start:j])
                    start = j + 1
            pieces.append(inner[start:])
            head = "/".join(parts[:i])
            return [f"{head}/{piece}" if head else piece for piece in pieces if piece]
    return [op_name]


def jax_name(op_name: str, kind: str = "") -> str:
    """'<layer> <primitive>' for JAX's op name, e.g. "jit(train_step)/transpose(jvp(conv2d_1))/conv_general_dilated"
    gives "conv2d_1 conv (grad)" and "jit(train_step)/adam/add" gives "adam add"; "" for an empty op name.

    `kind`, where given, replaces the primitive (an all-reduce keeps the name of the sum it distributes). An op
    XLA combined from several ("jit(f)/(transpose(jvp(conv2d))/...:transpose(jvp(logits))/...)") reads
    "<kind> of conv2d…logits (grad)".
    """
    pieces = [_jax_parts(piece) for piece in _combined(op_name)]
    pieces = [p for p in pieces if p[1]]
    if not pieces:
        return ""
    grad = all(g for _, _, g in pieces)
    layers = list(dict.fromkeys(layer for layer, _, _ in pieces if layer))
    if len(pieces) > 1 and len(layers) != 1:
        what = kind or "combined ops"
        name = f"{what} of {layers[0]}…{layers[-1]}" if len(layers) > 1 else what
    else:
        layer, primitive, _ = pieces[0]
        name = f"{layers[0] if layers else layer} {kind or primitive}".strip()
    return name + (_GRAD if grad else "")


# XLA opcodes of collectives: what they cost is the communication, whatever op their metadata names.
_COLLECTIVES = frozenset(
    {
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "collective-permute",
        "all-reduce-start",
        "all-gather-start",
        "collective-permute-start",
    }
)


def _framework_name(op_name: str, op_type: str, suffixed: Collection[str], opcode: str = "") -> str:
    """JAX's op names hold calls ("jit(f)/jvp(layer)/prim"); TensorFlow's are plain scopes with an op type."""
    kind = opcode if opcode in _COLLECTIVES else ""
    if "(" in op_name:
        return jax_name(op_name, kind)
    return tf_name(op_name, kind or op_type, suffixed)


def _layer_of(op_names: Sequence[str]) -> Optional[str]:
    """The one layer (" (grad)" added in the gradient) that all these framework op names that name one name, or None."""
    layers = set()
    for op_name in op_names:
        if "(" in op_name:
            layer, _, grad = _jax_parts(op_name)
        else:
            scopes, grad = _tf_scopes(op_name)
            layer = _tf_layer(scopes)
        if layer:
            layers.add(layer + (_GRAD if grad else ""))
    return layers.pop() if len(layers) == 1 else None


def forward_layer(op_name: str) -> str:
    """The layer of a JAX op name outside the gradient ("jit(f)/jvp(conv2d_1)/conv_general_dilated" gives
    "conv2d_1"); "" for one in the gradient, outside a layer, or TensorFlow's."""
    if "(" not in op_name:
        return ""
    layer, _, grad = _jax_parts(op_name)
    return "" if grad else layer


def xla_name(
    opcode: str,
    op_type: str,
    op_name: str,
    fused: Sequence[Tuple[str, str, str]] = (),
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    suffixed: Collection[str] = (),
    weight_of: str = "",
) -> str:
    """A readable name for an XLA op from its compiled module's metadata; "" where the module says nothing.

    The op's own framework op name first; for a fusion without one, the first
    fused instruction that has one (the root first); for one whose fused
    instructions lost theirs too, the kind of work it does (its root's opcode,
    e.g. "convolution") and the layer it reads from ("after re_lu_1") or, failing
    that, the one it feeds ("into adam"). `suffixed` is `tf_layer_suffixes` of
    the module's op names, for one compiled from TensorFlow. `weight_of` is the
    layer whose weights have the shape of a nameless convolution's or dot's
    result: that op is the gradient of those weights ("conv2d_1 conv (weight grad)").
    """
    if op_name:
        return _framework_name(op_name, op_type, suffixed, opcode)
    for inner_opcode, inner_type, inner_name in fused:
        if inner_name:
            return _framework_name(inner_name, inner_type, suffixed)
    kind = fused[0][0] if fused else ("" if opcode == "fusion" else opcode)
    if not kind:
        return ""
    if weight_of and kind in _WEIGHTED:
        return f"{weight_of} {_WEIGHTED[kind]} (weight grad)"
    before, after = _layer_of(inputs), _layer_of(outputs)
    if before:
        return f"{kind} after {before}"
    if after:
        return f"{kind} into {after}"
    return kind


def distinct(names: Sequence[str], paths: Sequence[str]) -> List[str]:
    """The names, each one that another shares followed by the end of its path in parentheses, e.g.
    "batch_normalization Mul (moments/truediv)": as many of the path's last parts as set it apart."""
    out = list(names)
    for name in set(names):
        same = [i for i, n in enumerate(names) if n == name]
        if len(same) < 2:
            continue

        def tails(depth: int) -> List[str]:
            return ["/".join(_split(_untyped(paths[i])[0])[-depth:]) for i in same]

        apart = next((t for t in map(tails, range(1, 8)) if len(set(t)) == len(t)), None)
        for k, i in enumerate(same):
            tail = apart[k] if apart else f"{tails(1)[k]} #{k + 1}"
            out[i] = f"{name} ({tail})" if name else tail
    return out
