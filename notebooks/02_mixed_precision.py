# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Mixed precision: 16-bit compute, float32 where it matters
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/24<br>
# **Description:** Dtype policies, float32 outputs, float16 range vs bfloat16, loss scaling in a custom loop, and
# each policy's speed measured on the hardware at hand.<br>
# **Accelerator:** TPU (bfloat16), GPU (float16) or CPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/02_mixed_precision.ipynb)

# %% [markdown]
# ## Introduction
#
# Mixed precision computes in a 16-bit type and keeps the variables in float32. 16-bit math is faster on hardware
# built for it and moves half the bytes: the TensorFlow guide reports more than 3x on modern GPUs and more than
# 60% on TPUs. NVIDIA GPUs need compute capability 7.0 or higher (Tensor Cores) to gain from float16; every Cloud
# TPU computes in bfloat16; on a CPU mixed precision runs, but usually slower (this notebook measures it).
#
# Everything here is Keras (`keras.ops` works the same on every backend), so it runs where Keras runs on
# TensorFlow (Colab's CPU and GPU runtimes) and where it runs on JAX (Colab's TPU runtime, which has no
# TensorFlow). The one step that differs, a custom training step, is shown both ways.
#
# **You will learn to:**
#
# - read a dtype policy: compute dtype vs variable dtype, and override it for one layer;
# - keep model outputs in float32, and see what goes wrong when you do not;
# - see float16 overflow (above 65504) and underflow (below about 6e-8), and why bfloat16 has neither problem;
# - scale the loss in a custom training loop, and watch a step with inf gradients get skipped;
# - measure each policy's speed here, on a model sized to the device, starting every run from the same initial
#   weights;
# - pick sizes that are multiples of 8 (GPU) and 128 (TPU).

# %% [markdown]
# ## Setup

# %%
# The same first cell in every tpukit notebook: install tpukit where it is missing, pick the Keras backend.
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("tpukit") is None:  # Colab: add tpukit only; the runtime's TF, JAX and Keras stay
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "tpukit @ git+https://github.com/tpukit/tpukit"], check=True)

# Keras reads KERAS_BACKEND once, on its first import, so the backend is chosen here, before anything imports it.
if os.environ.get("KERAS_BACKEND"):
    why = "KERAS_BACKEND was already set"
elif importlib.util.find_spec("tensorflow") is not None:
    os.environ["KERAS_BACKEND"] = "tensorflow"
    why = "TensorFlow is installed (Colab's CPU and GPU runtimes)"
else:
    os.environ["KERAS_BACKEND"] = "jax"
    why = "no TensorFlow here (Colab's TPU runtime: JAX and Keras 3)"
print(f"Keras backend: {os.environ['KERAS_BACKEND']}, because {why}.")

SMOKE = os.environ.get("TPUKIT_SMOKE") == "1"  # the tests set TPUKIT_SMOKE=1: every size shrinks to seconds

# %%
import os
import time
import warnings

import keras
import ml_dtypes
import numpy as np
from keras import ops

import tpukit
from tpukit import config as tkconfig
from tpukit import models
from tpukit.training import precision

TF = keras.backend.backend() == "tensorflow"  # False on Colab's TPU runtime, where Keras runs on JAX
if TF:
    import tensorflow as tf
else:
    import jax

runtime = tpukit.connect()
print(runtime.describe())

# The exercises leave `...` for you to fill in. Each has a hidden solution cell that runs only with
# TPUKIT_SOLUTIONS=1 (the tests set it), so the self-checks test your answer, not ours.
SOLUTIONS = os.environ.get("TPUKIT_SOLUTIONS") == "1"


def answered(value, hint):
    """The start of every self-check: an answer still `...` fails here, with a hint."""
    assert value is not ..., f"Not answered yet: replace the `...` in the cell above. Hint: {hint}"
    return value


# %% [markdown]
# tpukit's precision "auto" is what `describe()` recommends: `mixed_bfloat16` on a TPU, `mixed_float16` on a
# Tensor-Core GPU, and on a CPU whatever a quick float32-vs-bfloat16 measurement of matmuls and conv gradients favours.

