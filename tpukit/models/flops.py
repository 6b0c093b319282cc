"""FLOPs per training example for any Keras model, counted by the backend's compiler where it can.

MFU divides achieved FLOP/s by the hardware's peak, so a wrong count is worse
than none. The count comes from, in order:

1. the compiler: XLA's cost analysis of the forward pass on JAX; on
   TensorFlow, the float-operation count of the traced graph (the TF profiler's
   per-op FLOP rules, exact for MatMul and Conv2D);
2. layer counting (Dense and convolutions) for functional models, whose layers
   know their input and output shapes;
3. nothing: `None`, with the reason.

Training FLOPs are 3x the forward pass (forward, and about twice that
backward), the usual convention for model FLOPs utilization.
"""

from __future__ import annotations

import contextlib
import io
from typing import Optional, Tuple


def training_flops_per_example(model, sample) -> Tuple[Optional[int], str]:
    """(FLOPs per training example or None, how they were counted or why not).

    Args:
        model: a built Keras model.
        sample: a few example inputs (NumPy; a dict for named inputs), batch first.
    """
    import keras

    batch = _batch_size(sample)
    errors = []
    counter = _jax_forward if keras.backend.backend() == "jax" else _tf_forward
    if batch:
        try:
            forward = counter(model, sample)
            if forward and forward > 0:
                return int(round(3 * forward / batch)), counter.__doc__.strip().splitlines()[0].rstrip(".")
            errors.append("the compiler counted no floating-point operations")
        except Exception as e:  # a model the tracer cannot take: fall back to the layers
            errors.append(f"the compiler could not count it ({type(e).__name__})")
    layers = layer_count(model)
    if layers:
        return 3 * layers, "counted from the Dense and convolution layers"
    reason = "; ".join(errors + ["its layers cannot be counted (a subclassed model has no layer shapes)"])
    return None, f"FLOPs unknown: {reason}, so MFU is not reported"


def _jax_forward(model, sample) -> float:
    """XLA cost analysis of the forward pass (JAX)."""
    import jax
    import numpy as np

    def abstract(v):
        return jax.ShapeDtypeStruct(tuple(v.shape), v.dtype)

    trainable = [abstract(v) for v in model.trainable_variables]
    non_trainable = [abstract(v) for v in model.non_trainable_variables]
    inputs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype), sample)

    # stateless_call passes keyword arguments straight to call(), which may not take `training`.
    kwargs = {"training": False} if getattr(model, "_call_has_training_arg", True) else {}

    def forward(trainable, non_trainable, x):
        return model.stateless_call(trainable, non_trainable, x, **kwargs)[0]

    cost = jax.jit(forward).lower(trainable, non_trainable, inputs).cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX: one dict per computation
        cost = cost[0] if cost else {}
    return float((cost or {}).get("flops", 0.0))


def _tf_forward(model, sample) -> float:
    """TensorFlow graph float-operation count of the forward pass."""
    import tensorflow as tf
    from tensorflow.python.profiler import option_builder

    specs = tf.nest.map_structure(lambda a: tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)), sample)
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(specs)
    options = option_builder.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    with _quiet_tf():
        info = tf.compat.v1.profiler.profile(graph=concrete.graph, options=options)
    return float(info.total_float_ops)


@contextlib.contextmanager
def _quiet_tf():
    """The v1 profiler logs a deprecation notice; it is not the user's concern."""
    import tensorflow as tf

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def layer_count(model) -> Optional[int]:
    """Forward FLOPs per example from Dense and convolution layers, or None when they cannot be counted.

    Counts the multiply-adds of Dense (2 * inputs * units per position) and
    convolutions (2 * kernel size * input channels * filters per output
    position), nested models included; elementwise layers are left out.
    """
    import keras

    convs = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
    total = 0
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            inner = layer_count(layer)
            if inner is None:
                return None
            total += inner
        elif isinstance(layer, (keras.layers.Dense,) + convs):
            try:
                positions = layer.input.shape[1:-1] if isinstance(layer, keras.layers.Dense) else layer.output.shape[1:-1]
            except (AttributeError, ValueError):
                return None
            total += 2 * _size(layer.kernel.shape) * _size(positions)
    return total or None


def _size(shape) -> int:
    out = 1
    for dim in shape:
        out *= int(dim)
    return out


def _batch_size(sample) -> int:
    import numpy as np

    first = next(iter(sample.values())) if isinstance(sample, dict) else sample
    shape = np.shape(first)
    return int(shape[0]) if shape else 0
