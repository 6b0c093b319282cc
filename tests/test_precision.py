"""Precisions: 'auto' resolved by the runtime, refusals, apply and restore the policy, loss scaling for custom
loops."""

import numpy as np
import pytest

import tpukit
from tpukit import precision
from tpukit.config import ConfigError


def test_resolve_auto_uses_the_runtime_recommendation():
    runtime = tpukit.connect("cpu")
    assert runtime.resolve_precision("auto") == (runtime.precision, runtime.precision_reason)
    assert runtime.resolve_precision("float32")[0] == "float32"
    with pytest.raises(ValueError, match="'fp8'"):
        runtime.resolve_precision("fp8")


def test_mixed_float16_on_tpu_is_refused_fake_tpu():
    """A TPU runtime built by hand (no TPU here): only its kind matters to the check, which the precision owns."""
    from tpukit.hardware.runtime import Runtime

    tpu = Runtime(
        backend="jax",
        kind="tpu",
        devices=("TPU_0",),
        replicas=1,
        strategy=None,
        precision="mixed_bfloat16",
        precision_reason="TPU",
    )
    with pytest.raises(ConfigError, match="use 'mixed_bfloat16'") as refused:
        tpu.resolve_precision("mixed_float16")
    assert refused.value.expected == "'float32' or 'mixed_bfloat16' on a TPU"
    assert precision.get("mixed_float16").refusal("tpu") and precision.get("mixed_float16").refusal("gpu") is None
    assert [p.name for p in precision.PRECISIONS if p.loss_scaled] == ["mixed_float16"]


def test_policy_is_restored_after_the_block_even_on_error():
    import keras

    assert precision.current_policy() == "float32"
    with pytest.raises(RuntimeError):
        with precision.policy("mixed_bfloat16"):
            assert keras.config.dtype_policy().name == "mixed_bfloat16"
            raise RuntimeError("boom")
    assert precision.current_policy() == "float32"
    with pytest.raises(ValueError, match="Unknown dtype policy 'half'"):
        with precision.policy("half"):
            pass


def test_make_optimizer_wraps_for_float16_only():
    import keras

    assert isinstance(precision.make_optimizer("adam", 1e-3, "mixed_float16"), keras.optimizers.LossScaleOptimizer)
    assert not isinstance(precision.make_optimizer("adam", 1e-3, "mixed_bfloat16"), keras.optimizers.LossScaleOptimizer)
    with pytest.raises(ValueError, match="Unknown optimizer 'lamb'"):
        precision.make_optimizer("lamb", 1e-3, "float32")


def test_custom_loop_loss_scaling_recovers_tiny_float16_gradients():
    """A loss whose float16 gradient underflows to zero trains once it is scaled."""
    import keras
    import tensorflow as tf

    with precision.policy("mixed_float16"):
        layer = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
        layer.build((None, 1))
        optimizer = precision.make_optimizer("sgd", 1.0, "mixed_float16")
        x = tf.constant([[1.0]])
        with tf.GradientTape(persistent=True) as tape:
            loss = tf.cast(layer(x), tf.float32)[0, 0] * 1e-8  # gradient 1e-8: below float16's smallest subnormal
            plain = tf.cast(tf.cast(loss, tf.float16), tf.float32)
            scaled = precision.scale_loss(optimizer, loss)
        assert float(tape.gradient(plain, layer.kernel)[0, 0]) == 0.0  # underflow without scaling
        grads = tape.gradient(scaled, [layer.kernel])
        assert float(grads[0][0, 0]) > 0
        before = layer.kernel.numpy().copy()
        optimizer.apply(grads, [layer.kernel])  # unscales, then steps
        step = before - layer.kernel.numpy()
        assert np.allclose(step, 1e-8, rtol=1e-2)
        assert precision.loss_scale(optimizer) > 1
    assert precision.loss_scale(precision.make_optimizer("sgd", 1.0, "float32")) is None