# %% [markdown]
# ## Policies: compute dtype and variable dtype
#
# A policy names two dtypes. Layers *compute* in the compute dtype and *store* their weights in the variable
# dtype. Keeping variables in float32 matters: a tiny update such as `1.0 + 1e-4` is lost in 16 bits.

# %%
for name in precision.POLICIES:
    policy = keras.DTypePolicy(name)
    print(f"{name:>15}: compute {policy.compute_dtype:>8}, variables {policy.variable_dtype}")

# %% [markdown]
# The global policy applies to every layer built while it is set (`keras.config.set_dtype_policy`, stable since
# TF 2.4). `tpukit.training.precision.policy(...)` sets it for a block and puts the previous one back, so one experiment
# never leaks into the next. A layer built with `dtype="float32"` keeps float32 whatever the global policy.

# %%
with precision.policy("mixed_bfloat16"):
    dense = keras.layers.Dense(4)
    kept_float32 = keras.layers.Dense(4, dtype="float32")
    inputs = np.ones((2, 3), "float32")
    for layer in (dense, kept_float32):
        outputs = keras.backend.standardize_dtype(layer(inputs).dtype)
        print(f"{layer.dtype_policy.name:>15}: kernel {layer.kernel.dtype}, outputs {outputs}")
print("global policy after the block:", precision.current_policy())

# %% [markdown]
# ## Float32 outputs: done wrong, done right
#
# A softmax in float16 is numerically unsafe: any probability below about 6e-8 becomes exactly 0, and the
# cross-entropy of a confident wrong answer, `-log(0)`, is infinite. Two logits 20 apart are enough:

# %%
logits = np.array([[0.0, 20.0]], "float32")
for dtype in ("float16", "float32"):
    p = ops.softmax(ops.cast(logits, dtype))
    print(f"{dtype}: p(class 0) = {float(p[0, 0]):.3g}, -log p = {float(-ops.log(p[0, 0])):.3g}")

# %% [markdown]
# So keep the last layer in float32: split the `Dense` from the softmax and give the `Activation` layer
# `dtype="float32"`. For a model without a softmax, a linear float32 `Activation` at the end does the cast.

# %%
with precision.policy("mixed_float16"):
    inputs = keras.Input((16,))
    hidden = keras.layers.Dense(32, activation="relu")(inputs)
    wrong = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(hidden))
    logits_16 = keras.layers.Dense(10)(hidden)
    right = keras.Model(inputs, keras.layers.Activation("softmax", dtype="float32")(logits_16))
    regression = keras.Model(inputs, keras.layers.Activation("linear", dtype="float32")(hidden))
print("softmax inside Dense:", wrong.output.dtype, "| float32 Activation:", right.output.dtype,
      "| linear float32 Activation:", regression.output.dtype)

# %% [markdown]
# Every model in tpukit's zoo ends this way, so the outputs and the loss stay float32 under every policy:

# %%
for name in precision.POLICIES:
    with precision.policy(name):
        model = models.build("mlp", input_shape=(8, 8, 1), num_classes=10)
    print(f"{name:>15}: logits computed in {model.get_layer('logits').compute_dtype}, outputs {model.output.dtype}")

# %% [markdown]
# ## float16 overflow and underflow, vs bfloat16
#
# float16 spends 5 bits on the exponent: its largest value is 65504 and its smallest (subnormal) one about 6e-8.
# bfloat16 keeps float32's 8 exponent bits, so it has float32's range, and pays with precision: 8 significant
# bits instead of 11, so `1 + 1/512` rounds to 1.

# %%
print(f"{'':>9} {'max':>10} {'smallest normal':>16} {'smallest':>10} {'epsilon':>9}")
for dtype in (np.float16, ml_dtypes.bfloat16, np.float32):
    info = ml_dtypes.finfo(dtype)
    print(f"{info.dtype.name:>9} {float(info.max):10.3g} {float(info.tiny):16.3g} "
          f"{float(info.smallest_subnormal):10.3g} {float(info.eps):9.3g}")

