"""A precision is an object: its dtype policy, its loss scaling, where it is refused and why, and the key its
FLOP/s and XLA figures are filed under.

After Lightning's precision plugins: what differs between float32, mixed_bfloat16 and mixed_float16 lives in one
`Precision` each, and code above asks the object (`get(name).loss_scaled`, `.refusal(kind)`, `.scope()`) instead of
comparing names. A new mode (bfloat16 weights with float32 trainable adapters, say) is one more entry in
`PRECISIONS`. This module also owns Keras' global dtype policy: `Precision.scope()` is the one place tpukit sets
it, and it always puts the previous one back.

Below `config` (which validates `RunConfig.precision` against `CHOICES`): it imports nothing of tpukit but global_state,
and Keras only inside the methods that apply a policy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import Iterator, Optional, Tuple

from tpukit import global_state


@dataclasses.dataclass(frozen=True)
class Precision:
    """One precision mode.

    `name` is both `RunConfig.precision` and Keras' dtype policy; `compute` the dtype layers compute in,
    `variables` the dtype weights are kept in; `key` the device facts' key for its peak FLOP/s and the CPU probe's
    XLA gain (fp32, bf16, fp16); `loss_scaled`: the optimizer is wrapped in Keras' LossScaleOptimizer so small
    gradients do not underflow; `refused`: (accelerator kind, why, and what to use instead) where it cannot run;
    `nan_cause`: what a NaN loss may mean under it, beside a high learning rate.
    """

    name: str
    compute: str
    variables: str
    key: str
    loss_scaled: bool = False
    refused: Tuple[Tuple[str, str], ...] = ()
    nan_cause: str = ""

    def refusal(self, kind: Optional[str]) -> Optional[str]:
        """Why this precision cannot run on accelerator `kind`, naming what to use instead; None where it can."""
        return dict(self.refused).get(kind)

    @contextlib.contextmanager
    def scope(self) -> Iterator["Precision"]:
        """Keras' global dtype policy is this one inside the block; the previous one comes back after."""
        import keras

        previous = keras.config.dtype_policy()
        keras.config.set_dtype_policy(self.name)
        try:
            yield self
        finally:
            keras.config.set_dtype_policy(previous)

    def wrap(self, optimizer):
        """`optimizer`, wrapped in a LossScaleOptimizer where this precision scales the loss (and not already)."""
        import keras

        if self.loss_scaled and not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            return keras.optimizers.LossScaleOptimizer(optimizer)
        return optimizer


PRECISIONS = (
    Precision("float32", compute="float32", variables="float32", key="fp32"),
    Precision(
        "mixed_bfloat16",
        compute="bfloat16",
        variables="float32",
        key="bf16",
        nan_cause="bfloat16's 8-bit mantissa lost the update (if float32 trains at this learning rate)",
    ),
    Precision(
        "mixed_float16",
        compute="float16",
        variables="float32",
        key="fp16",
        loss_scaled=True,
        refused=(("tpu", "use 'mixed_bfloat16' (TPUs compute in bfloat16 natively)"),),
        nan_cause="float16 overflowed above 65504 (if float32 trains at this learning rate, use mixed_bfloat16)",
    ),
)
NAMES = tuple(p.name for p in PRECISIONS)
CHOICES = ("auto",) + NAMES  # RunConfig.precision: "auto" is resolved for the hardware at connect
FLOAT32, MIXED_BFLOAT16, MIXED_FLOAT16 = PRECISIONS
_BY_NAME = {p.name: p for p in PRECISIONS}


def mixed(compute: str) -> Optional[Precision]:
    """The mixed precision that computes in `compute` with float32 weights (None for float32 or another dtype)."""
    return next((p for p in PRECISIONS if p.compute == compute and p.variables != p.compute), None)


def get(name: str) -> Precision:
    """The precision named `name` (a Keras policy name tpukit trains under).

    Raises:
        ValueError: an unknown name (RunConfig has refused it before any run gets here).
    """
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown dtype policy {name!r}. Choices: {', '.join(NAMES)}.") from None


def find(name) -> Optional[Precision]:
    """The precision named `name`, or None (a record written by another version, a user's own policy)."""
    return _BY_NAME.get(name) if isinstance(name, str) else None


def _set_policy(name: Optional[str]) -> None:
    if name is not None and "keras" in sys.modules:
        import keras

        keras.config.set_dtype_policy(name)


# Keras' global dtype policy, as tpukit's state: read only where Keras is loaded (resetting loads no Keras).
global_state.register(
    "dtype_policy", lambda: current_policy() if "keras" in sys.modules else None, _set_policy, lambda: FLOAT32.name
)


def current_policy() -> str:
    """The name of Keras' global dtype policy now."""
    import keras

    return keras.config.dtype_policy().name


def policy(name: str):
    """Keras' global dtype policy is `name` inside the block, the previous one after (`get(name).scope()`)."""
    return get(name).scope()


def make_optimizer(name: str, learning_rate: float, precision: str, accumulation: int = 1):
    """The named Keras optimizer, wrapped in a LossScaleOptimizer where `precision` scales the loss; `accumulation`
    above 1 applies an update every that many steps (Keras' `gradient_accumulation_steps`).

    `fit` would wrap it too; doing it here lets custom loops share the same
    object and makes the loss scaling visible.
    """
    import keras

    classes = {
        "adam": keras.optimizers.Adam,
        "adamw": keras.optimizers.AdamW,
        "sgd": keras.optimizers.SGD,
        "rmsprop": keras.optimizers.RMSprop,
    }
    if name not in classes:
        raise ValueError(f"Unknown optimizer {name!r}. Choices: {', '.join(classes)}.")
    extra = {"gradient_accumulation_steps": accumulation} if accumulation > 1 else {}
    return get(precision).wrap(classes[name](learning_rate=learning_rate, **extra))


def scale_loss(optimizer, loss):
    """For custom training loops: the loss to differentiate.

    Call it inside the GradientTape. Under a LossScaleOptimizer the loss is
    multiplied by the dynamic loss scale, so small float16 gradients do not
    underflow to zero; `optimizer.apply(grads, variables)` then divides the
    gradients by the same scale, skips a step whose gradients hold inf or NaN,
    and adapts the scale. Keras 3 has no get_scaled_loss/get_unscaled_gradients.

    >>> with tf.GradientTape() as tape:
    ...     loss = loss_fn(y, model(x, training=True))
    ...     scaled = scale_loss(optimizer, loss)
    >>> optimizer.apply(tape.gradient(scaled, model.trainable_variables), model.trainable_variables)
    """
    import keras

    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer.scale_loss(loss)
    return loss


def loss_scale(optimizer) -> Optional[float]:
    """The current dynamic loss scale, or None when the optimizer does not scale."""
    import keras

    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        scale = optimizer.dynamic_scale if optimizer.built else optimizer.initial_scale
        return float(keras.ops.convert_to_numpy(scale))
    return None
