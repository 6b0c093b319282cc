"""A quantized base read back as floats: what export merges the adapters into, for every mode Keras quantizes to."""

import numpy as np
import pytest

from tpukit.models import lora

# (equation or None for a Dense, input shape without the batch, EinsumDense's output shape without the batch)
LAYERS = [
    (None, (12,), None),
    ("btd,dnh->btnh", (3, 12), (3, 4, 5)),  # a query projection
    ("btnh,nhd->btd", (3, 4, 5), (3, 12)),  # an attention output
]


def _model(equation, shape, output, mode):
    import keras

    keras.utils.set_random_seed(1)
    if equation is None:
        layer = keras.layers.Dense(10, bias_initializer="random_normal", dtype="bfloat16")
    else:
        layer = keras.layers.EinsumDense(equation, output, bias_axes=equation[-1], dtype="bfloat16")
    model = keras.Sequential([keras.Input(shape), layer])
    before = np.asarray(layer.kernel.numpy(), "float32")
    layer.quantize(mode)
    layer.enable_lora(2, a_initializer="ones")  # adapters on: they are not part of the kernel read back
    layer.lora_kernel_b.assign(np.ones(layer.lora_kernel_b.shape))
    return model, layer, before


@pytest.mark.parametrize("mode", ["int8", "int4"])
@pytest.mark.parametrize("equation, shape, output", LAYERS)
def test_a_quantized_kernel_reads_back_as_the_float_kernel_up_to_its_rounding(
    equation, shape, output, mode, monkeypatch
):
    monkeypatch.setattr(lora, "_IDENTITY_ROWS", 7)  # the identity's rows in uneven blocks, as a wide layer reads them
    model, layer, before = _model(equation, shape, output, mode)
    (path, value), *more = lora.float_kernels(model).items()
    assert not more and path == layer._kernel.path and value.shape == before.shape and value.dtype == np.float32
    # int8 rounds each weight to 1/127 of its output's largest, int4 to 1/7 of its output's or its group's, and
    # Keras keeps the scale in bfloat16 (8 bits of mantissa)
    largest = np.abs(before).max()
    bound = 0.5 * largest / (127 if mode == "int8" else 7) + largest * 2**-8
    assert np.abs(value - before).max() <= bound, (np.abs(value - before).max(), bound)
    assert np.abs(value - before).max() > 0  # it is the quantized kernel, not a kept float copy
    # and the layer computes with it: its output (adapters off) is the input times that kernel, plus its bias, up to
    # the int8 rounding of its inputs
    x = np.random.default_rng(0).normal(size=(4, *shape)).astype("float32")
    layer.lora_enabled = False
    got = np.asarray(model(x), "float32") - np.asarray(model(np.zeros_like(x)), "float32")
    layer.lora_enabled = True
    equation = equation or "bi,io->bo"
    want = np.einsum(equation, x, value)
    assert np.abs(got - want).max() <= 0.03 * np.abs(want).max(), np.abs(got - want).max()


def test_an_int8_kernel_reads_back_exactly_as_its_values_over_their_scale():
    model, layer, _ = _model(None, (12,), None, "int8")
    want = np.asarray(layer._kernel.numpy(), "float32") / np.asarray(layer.kernel_scale.numpy(), "float32")
    np.testing.assert_allclose(lora.float_kernels(model)[layer._kernel.path], want, rtol=1e-6, atol=0)