values = np.array([65504.0, 70000.0, 1e-4, 1e-8, 1 + 1 / 512], "float32")
for dtype in ("float16", "bfloat16", "float32"):
    cast = ops.convert_to_numpy(ops.cast(values, dtype)).astype(np.float64)
    print(f"{dtype:>9}:", np.array2string(cast, precision=6))

# %% [markdown]
# ### Exercise 1: a value float16 cannot hold
#
# **Set `VALUE`** to a number that float16 rounds to infinity while bfloat16 keeps it finite (and within 1% of
# the truth). The table above has what you need.

# %% tags=["exercise"]
VALUE = ...  # YOUR ANSWER: a number

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    VALUE = 1e5  # above float16's max (65504), far below bfloat16's (about 3.4e38)

# %% tags=["self-check"]
# Self-check
answered(VALUE, "float16's largest value is 65504; bfloat16's is about 3.4e38")
as_16, as_bf16 = (float(ops.convert_to_numpy(ops.cast([VALUE], d))[0]) for d in ("float16", "bfloat16"))
assert np.isinf(as_16), f"float16 still holds {VALUE} (as {as_16})"
assert np.isfinite(as_bf16) and abs(as_bf16 - VALUE) <= 0.01 * abs(VALUE), as_bf16
print(f"Exercise 1: correct: float16 -> {as_16}, bfloat16 -> {as_bf16:.6g}")

# %% [markdown]
# ## Loss scaling in a custom loop
#
# Gradients are often tiny. In float16, one of 1e-9 underflows to 0 and that weight stops learning. Loss scaling
# multiplies the loss by a large factor before the backward pass, so every gradient is multiplied by it too and
# stays representable; the optimizer divides it back out in float32 before applying it.

# %%
SCALE = 2.0**15
print("1e-9 in float16:", float(ops.cast(1e-9, "float16")),
      "| scaled by 2^15:", float(ops.cast(1e-9 * SCALE, "float16")) / SCALE)

# %% [markdown]
# `fit` does all of this by itself under `mixed_float16`. In a custom loop: wrap the optimizer in a
# `LossScaleOptimizer` (tpukit's `precision.make_optimizer(..., "mixed_float16")` does), differentiate the
# scaled loss (`optimizer.scale_loss(loss)`; `precision.scale_loss` also passes a plain optimizer through), and
# let the optimizer unscale. The scale is dynamic: a step whose gradients hold inf or NaN is skipped and the
# scale halves; after `dynamic_growth_steps` good steps (2000 by default, 3 here so it shows) the scale
# doubles. Step 4 feeds an outlier batch whose scaled gradients overflow.
#
# The step itself is framework code. TensorFlow records the forward pass on a `tf.GradientTape` and
# `optimizer.apply` unscales and applies. JAX differentiates a pure function: `jax.value_and_grad` of the
# model's `stateless_call`, then `optimizer.stateless_apply`, and the new values are assigned back.

# %%
keras.utils.set_random_seed(0)
with precision.policy("mixed_float16"):
    net = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1),
                            keras.layers.Activation("linear", dtype="float32")])
optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01), dynamic_growth_steps=3)
optimizer.build(net.trainable_variables)
xs = np.random.default_rng(5).standard_normal((32, 8)).astype("float32")
ys = 0.1 * xs.sum(axis=1, keepdims=True)

if TF:
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = ops.mean((net(x) - y) ** 2)
            scaled = precision.scale_loss(optimizer, loss)
        grads = tape.gradient(scaled, net.trainable_variables)
        optimizer.apply(grads, net.trainable_variables)  # unscales; skips the step if a gradient is inf or NaN
        return loss, grads
else:
    def scaled_loss(trainable, x, y):
        outputs, _ = net.stateless_call(trainable, [v.value for v in net.non_trainable_variables], x)
        loss = ops.mean((outputs - y) ** 2)
        return precision.scale_loss(optimizer, loss), loss

    def train_step(x, y):
        trainable = [v.value for v in net.trainable_variables]
        (_, loss), grads = jax.value_and_grad(scaled_loss, has_aux=True)(trainable, x, y)
        trainable, state = optimizer.stateless_apply([v.value for v in optimizer.variables], grads, trainable)
        for variable, value in zip(net.trainable_variables + optimizer.variables, trainable + state):
            variable.assign(value)
        return loss, grads

