"""The memory a training step takes, estimated before compiling: against XLA's own figure, and what it advises.

The XLA check lowers real training steps (KerasHub's Gemma, Llama and GPT-2 backbones, LoRA, bfloat16 weights) in a JAX process,
since this one runs Keras on TensorFlow; the rest builds a tiny Gemma here and reads the estimate's terms.
"""

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import REPO
from tpukit.models import memory, source

pytest.importorskip("keras_hub")

# (family, vocabulary, layers, hidden, heads, head_dim, intermediate, batch, sequence): Gemma where the activations,
# the logits and the weights are each the biggest term; Llama 3's layout (also Qwen's: grouped-query attention, a
# gated feed-forward as wide as intermediate_dim, where Gemma's is half) and GPT-2's (num_heads, no gate).
SIZES = [
    ["gemma", 2048, 6, 256, 4, 64, 1024, 4, 256],
    ["gemma", 16384, 2, 256, 4, 64, 1024, 4, 256],
    ["gemma", 8192, 4, 1024, 8, 128, 4096, 1, 64],
    ["gemma", 8192, 4, 1024, 8, 128, 4096, 1, 64, "int8"],  # QLoRA: the projections' kernels in int8
    ["gemma", 8192, 4, 1024, 8, 128, 4096, 1, 64, "int4"],  # and in int4, two to a byte
    ["llama", 2048, 6, 256, 4, 64, 512, 4, 256],
    ["gpt2", 2048, 6, 256, 4, 64, 1024, 4, 256],
]


@pytest.mark.slow
def test_the_estimate_is_within_25_percent_of_xlas_figure_for_three_sizes_two_quantized_bases_and_three_layouts():
    pytest.importorskip("jax")
    from hub_support import MEMORY

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax"}
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY, json.dumps(SIZES)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == len(SIZES)
    for row in rows:
        assert 0.75 <= row["estimate"] / row["xla"] <= 1.25, row
    biggest = [max(range(3), key=row["terms"].__getitem__) for row in rows]
    assert biggest == [1, 2, 0, 0, 0, 1, 1], rows  # activations, logits, weights: each size tests its own term
    assert rows[3]["terms"][0] < 0.9 * rows[2]["terms"][0], rows  # int8 kernels where bfloat16 ones were
    assert rows[4]["terms"][0] < rows[3]["terms"][0], rows  # int4's, even with the float32 copies this CPU makes


def _shape(model):
    from tpukit.models import pretrained

    return pretrained.Preset("tiny").shape(model)


def _tiny_gemma(vocabulary=512, layers=2, lora=4):
    import keras
    import keras_hub

    backbone = keras_hub.models.GemmaBackbone(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_query_heads=4,
        num_key_value_heads=1,
        hidden_dim=32,
        intermediate_dim=64,
        head_dim=8,
        dtype="bfloat16",
    )
    model = keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)
    if lora:
        backbone.enable_lora(lora)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    return model


def test_the_terms_come_from_the_weights_the_optimizer_and_the_logits_at_the_vocabulary_size():
    model = _tiny_gemma()
    found = memory.estimate(model, _shape(model), batch_size=4, sequence_length=16)
    frozen = sum(math.prod(w.shape) * 2 for w in model.non_trainable_weights)
    trainable = sum(math.prod(w.shape) * 4 for w in model.trainable_weights)  # LoRA adapters stay float32
    assert found.weights == frozen + trainable and found.gradients == trainable
    assert found.optimizer == 2 * trainable  # Adam's two slots
    assert found.logits == (3 * 4 + 2) * 4 * 16 * 512  # batch x sequence x vocabulary, float32 copies and one bf16
    assert memory.estimate(model, _shape(model), batch_size=4, sequence_length=16, optimizer="sgd").optimizer == 0
    assert (
        memory.estimate(model, _shape(model), batch_size=4, sequence_length=16, accumulation=4).optimizer
        == 3 * trainable
    )
    remat = memory.estimate(model, _shape(model), batch_size=4, sequence_length=16, remat=True)
    assert remat.activations < found.activations and remat.remat and "remat on" in remat.note()
    # on the CPU XLA computes bfloat16 in float32: a float32 copy of each bfloat16 weight
    upcast = memory.estimate(model, _shape(model), batch_size=4, sequence_length=16, upcast=True)
    assert upcast.weights == found.weights + 2 * frozen
    assert upcast.note().endswith(", 16-bit math computed in float32 on this CPU)")  # why the figure grows at Connect
    assert "float32" not in found.note()


def test_a_model_that_is_not_a_kerashub_transformer_gets_no_estimate():
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    shape = source.Factory(lambda: model, "dense").shape(model)  # a kind of model with no widths to give
    assert shape is None and memory.estimate(model, shape, batch_size=8, sequence_length=16) is None