for step in range(8):
    targets = ys * 1e4 if step == 4 else ys  # an outlier batch
    before = [ops.convert_to_numpy(w) for w in net.trainable_weights]
    scale = precision.loss_scale(optimizer)
    loss, grads = train_step(xs, targets)
    finite = all(np.isfinite(ops.convert_to_numpy(g)).all() for g in grads)
    moved = any(not np.array_equal(b, ops.convert_to_numpy(w)) for b, w in zip(before, net.trainable_weights))
    print(f"step {step}: loss {float(loss):10.4g}, scale {scale:>7.0f} -> {precision.loss_scale(optimizer):>7.0f}, "
          f"grads finite {finite!s:>5}, weights updated {moved!s:>5}, iterations {int(optimizer.iterations)}")

# %% [markdown]
# ### Exercise 2: a loss scale that works
#
# **Set `MY_SCALE`.** A good scale lifts a 1e-9 gradient out of float16's underflow, yet keeps a large
# gradient of 0.1 below float16's maximum. The self-check tests both ends.

# %% tags=["exercise"]
MY_SCALE = ...  # YOUR ANSWER: a power of two, written like 2.0**3

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    MY_SCALE = 2.0**15  # 1e-9 x 2^15 = 3.3e-5 is representable; 0.1 x 2^15 = 3277 is far below 65504

# %% tags=["self-check"]
# Self-check
answered(MY_SCALE, "float16 holds about 6e-8 to 65504: 1e-9 x scale must be above 6e-8, 0.1 x scale below 65504")
assert float(ops.cast(1e-9 * MY_SCALE, "float16")) > 0, "1e-9 still underflows: scale up"
assert np.isfinite(float(ops.cast(0.1 * MY_SCALE, "float16"))), "0.1 overflows: scale down"
print("Exercise 2: correct: any scale from 2^5 to 2^19 works; dynamic scaling finds one for you.")

# %% [markdown]
# ## Each policy's speed, measured here
#
# 16-bit math pays only when the matrix units are busy: a small model spends its step on overheads, and every
# policy then looks the same. So, as TensorFlow's mixed-precision guide does, size the model to the device: two
# `Dense` layers of **4096 units** and a batch of 8192 on a GPU or a TPU, a small model on a CPU (whose
# float16 math is emulated and slow). The inputs are random MNIST-sized rows (784 features, 10 classes): only
# the speed counts here.
#
# To compare policies fairly, every model starts from **the same initial weights**: build once, keep
# `get_weights()`, and `set_weights` them into each policy's model (variables are float32 under every policy, so
# the weights fit). Then a warm-up epoch traces and compiles the step, and the timed epochs run the same batches.

# %%
ACCELERATOR = runtime.kind in ("gpu", "tpu")
UNITS, BATCH = (4096, 8192) if ACCELERATOR else (256, 256)
if SMOKE:
    UNITS, BATCH = 64, 64
EPOCHS = 1 if SMOKE else 5  # 4 steps each
rng = np.random.default_rng(0)
x_speed = rng.random((4 * BATCH, 784), dtype=np.float32)
y_speed = rng.integers(0, 10, len(x_speed))


def speed_model():
    inputs = keras.Input((784,))
    hidden = keras.layers.Dense(UNITS, activation="relu")(inputs)
    hidden = keras.layers.Dense(UNITS, activation="relu")(hidden)
    logits = keras.layers.Dense(10)(hidden)
    return keras.Model(inputs, keras.layers.Activation("softmax", dtype="float32")(logits))


keras.utils.set_random_seed(0)
initial = speed_model().get_weights()


def time_policy(name):
    """Milliseconds per training step and the final loss under policy `name`, from the shared initial weights."""
    with precision.policy(name), runtime.strategy.scope():
        model = speed_model()
        model.set_weights(initial)
        model.compile(optimizer=precision.make_optimizer("adam", 1e-3, name), loss="sparse_categorical_crossentropy")
    model.fit(x_speed, y_speed, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)  # warm-up: tracing, compiling
    start = time.perf_counter()
    history = model.fit(x_speed, y_speed, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)
    return 1000 * (time.perf_counter() - start) / (4 * EPOCHS), history.history["loss"][-1]


policies = [p for p in precision.POLICIES if not (p == "mixed_float16" and runtime.kind == "tpu")]
timings = {name: time_policy(name) for name in policies}
for name, (ms, loss) in timings.items():
    print(f"{name:>15}: {ms:8.2f} ms/step ({timings['float32'][0] / ms:5.2f}x float32), loss {loss:.4f}")

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 1.8))
ax.barh(list(timings), [ms for ms, _ in timings.values()])
ax.set_xscale("log")
ax.set_xlabel(f"ms per step (2 x Dense {UNITS}, batch {BATCH}, {runtime.kind.upper()}), log scale")
plt.show()

# %% [markdown]
# ## Multiples of 8 and 128
#
# Tensor Cores work on tiles of 8, so on a GPU keep batch sizes, `Dense` units and conv filters multiples of 8.
# A TPU's matrix unit is 128x128. XLA pads one dimension of a matrix to a multiple of 8 and the other to a
# multiple of 128, and which one gets 128 depends on the layout it picks, so the rule that is safe either way,
# and the one tpukit applies, is multiples of 128 on a TPU (per-replica batch, units, filters). With 16-bit types
# each activation takes half the memory, so the batch size can usually double as well. `RunConfig` checks the
# per-replica batch and warns with the waste; `padding_advice` gives the same advice for each kind:

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tpukit.RunConfig(accelerator="tpu", batch_size=100)
print(caught[0].category.__name__, ":", caught[0].message)
for kind in ("tpu", "gpu"):
    print(f"{kind}: {tkconfig.padding_advice(100, kind)}")

print(f"{'size':>6} {'GPU waste':>10} {'TPU waste':>10}")
for size in (100, 128, 200, 256, 1000, 1024):
    print(f"{size:>6} {tkconfig.padding_waste(size, 8):9.1f}% {tkconfig.padding_waste(size, 128):9.1f}%")

# %% [markdown]
# ### Exercise 3: predict the padding, then measure it
#
# A per-replica batch of **320** on a TPU: what percentage of each padded batch is padding? **Predict it** by
# hand (padded size, then the share that is padding), write it in `PREDICTED_WASTE`, and let the self-check
# measure it with `padding_waste` and `padding_advice`.

# %% tags=["exercise"]
PREDICTED_WASTE = ...  # YOUR PREDICTION: percent of the padded batch, e.g. 12.5

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    PREDICTED_WASTE = 100 * (384 - 320) / 384  # 320 pads up to 3 x 128 = 384: 64 of 384 rows are padding

# %% tags=["self-check"]
# Self-check: your prediction against the measured figure
answered(PREDICTED_WASTE, "round 320 up to a multiple of 128, then divide the padding by the padded size")
measured = tkconfig.padding_waste(320, 128)
print(f"predicted {PREDICTED_WASTE:.1f}%, measured {measured:.1f}%")
print(tkconfig.padding_advice(320, "tpu"))
assert abs(PREDICTED_WASTE - measured) < 0.5, (
    "not quite: the waste is a share of the padded size (not of 320), in percent")
print("Exercise 3: correct.")

# %% [markdown]
# ### Exercise 4: a hidden layer that fills the tiles
#
# You want a hidden layer of about 300 units. **Set `UNITS`** to a size within 100 of 300 that wastes
# nothing on a GPU or a TPU. (XLA, which notebook 05 looks at, is what pads; on a TPU it is always on.)

# %% tags=["exercise"]
UNITS = ...  # YOUR ANSWER: a number of units

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    UNITS = 256  # 2 x 128 (384 = 3 x 128 works too)

# %% tags=["self-check"]
# Self-check
answered(UNITS, "a multiple of 128 is a multiple of 8 too")
assert tkconfig.padding_waste(UNITS, 8) == 0 and tkconfig.padding_waste(UNITS, 128) == 0, UNITS
assert abs(UNITS - 300) <= 100, f"{UNITS} is far from the 300 units you wanted"
print("Exercise 4: correct.")