def test_the_note_says_whether_it_fits_and_which_setting_makes_it_fit():
    model = _tiny_gemma(vocabulary=4096, layers=4)
    settings = dict(batch_size=16, sequence_length=256, optimizer="adam")
    found = memory.estimate(model, _shape(model), **settings)
    assert memory.verdict(found, None, None).endswith("; no device limit here (the CPU trains in host memory)")
    roomy = memory.estimate(model, _shape(model), **settings, device=4 * found.total)
    assert (
        memory.verdict(roomy, None, None).endswith(": fits")
        and f" of {4 * found.total / 2**30:.3g} GiB (" in roomy.note()
    )
    # a device the step fits only with remat on
    with_remat = memory.estimate(model, _shape(model), **settings, remat=True)
    device = int(with_remat.total / memory.HEADROOM) + 1
    fix, fixed = memory.advice(model, _shape(model), **settings, device=device)
    assert fix == "remat=True" and fixed.total == with_remat.total
    line = memory.verdict(memory.estimate(model, _shape(model), **settings, device=device), fix, fixed)
    assert ": does not fit; remat=True brings it to about" in line and "\n" not in line
    # smaller still: a smaller batch, with accumulation making up the examples per update
    device = (
        int(
            memory.estimate(model, _shape(model), **{**settings, "batch_size": 4}, remat=True, accumulation=4).total
            / memory.HEADROOM
        )
        + 1
    )
    fix, _ = memory.advice(model, _shape(model), **settings, device=device)
    assert fix == "remat=True, batch_size=4 and gradient_accumulation=4 (the same examples per update)"
    assert memory.advice(model, _shape(model), **settings, device=1000) == (None, None)  # nothing fits 1000 bytes


def test_out_of_memory_is_told_from_xlas_and_tensorflows_errors():
    import tensorflow as tf
    from jax.errors import JaxRuntimeError

    assert memory.out_of_memory(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"))
    assert memory.out_of_memory(JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17.16G."))
    assert not memory.out_of_memory(ValueError("shapes (3,) and (4,) do not match"))
    line = memory.out_of_memory_message(
        JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory\nbuffers ..."), "remat=True brings it to about 9.3 GiB"
    )
    assert line == (
        "the device ran out of memory: remat=True brings it to about 9.3 GiB (JaxRuntimeError: "
        "RESOURCE_EXHAUSTED: Out of memory)"
    )


def test_the_device_memory_a_runtime_knows():
    from tpukit.hardware.runtime import Runtime

    def runtime(kind, **facts):
        return Runtime(
            backend="jax", kind=kind, devices=("d",), replicas=1, strategy=None, device_facts=(facts,) if facts else ()
        )

    assert runtime("tpu", name="TPU v5 lite", tpu_type="TPU v5e").device_memory == 16 * 2**30
    assert runtime("tpu", name="TPU v6e").device_memory == 32 * 2**30  # TensorFlow's TPU path names the type
    assert runtime("gpu", name="Tesla T4", memory_mib=15360).device_memory == 15360 * 2**20
    assert runtime("cpu", name="cpu").device_memory is None and runtime("cpu").upcasts
    assert runtime("tpu", name="TPU v9").device_memory is None and not runtime("tpu").upcasts


def test_a_jax_gpu_reports_the_memory_jax_may_allocate():
    import jax

    from tpukit.hardware.jax_devices import _memory_mib

    class Device:  # what jax_devices reads of a GPU device: its memory stats
        def __init__(self, stats):
            self.stats = stats

        def memory_stats(self):
            if isinstance(self.stats, Exception):
                raise self.stats
            return self.stats

    assert _memory_mib(Device({"bytes_limit": 80 * 2**30, "bytes_in_use": 0})) == 80 * 1024
    assert _memory_mib(Device(None)) is None and _memory_mib(Device(RuntimeError("no stats"))) is None
    assert _memory_mib(jax.devices("cpu")[0]) is None  # the CPU has none


def test_auto_remat_turns_on_only_where_the_step_does_not_fit_the_device():
    from tpukit.config import RunConfig
    from tpukit.hardware.runtime import Runtime

    model = _tiny_gemma(layers=8)  # 8 layers of attention scores at 4,096 tokens: 40 GiB without remat, 5.3 with
    v5e = Runtime(
        backend="jax",
        kind="tpu",
        devices=("d",),
        replicas=1,
        strategy=None,
        device_facts=({"name": "TPU v5 lite", "tpu_type": "TPU v5e"},),
    )
    cpu = Runtime(backend="jax", kind="cpu", devices=("d",), replicas=1, strategy=None)
    config = RunConfig(batch_size=8, sequence_length=4096)
    remat, line, fix = memory.decide(model, _shape(model), config, v5e)
    assert remat and fix is None
    assert (
        line.startswith("memory: about ")
        and " of 16 GiB (" in line
        and "remat on): fits; remat=auto turned remat on, since the step does not fit without it" in line
    ), line
    remat, line, fix = memory.decide(model, _shape(model), config.replace(remat=False), v5e)
    assert not remat and ": does not fit; remat=True brings it to about " in line and fix.startswith("remat=True")
    remat, line, _ = memory.decide(model, _shape(model), config, cpu)  # no device limit: auto changes nothing
    assert not remat and line.endswith("no device limit here (the CPU trains in host memory)")
    assert memory.decide(model, _shape(model), config.replace(sequence_length=128), v5e)[0] is False  # fits as it is