# %% [markdown]
# ## GPUs: compute capability, `nvidia-smi`, TF32
#
# On a GPU runtime, check which GPU you got (`!nvidia-smi -L` in Colab). float16 needs compute capability 7.0
# or higher (T4 7.5, V100 7.0, A100 8.0). On older GPUs (P100, K80) Keras 3.15 gives no warning: `mixed_float16`
# runs, but without Tensor Cores it brings no speed-up (often a slow-down), so tpukit's "auto" stays float32
# there and `describe()` says why. Ampere and newer GPUs also run float32 matmuls in **TensorFloat-32**
# (10-bit mantissa) by default, so float32 is already fast and the gain from mixed precision shrinks;
# `tpukit.set_tf32(False)` turns TF32 off for exact float32 (it returns the previous setting). JAX's knob is the
# default matmul precision: `jax.default_matmul_precision("highest")` asks for full float32 (on a TPU, where the
# default computes float32 matmuls in bfloat16 passes, too).

# %%
import shutil
import subprocess

for fact in runtime.device_facts[:1]:
    print(fact.get("name"), "| compute capability:", fact.get("compute_capability", "n/a (not a GPU)"))
if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout)
if TF:
    previous = tpukit.set_tf32(False)
    now = tf.config.experimental.tensor_float_32_execution_enabled()
    tpukit.set_tf32(previous)  # put it back
    print("TF32 was", "on" if previous else "off", "| after set_tf32(False):", "on" if now else "off")
else:
    with jax.default_matmul_precision("highest"):  # only inside the block
        print("inside the block:", jax.config.jax_default_matmul_precision)
    print("after it:", jax.config.jax_default_matmul_precision, "(None: the platform's default)")

# %% [markdown]
# ## What you should see
#
# - Policies: `mixed_*` computes in 16 bits and keeps float32 variables; the `dtype="float32"` layer stays
#   float32 inside the mixed block; the global policy is float32 again after it.
# - The float16 softmax gives `p = 0` and `-log p = inf`; float32 gives about 2e-9 and 20.
# - 70000 becomes `inf` and 1e-8 becomes 0 in float16; bfloat16 keeps both (roughly) and loses `1 + 1/512`.
# - Loss scaling: the scale doubles every 3 good steps; at step 4 the gradients are not finite, the weights do
#   not move, `iterations` does not advance and the scale halves.
# - Speed on this hardware. On a CPU: bfloat16 about as fast as float32, or faster where the CPU has bfloat16
#   matrix instructions (AMX, AVX512-BF16), and float16 many times slower (CPUs have no fast float16 math). On a
#   T4 GPU the 4096-unit model runs several times faster under `mixed_float16`; on a TPU `mixed_bfloat16` wins.
#   At smoke size (64 units) the figures are noise.
#
# ## On a TPU, a GPU or the CPU
#
# - **TPU**: use `mixed_bfloat16` (tpukit refuses `mixed_float16` there); no loss scaling is needed, since
#   bfloat16 has float32's range. Multiples of 128 matter; XLA always compiles the step.
# - **GPU**: `mixed_float16` on compute capability 7.0 or higher, with loss scaling (automatic in `fit`).
#   Multiples of 8; on Ampere and newer mind TF32.
# - **CPU**: mixed precision is for learning the mechanics; measure before you use it. CPUs with AMX or
#   AVX512-BF16 can run bfloat16 matmuls faster, but not always its conv gradients (an AMD EPYC ran them 10x
#   slower than float32); float16 is emulated and slow. On TensorFlow, a tpukit run under mixed precision on the
#   CPU compiles a step of 10 ms or more with XLA where the CPU probe measured XLA faster than TensorFlow's own
#   kernels for that 16-bit type (a CPU that emulates bfloat16: the zoo CNN 9.5x faster), and keeps Keras' own
#   kernels where they are faster (AVX512-BF16); the run's notes say which, and what was measured.
