# ---
# jupyter:
#   accelerator: TPU
#   colab:
#     gpuType: V5E1
#   jupytext:
#     notebook_metadata_filter: accelerator,colab
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
# **Last modified:** 2026/11/27<br>
# **Description:** Dtype policies, float32 outputs, float16 range vs bfloat16, loss scaling in a custom loop,
# each policy's speed and the cost of padding, measured on the hardware at hand.<br>
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
# Everything here is Keras (`keras.ops` works the same on every backend), on TensorFlow (Colab's CPU and GPU
# runtimes) and on JAX (its TPU runtime); a custom training step is shown both ways.
#
# **You will learn to:**
#
# - read a dtype policy: compute dtype vs variable dtype, and override it for one layer;
# - keep model outputs in float32, and see what goes wrong when you do not;
# - see float16 overflow (above 65504) and underflow (below about 6e-8), and why bfloat16 has neither problem;
# - scale the loss in a custom training loop, and watch a step with inf gradients get skipped;
# - measure each policy's speed here, on a model sized to the device, starting every run from the same initial
#   weights;
# - after class (the extra at the end): know what a TPU pads (batch to multiples of 8, features to multiples of
#   128) and measure what padding costs.

# %% [markdown]
# ## Setup

# %%
# The same first cell in every tpukit notebook: install tpukit where it is missing, pick the Keras backend.
import glob
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("tpukit") is None:  # Colab: add tpukit only; the runtime's TF, JAX and Keras stay
    shared = sorted(glob.glob("tpukit-*.whl"))  # a wheel your instructor shared, uploaded to the Files pane
    source = shared[-1] if shared else "tpukit @ git+https://github.com/tpukit/tpukit"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], check=True)

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

# %% tags=["jax"]
import contextlib
import time
import warnings

import keras
import ml_dtypes
import numpy as np
from keras import ops

import tpukit
from tpukit import models
from tpukit.teaching import SOLUTIONS, answered, check, measured_until
from tpukit import precision

import jax

runtime = tpukit.connect()
print(runtime.describe())


def on_float16_device():
    """Where the float16 demos run: here, except on a TPU, which has no float16 math (they run on its host CPU)."""
    if runtime.kind != "tpu":
        return contextlib.nullcontext()
    return jax.default_device(jax.devices("cpu")[0])

# %% tags=["tf"]
import contextlib
import time
import warnings

import keras
import ml_dtypes
import numpy as np
from keras import ops

import tpukit
from tpukit import models
from tpukit.teaching import SOLUTIONS, answered, check, measured_until
from tpukit import precision

import tensorflow as tf

runtime = tpukit.connect()
print(runtime.describe())


def on_float16_device():
    """Where the float16 demos run: here, except on a TPU, which has no float16 math (they run on its host CPU)."""
    if runtime.kind != "tpu":
        return contextlib.nullcontext()
    return tf.device("/CPU:0")

# %% [markdown]
# ## Policies: compute dtype and variable dtype
#
# A policy names two dtypes. Layers *compute* in the compute dtype and *store* their weights in the variable
# dtype. Keeping variables in float32 matters: a tiny update such as `1.0 + 1e-4` is lost in 16 bits.
#
# Keras 3's API is one global policy, `keras.config.set_dtype_policy(...)` (Keras 3 still exports the older names
# too: `keras.mixed_precision.set_dtype_policy` and `keras.mixed_precision.set_global_policy`, the call of
# TensorFlow 2.4 to 2.15's `tf.keras`).
# Every layer built while it is set takes it; a layer built with `dtype="float32"` keeps float32. Each layer tells
# you what it got: `dtype_policy`, `compute_dtype`, `variable_dtype`.

# %%
keras.config.set_dtype_policy("mixed_bfloat16")
print("global policy:", keras.mixed_precision.dtype_policy().name)
dense = keras.layers.Dense(4)
kept_float32 = keras.layers.Dense(4, dtype="float32")
inputs = np.ones((2, 3), "float32")
for layer in (dense, kept_float32):
    outputs = keras.backend.standardize_dtype(layer(inputs).dtype)
    print(f"{layer.dtype_policy.name:>15}: compute {layer.compute_dtype}, variables {layer.variable_dtype}, "
          f"kernel {layer.kernel.dtype}, outputs {outputs}")
keras.config.set_dtype_policy("float32")  # put it back: the policy is global and would reach every later layer

# %% [markdown]
# That last line is easy to forget. tpukit's `precision.policy(name)` sets the policy for a block and puts the
# previous one back, so one experiment never leaks into the next:

# %%
for name in precision.NAMES:
    with precision.policy(name):
        policy = keras.config.dtype_policy()
        print(f"{name:>15}: compute {policy.compute_dtype:>8}, variables {policy.variable_dtype}")
print("global policy after the blocks:", precision.current_policy())

# %% [markdown]
# ## Float32 outputs: done wrong, done right
#
# A softmax in float16 is numerically unsafe: any probability below about 6e-8 becomes exactly 0, and the
# cross-entropy of a confident wrong answer, `-log(0)`, is infinite. Two logits 20 apart are enough. (A TPU has no
# float16 math, so there every float16 demo of this notebook runs on the TPU VM's CPU: `on_float16_device()`.)

# %%
logits = np.array([[0.0, 20.0]], "float32")
with on_float16_device():
    for dtype in ("float16", "float32"):
        p = ops.softmax(ops.cast(logits, dtype))
        print(f"{dtype}: p(class 0) = {float(p[0, 0]):.3g}, -log p = {float(-ops.log(p[0, 0])):.3g}")

# %% [markdown]
# So keep the last layer in float32: split the `Dense` from the softmax and give the `Activation` layer
# `dtype="float32"`. For a model without a softmax, a linear float32 `Activation` at the end does the cast
# (or build the last `Dense` with `dtype="float32"`).

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
for name in precision.NAMES:
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

values = ops.convert_to_tensor([65504.0, 70000.0, 1e-4, 1e-8, 1 + 1 / 512], "float32")
with on_float16_device():
    for dtype in ("float16", "bfloat16", "float32"):
        cast = ops.convert_to_numpy(ops.cast(values, dtype)).astype(np.float64)
        print(f"{dtype:>9}:", np.array2string(cast, precision=6))

# %% [markdown]
# ### Exercise 1: where float16 ends
#
# Casting rounds to the nearest float16, ties to the even one. Near the top, float16's values are 32 apart
# (65472, 65504), and the next step up, 65536, is already too large: it is infinity. **Set `FIRST_INF`** to the
# smallest whole number that float16 rounds to infinity. The self-check casts it, and the number below it.

# %% tags=["exercise"]
FIRST_INF = ...  # YOUR ANSWER: a whole number

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["FIRST_INF = 65504", "FIRST_INF = 65505", "FIRST_INF = 65536", "FIRST_INF = 70000"]
# @title Solution
if SOLUTIONS:
    FIRST_INF = 65520  # halfway between 65504 and 65536: the tie goes to the "even" 65536, which is infinity

# %% tags=["self-check"]
# Self-check: cast your number and the one below it to float16 (and to bfloat16)
answered(FIRST_INF, "65504 is the largest float16; a value rounds up once it is past halfway to the next step")
with on_float16_device():
    as_16, below_16, as_bf16 = (float(ops.cast(ops.convert_to_tensor([float(v)], "float32"), d)[0])
                                for v, d in ((FIRST_INF, "float16"), (FIRST_INF - 1, "float16"),
                                             (FIRST_INF, "bfloat16")))
print(f"float16({FIRST_INF}) = {as_16}, float16({FIRST_INF - 1}) = {below_16}, bfloat16({FIRST_INF}) = {as_bf16:g}")
check(float(FIRST_INF).is_integer(), "a whole number, please")
check(np.isinf(as_16), f"float16 still holds {FIRST_INF} (as {as_16}): go higher")
check(np.isfinite(below_16), f"{FIRST_INF - 1} becomes infinity too: there is a smaller one")
print("Exercise 1: correct. bfloat16 keeps it (with 8 significant bits): float32's range.")

# %% [markdown]
# ## Loss scaling in a custom loop
#
# Gradients are often tiny. In float16, one of 1e-9 underflows to 0 and that weight stops learning. Loss scaling
# multiplies the loss by a large factor before the backward pass, so every gradient is multiplied by it too and
# stays representable; the optimizer divides it back out in float32 before applying it.

# %%
SCALE = 2.0**15
with on_float16_device():
    print("1e-9 in float16:", float(ops.cast(1e-9, "float16")),
          "| scaled by 2^15:", float(ops.cast(1e-9 * SCALE, "float16")) / SCALE)

# %% [markdown]
# `fit` does all of this by itself: compile a model under `mixed_float16` and Keras wraps its optimizer in a
# `keras.optimizers.LossScaleOptimizer`. In a custom loop you wrap it yourself, differentiate the scaled loss
# (`optimizer.scale_loss(loss)`), and let `optimizer.apply` unscale. The scale is dynamic: a step whose
# gradients hold inf or NaN is skipped and the scale halves; after `dynamic_growth_steps` good steps (2000 by
# default, 3 here so it shows) the scale doubles. Step 4 feeds an outlier batch whose scaled gradients overflow.
#
# The step itself is framework code. TensorFlow records the forward pass on a `tf.GradientTape` and
# `optimizer.apply` unscales and applies. JAX differentiates a pure function: `jax.value_and_grad` of the
# model's `stateless_call`, then `optimizer.stateless_apply`, and the new values are assigned back. On the TPU
# runtime the whole loop runs on the CPU (`on_float16_device()`): a TPU trains in bfloat16, which needs no scaling.

# %% tags=["jax"]
with on_float16_device():
    keras.utils.set_random_seed(0)
    with precision.policy("mixed_float16"):
        net = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1),
                                keras.layers.Activation("linear", dtype="float32")])
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01), dynamic_growth_steps=3)
    optimizer.build(net.trainable_variables)
xs = np.random.default_rng(5).standard_normal((32, 8)).astype("float32")
ys = 0.1 * xs.sum(axis=1, keepdims=True)


def scaled_loss(trainable, x, y):
    outputs, _ = net.stateless_call(trainable, [v.value for v in net.non_trainable_variables], x)
    loss = ops.mean((outputs - y) ** 2)
    return optimizer.scale_loss(loss), loss


def train_step(x, y):
    trainable = [v.value for v in net.trainable_variables]
    (_, loss), grads = jax.value_and_grad(scaled_loss, has_aux=True)(trainable, x, y)
    trainable, state = optimizer.stateless_apply([v.value for v in optimizer.variables], grads, trainable)
    for variable, value in zip(net.trainable_variables + optimizer.variables, trainable + state):
        variable.assign(value)
    return loss, grads


with on_float16_device():
    for step in range(8):
        targets = ys * 1e4 if step == 4 else ys  # an outlier batch
        before = [ops.convert_to_numpy(w) for w in net.trainable_weights]
        scale = float(optimizer.dynamic_scale)
        loss, grads = train_step(xs, targets)
        finite = all(np.isfinite(ops.convert_to_numpy(g)).all() for g in grads)
        moved = any(not np.array_equal(b, ops.convert_to_numpy(w)) for b, w in zip(before, net.trainable_weights))
        print(f"step {step}: loss {float(loss):10.4g}, scale {scale:>7.0f} -> {float(optimizer.dynamic_scale):>7.0f}, "
              f"grads finite {finite!s:>5}, weights updated {moved!s:>5}, iterations {int(optimizer.iterations)}")

# %% tags=["tf"]
with on_float16_device():
    keras.utils.set_random_seed(0)
    with precision.policy("mixed_float16"):
        net = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1),
                                keras.layers.Activation("linear", dtype="float32")])
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01), dynamic_growth_steps=3)
    optimizer.build(net.trainable_variables)
xs = np.random.default_rng(5).standard_normal((32, 8)).astype("float32")
ys = 0.1 * xs.sum(axis=1, keepdims=True)


def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = ops.mean((net(x) - y) ** 2)
        scaled = optimizer.scale_loss(loss)
    grads = tape.gradient(scaled, net.trainable_variables)
    optimizer.apply(grads, net.trainable_variables)  # unscales; skips the step if a gradient is inf or NaN
    return loss, grads


with on_float16_device():
    for step in range(8):
        targets = ys * 1e4 if step == 4 else ys  # an outlier batch
        before = [ops.convert_to_numpy(w) for w in net.trainable_weights]
        scale = float(optimizer.dynamic_scale)
        loss, grads = train_step(xs, targets)
        finite = all(np.isfinite(ops.convert_to_numpy(g)).all() for g in grads)
        moved = any(not np.array_equal(b, ops.convert_to_numpy(w)) for b, w in zip(before, net.trainable_weights))
        print(f"step {step}: loss {float(loss):10.4g}, scale {scale:>7.0f} -> {float(optimizer.dynamic_scale):>7.0f}, "
              f"grads finite {finite!s:>5}, weights updated {moved!s:>5}, iterations {int(optimizer.iterations)}")

# %% [markdown]
# `compile` does the wrapping for a model built under `mixed_float16`, as the first line below shows. tpukit names
# the same steps: `precision.make_optimizer("sgd", 0.01, "mixed_float16")` returns the wrapped
# optimizer (a plain one under the other policies), `precision.scale_loss(optimizer, loss)` scales only when the
# optimizer is a `LossScaleOptimizer` (so one loop serves every policy), and `precision.loss_scale(optimizer)`
# reads the current scale, or None.

# %%
with precision.policy("mixed_float16"):
    compiled = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
compiled.compile(optimizer="sgd", loss="mse")  # a model built under mixed_float16: Keras wraps its optimizer
print("compile wrapped it:", type(compiled.optimizer).__name__)
for name in precision.NAMES:
    opt = precision.make_optimizer("sgd", 0.01, name)
    print(f"{name:>15}: {type(opt).__name__:>18}, loss scale {precision.loss_scale(opt)}, "
          f"scaled loss of 1.0: {float(precision.scale_loss(opt, 1.0))}")

# %% [markdown]
# ## Each policy's speed, measured here
#
# 16-bit math pays only when the matrix units are busy: a small model spends its step on overheads, and every
# policy then looks the same. So, as TensorFlow's mixed-precision guide does, size the model to the device: two
# `Dense` layers of **4096 units** and a batch of 8192 on a GPU or a TPU, a small model on a CPU. The inputs are
# random MNIST-sized rows (784 features, 10 classes): only the speed counts here. Each policy runs 24 steps (a
# warm-up epoch of 4, then 5 timed epochs of 4): under a minute in all on a T4 or a v5e-1.
#
# To compare policies fairly, every model starts from **the same initial weights**: build once, keep
# `get_weights()`, and `set_weights` them into each policy's model (variables are float32 under every policy, so
# the weights fit). Then a warm-up epoch traces and compiles the step, and the timed epochs run the same batches.
# On a TPU `mixed_float16` is left out: the MXU computes in bfloat16.

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
    with precision.policy(name), runtime.strategy.scope():  # fit inside too: on JAX, fit reads the distribution
        model = speed_model()
        model.set_weights(initial)
        model.compile(optimizer=precision.make_optimizer("adam", 1e-3, name), loss="sparse_categorical_crossentropy")
        model.fit(x_speed, y_speed, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)  # warm-up: compiling
        start = time.perf_counter()
        history = model.fit(x_speed, y_speed, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)
    return 1000 * (time.perf_counter() - start) / (4 * EPOCHS), history.history["loss"][-1]


policies = [p.name for p in precision.PRECISIONS if not p.refusal(runtime.kind)]  # mixed_float16: not on a TPU
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
# tpukit's `RunConfig(precision="auto")` (the default) picks the policy for you: `mixed_bfloat16` on a TPU,
# `mixed_float16` on a Tensor-Core GPU, and on a CPU what a quick timing favours. It refuses `mixed_float16` on a
# TPU, wraps the optimizer, and puts the global policy back after the run. What it picked here, and why:

# %%
chosen, why = runtime.resolve_precision("auto")
print(f'precision="auto" here: {chosen}, because {why}')
try:
    tpukit.RunConfig(accelerator="tpu", precision="mixed_float16")
except tpukit.ConfigError as error:
    print("ConfigError:", error)

# %% [markdown]
# ### Exercise 2: how much faster is bfloat16 here? Measure it
#
# A step is not only matmuls: activations, normalization and the optimizer's updates read and write every value
# once, and their speed is the memory's. bfloat16 halves the bytes. A TPU and a GPU load 16-bit values natively;
# XLA on a CPU converts each one to float32 and back, even on CPUs whose matrix units run bfloat16 matmuls fast
# (the figure `describe()` printed above is for matmuls and conv gradients). **Measure `BF16_SPEEDUP`**, float32's
# time divided by bfloat16's, for the jitted elementwise chain below over `SIZE` values (16M; 64M on an
# accelerator): compile it once for each dtype (a first call), then time the two in turns, 15 pairs, and take the
# median of the pairs' ratios (a slow moment of a shared machine then falls on both). Above 1, bfloat16 is faster.
# Read a result back (`float(...)`) inside each timing, or you time only the dispatch. The self-check measures the
# same chain with its own code and accepts your figure within a factor of 1.5 (measuring up to 3 times, since a
# shared machine can be busy while one of you measures).

# %% tags=["exercise", "jax"]
def chain(v):
    return ops.max(ops.relu(v * 1.5 - 0.5) * 0.9)


jitted_chain = jax.jit(chain)
SIZE = 1 << (26 if runtime.kind in ("tpu", "gpu") else 24)
BF16_SPEEDUP = ...  # YOUR MEASUREMENT: float32's median time / bfloat16's, for jitted_chain over SIZE values

# %% tags=["exercise", "tf"]
def chain(v):
    return ops.max(ops.relu(v * 1.5 - 0.5) * 0.9)


jitted_chain = tf.function(chain, jit_compile=True)
SIZE = 1 << (26 if runtime.kind in ("tpu", "gpu") else 24)
BF16_SPEEDUP = ...  # YOUR MEASUREMENT: float32's median time / bfloat16's, for jitted_chain over SIZE values

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["BF16_SPEEDUP = 4.0", "BF16_SPEEDUP = 'faster'"]
# @title Solution
if SOLUTIONS:
    def seconds(fn, value):
        start = time.perf_counter()
        float(fn(value))  # a result read back: the work is done when the clock stops
        return time.perf_counter() - start

    v32 = keras.random.normal((SIZE,), dtype="float32", seed=0)
    v16 = keras.random.normal((SIZE,), dtype="bfloat16", seed=0)
    seconds(jitted_chain, v32), seconds(jitted_chain, v16)  # the first calls compile
    BF16_SPEEDUP = float(np.median([seconds(jitted_chain, v32) / seconds(jitted_chain, v16) for _ in range(15)]))

# %% tags=["self-check", "jax"]
# Self-check: time a jitted elementwise chain in float32 and in bfloat16 on this device, with its own code
answered(BF16_SPEEDUP, "time jitted_chain on a float32 and on a bfloat16 array of SIZE values, and divide")
check(isinstance(BF16_SPEEDUP, (int, float)) and not isinstance(BF16_SPEEDUP, bool) and BF16_SPEEDUP > 0,
      "the answer is a number: float32's time divided by bfloat16's")


def _chain(v):
    return ops.max(ops.relu(v * 1.5 - 0.5) * 0.9)


_jitted = jax.jit(_chain)
values = {dtype: keras.random.normal((SIZE,), dtype=dtype, seed=0) for dtype in ("float32", "bfloat16")}
for v in values.values():
    float(_jitted(v))  # compile


def _speedup():
    tries = {"float32": [], "bfloat16": []}
    for i in range(15):
        for dtype in ("float32", "bfloat16") if i % 2 else ("bfloat16", "float32"):  # in turns, alternating
            start = time.perf_counter()
            float(_jitted(values[dtype]))
            tries[dtype].append(1000 * (time.perf_counter() - start))
    return tries, float(np.median(np.array(tries["float32"]) / np.array(tries["bfloat16"])))


# A shared machine (Colab's too) can be busy while you measure and calm while this does: up to 3 measurements, and
# yours is right if it is within 1.5x of one of them.
tries, speedup = measured_until(_speedup, lambda measured: 1 / 1.5 <= BF16_SPEEDUP / measured[1] <= 1.5)
print(f"{runtime.kind}: float32 {np.median(tries['float32']):.2f} ms, bfloat16 {np.median(tries['bfloat16']):.2f} "
      f"ms: bfloat16 runs at {speedup:.2f}x float32's speed (yours: {BF16_SPEEDUP:.2f}x)")
check(1 / 1.5 <= BF16_SPEEDUP / speedup <= 1.5, f"measured here: bfloat16 at {speedup:.2f}x float32's speed, "
      f"yours {BF16_SPEEDUP:.2f}x; did you divide float32's time by bfloat16's, and read each result back?")
print("Exercise 2: correct.")

# %% tags=["self-check", "tf"]
# Self-check: time a jitted elementwise chain in float32 and in bfloat16 on this device, with its own code
answered(BF16_SPEEDUP, "time jitted_chain on a float32 and on a bfloat16 array of SIZE values, and divide")
check(isinstance(BF16_SPEEDUP, (int, float)) and not isinstance(BF16_SPEEDUP, bool) and BF16_SPEEDUP > 0,
      "the answer is a number: float32's time divided by bfloat16's")


def _chain(v):
    return ops.max(ops.relu(v * 1.5 - 0.5) * 0.9)


_jitted = tf.function(_chain, jit_compile=True)
values = {dtype: keras.random.normal((SIZE,), dtype=dtype, seed=0) for dtype in ("float32", "bfloat16")}
for v in values.values():
    float(_jitted(v))  # compile


def _speedup():
    tries = {"float32": [], "bfloat16": []}
    for i in range(15):
        for dtype in ("float32", "bfloat16") if i % 2 else ("bfloat16", "float32"):  # in turns, alternating
            start = time.perf_counter()
            float(_jitted(values[dtype]))
            tries[dtype].append(1000 * (time.perf_counter() - start))
    return tries, float(np.median(np.array(tries["float32"]) / np.array(tries["bfloat16"])))


# A shared machine (Colab's too) can be busy while you measure and calm while this does: up to 3 measurements, and
# yours is right if it is within 1.5x of one of them.
tries, speedup = measured_until(_speedup, lambda measured: 1 / 1.5 <= BF16_SPEEDUP / measured[1] <= 1.5)
print(f"{runtime.kind}: float32 {np.median(tries['float32']):.2f} ms, bfloat16 {np.median(tries['bfloat16']):.2f} "
      f"ms: bfloat16 runs at {speedup:.2f}x float32's speed (yours: {BF16_SPEEDUP:.2f}x)")
check(1 / 1.5 <= BF16_SPEEDUP / speedup <= 1.5, f"measured here: bfloat16 at {speedup:.2f}x float32's speed, "
      f"yours {BF16_SPEEDUP:.2f}x; did you divide float32's time by bfloat16's, and read each result back?")
print("Exercise 2: correct.")

# %% [markdown]
# ## GPUs: compute capability, `nvidia-smi`, TF32
#
# On a GPU runtime, check which GPU you got (`!nvidia-smi -L` in Colab). float16 needs compute capability 7.0
# or higher (T4 7.5, L4 8.9, A100 8.0; all of Colab's GPUs qualify). On older GPUs (P100, K80) Keras 3 gives no
# warning: `mixed_float16` runs, but without Tensor Cores it brings no speed-up (often a slow-down), so tpukit's
# "auto" stays float32 there and `describe()` says why. Ampere and newer GPUs also run float32 matmuls in
# **TensorFloat-32** (10-bit mantissa) by default, so float32 is already fast and the gain from mixed precision
# shrinks; `tpukit.set_tf32(False)` turns TF32 off for exact float32 (it returns the previous setting). JAX's knob
# is the default matmul precision: `jax.default_matmul_precision("highest")` asks for full float32 (on a TPU, where
# the default computes float32 matmuls in bfloat16 passes, too).

# %% tags=["jax"]
import shutil
import subprocess

for fact in runtime.device_facts[:1]:
    print(fact.get("name"), "| compute capability:", fact.get("compute_capability", "n/a (not a GPU)"))
if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout)
with jax.default_matmul_precision("highest"):  # only inside the block
    print("inside the block:", jax.config.jax_default_matmul_precision)
print("after it:", jax.config.jax_default_matmul_precision, "(None: the platform's default)")

# %% tags=["tf"]
import shutil
import subprocess

for fact in runtime.device_facts[:1]:
    print(fact.get("name"), "| compute capability:", fact.get("compute_capability", "n/a (not a GPU)"))
if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout)
previous = tpukit.set_tf32(False)
now = tf.config.experimental.tensor_float_32_execution_enabled()
tpukit.set_tf32(previous)  # put it back
print("TF32 was", "on" if previous else "off", "| after set_tf32(False):", "on" if now else "off")

# %% [markdown]
# ## What you should see
#
# - Policies: `mixed_*` computes in 16 bits and keeps float32 variables; the `dtype="float32"` layer stays
#   float32 under `mixed_bfloat16`; the global policy is float32 again after each block.
# - The float16 softmax gives `p = 0` and `-log p = inf`; float32 gives about 2e-9 and 20.
# - 70000 becomes `inf` and 1e-8 becomes 0 in float16; bfloat16 keeps both (roughly) and loses `1 + 1/512`.
# - Loss scaling: the scale doubles every 3 good steps; at step 4 the gradients are not finite, the weights do
#   not move, `iterations` does not advance and the scale halves.
# - Speed on this hardware. On a CPU the full model's policies come out close, or bfloat16 ahead where the CPU
#   has bfloat16 matrix instructions (AMX, AVX512-BF16), and float16 many times slower (CPUs have no fast float16
#   math). On a T4 GPU the 4096-unit model runs several times faster under `mixed_float16`; on a TPU
#   `mixed_bfloat16` wins. At smoke size (64 units) the figures are noise.
# - Exercise 2: `BF16_SPEEDUP` about 2 on a TPU or a GPU, and well under 1 on a CPU (an AMD EPYC with
#   AVX512-BF16: 0.13x to 0.4x under XLA).
# - Exercise 4 (the extra at the end): `PADDING_RATIO` about 0.4 to 0.5 on a CPU (measured on an AMD EPYC, with TensorFlow and with JAX);
#   about 1 on a TPU, where 136 features are padded to 256.
#
# ## On a TPU, a GPU or the CPU
#
# - **TPU**: use `mixed_bfloat16` (tpukit refuses `mixed_float16` there); no loss scaling is needed, since
#   bfloat16 has float32's range. Per-replica batch in multiples of 8, features in multiples of 128; XLA always
#   compiles the step.
# - **GPU**: `mixed_float16` on compute capability 7.0 or higher, with loss scaling (automatic in `fit`).
#   Multiples of 8; on Ampere and newer mind TF32.
# - **CPU**: mixed precision is for learning the mechanics; measure before you use it. CPUs with AMX or
#   AVX512-BF16 can run bfloat16 matmuls faster, but not always its conv gradients (an AMD EPYC ran them 10x
#   slower than float32); float16 is emulated and slow. tpukit's run notes say what it measured and chose.

# %% [markdown]
# ## Extra: the largest safe loss scale
#
# For after class: it practises "Loss scaling in a custom loop".

# %% [markdown]
# ### Exercise 3: the largest safe scale
#
# A scale should be as large as it can be, to lift the smallest gradients, yet leave the largest ones finite.
# **Set `MY_SCALE`** to the largest power of two that keeps a gradient of 1.0 finite in float16 once scaled. The
# self-check casts `1.0 x MY_SCALE` and `1.0 x 2 x MY_SCALE` to float16.

# %% tags=["exercise"]
MY_SCALE = ...  # YOUR ANSWER: a power of two, written like 2.0**3

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["MY_SCALE = 2.0**16", "MY_SCALE = 2.0**14", "MY_SCALE = 65504.0", "MY_SCALE = 2.0**8"]
# @title Solution
if SOLUTIONS:
    MY_SCALE = 2.0**15  # 32768 fits under 65504; 2^16 = 65536 does not. Keras' dynamic scale starts there too.

# %% tags=["self-check"]
# Self-check: a gradient of 1.0, scaled, in float16
answered(MY_SCALE, "float16's largest value is 65504: which powers of two lie below it?")
check(MY_SCALE > 0 and float(np.log2(MY_SCALE)).is_integer(), f"{MY_SCALE} is not a power of two")
with on_float16_device():
    scaled, doubled = (float(ops.cast(ops.convert_to_tensor([s], "float32"), "float16")[0])
                       for s in (MY_SCALE, 2 * MY_SCALE))
print(f"1.0 x {MY_SCALE:g} in float16: {scaled}; with twice the scale: {doubled}")
check(np.isfinite(scaled), "a gradient of 1.0 overflows at that scale: go lower")
check(np.isinf(doubled), "twice that scale still fits: go higher")
print("Exercise 3: correct. It is the scale keras.optimizers.LossScaleOptimizer starts from (initial_scale):",
      keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()).initial_scale)

# %% [markdown]
# ## Extra: padding to multiples of 8 and 128
#
# *Not part of the workshop day: for after class. In class, notebook 00 says what a TPU pads (`padding_advice`) and
# notebook 05 (TPU track) measures it; here is the measurement on any device.*
#
# A TPU stores every array in tiles: XLA pads one of the two minor dimensions of a tensor to a multiple of 8 and
# the other to a multiple of 128, the layout chosen by heuristics (Cloud TPU performance guide, "Consequences of
# tiling", cloud.google.com/tpu/docs/performance-guide). For a `Dense` layer's `[batch, features]` the batch
# usually goes on the 8 side and the features on the 128 side. The matrix units (MXUs) match: a v5e has 4 MXUs of
# 128x128 per TensorCore, 197 bfloat16 TFLOP/s per chip (cloud.google.com/tpu/docs/v5e); a v6e (Trillium) has 2
# of 256x256, 918 TFLOP/s (cloud.google.com/tpu/docs/v6e). Colab's TPU runtime is one v5e or one v6e chip.
#
# So on a TPU: a per-replica batch that is a multiple of **8**, and feature sizes (units, filters) that are
# multiples of **128**. A larger batch, in multiples of 128, fills the MXU better, but that is throughput, not
# padding. A GPU pads nothing, but its Tensor Core kernels for 16-bit math run fastest on multiples of **8**. With
# 16-bit types each activation takes half the memory, so the batch can usually double as well. `RunConfig` checks the per-replica batch and warns:

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tpukit.RunConfig(accelerator="tpu", batch_size=100)
for warning in caught:
    print(warning.category.__name__, ":", warning.message)

# %% [markdown]
# ### Exercise 4: what does padding cost here? Measure it
#
# One jitted `Dense`-like matmul, `[rows, K] x [K, K]` (a layer of K units on K features), in bfloat16 on a TPU,
# float16 on a GPU, float32 on a CPU. Where features are padded to multiples of 128, a layer of 136 units is
# stored and multiplied as one of 256, so it takes about as long; elsewhere its time follows its own size: 136/256
# of the bytes, (136/256)^2 of the multiplications. **Measure `PADDING_RATIO`**, the time at K=136 divided by the
# time at K=256, on this device: compile each shape once, then time them in turns (136, 256, 136, 256, ...) so
# that a slow moment of a shared machine falls on both, 21 pairs, and take the median of the pairs' ratios. The
# self-check measures K = 100, 128, 136, 200 and 256 with its own code and accepts your ratio within 0.2 of its
# own.

# %% tags=["exercise"]
def dense_like(x, w):
    return ops.max(ops.matmul(x, w))  # max: one number back, and XLA cannot skip the product


ROWS = 1 << 20 if runtime.kind in ("tpu", "gpu") else 4096
DTYPE = {"tpu": "bfloat16", "gpu": "float16"}.get(runtime.kind, "float32")
PADDING_RATIO = ...  # YOUR MEASUREMENT: time of [ROWS, 136] x [136, 136] / time of [ROWS, 256] x [256, 256]

# %% tags=["solution", "jax"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["PADDING_RATIO = 1.0", "PADDING_RATIO = 'same'"]
# @title Solution
if SOLUTIONS:
    def timed(k):
        x = keras.random.normal((ROWS, k), dtype=DTYPE, seed=0)
        w = keras.random.normal((k, k), dtype=DTYPE, seed=1)
        fn = jax.jit(dense_like)
        float(fn(x, w))  # the first call compiles

        def once():
            start = time.perf_counter()
            float(fn(x, w))
            return time.perf_counter() - start
        return once

    t136, t256 = timed(136), timed(256)
    PADDING_RATIO = float(np.median([t136() / t256() for _ in range(21)]))

# %% tags=["solution", "tf"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["PADDING_RATIO = 1.0", "PADDING_RATIO = 'same'"]
# @title Solution
if SOLUTIONS:
    def timed(k):
        x = keras.random.normal((ROWS, k), dtype=DTYPE, seed=0)
        w = keras.random.normal((k, k), dtype=DTYPE, seed=1)
        fn = tf.function(dense_like, jit_compile=True)
        float(fn(x, w))  # the first call compiles

        def once():
            start = time.perf_counter()
            float(fn(x, w))
            return time.perf_counter() - start
        return once

    t136, t256 = timed(136), timed(256)
    PADDING_RATIO = float(np.median([t136() / t256() for _ in range(21)]))

# %% tags=["self-check", "jax"]
# Self-check: time [rows, K] x [K, K] on this device, K=136 against K=256 in pairs, with its own code
answered(PADDING_RATIO, "time the matmul at K=136 and at K=256 in turns, and take the median of the ratios")
check(isinstance(PADDING_RATIO, (int, float)) and not isinstance(PADDING_RATIO, bool) and PADDING_RATIO > 0,
      "the answer is a number: K=136's time divided by K=256's")


def _dense_like(x, w):
    return ops.max(ops.matmul(x, w))


KS = (100, 128, 136, 200, 256)
args = {k: (keras.random.normal((ROWS, k), dtype=DTYPE, seed=0), keras.random.normal((k, k), dtype=DTYPE, seed=1))
        for k in KS}
jitted = {k: jax.jit(_dense_like) for k in KS}  # one per K
for k in KS:
    float(jitted[k](*args[k]))  # compile each shape once


def _ratio():
    tries = {k: [] for k in KS}
    for i in range(21):
        for k in KS if i % 2 else KS[::-1]:  # alternate the order, so a slow moment falls on every K alike
            start = time.perf_counter()
            float(jitted[k](*args[k]))
            tries[k].append(1000 * (time.perf_counter() - start))
    return tries, float(np.median(np.array(tries[136]) / np.array(tries[256])))


# Up to 3 measurements (a shared machine can be busy while you measure and calm while this does), and yours is
# right if it is within 0.2 of one of them: about 0.5 (not padded) and about 1 (padded) stay apart.
tries, ratio = measured_until(_ratio, lambda measured: abs(PADDING_RATIO - measured[1]) <= 0.2)
print(f"{runtime.kind}, {ROWS} rows, {DTYPE}: " + ", ".join(f"K={k}: {np.median(t):.2f} ms" for k, t in tries.items()))
print(f"time(136) / time(256) = {ratio:.2f} (yours: {PADDING_RATIO:.2f}); padded to 256, it would be about 1")
check(abs(PADDING_RATIO - ratio) <= 0.2, f"measured here: K=136 takes {ratio:.2f} of K=256's time, yours "
      f"{PADDING_RATIO:.2f}; did you read each result back, and divide 136's time by 256's?")
print("Exercise 4: correct.")

# %% tags=["self-check", "tf"]
# Self-check: time [rows, K] x [K, K] on this device, K=136 against K=256 in pairs, with its own code
answered(PADDING_RATIO, "time the matmul at K=136 and at K=256 in turns, and take the median of the ratios")
check(isinstance(PADDING_RATIO, (int, float)) and not isinstance(PADDING_RATIO, bool) and PADDING_RATIO > 0,
      "the answer is a number: K=136's time divided by K=256's")


def _dense_like(x, w):
    return ops.max(ops.matmul(x, w))


KS = (100, 128, 136, 200, 256)
args = {k: (keras.random.normal((ROWS, k), dtype=DTYPE, seed=0), keras.random.normal((k, k), dtype=DTYPE, seed=1))
        for k in KS}
jitted = {k: tf.function(_dense_like, jit_compile=True) for k in KS}  # one per K
for k in KS:
    float(jitted[k](*args[k]))  # compile each shape once


def _ratio():
    tries = {k: [] for k in KS}
    for i in range(21):
        for k in KS if i % 2 else KS[::-1]:  # alternate the order, so a slow moment falls on every K alike
            start = time.perf_counter()
            float(jitted[k](*args[k]))
            tries[k].append(1000 * (time.perf_counter() - start))
    return tries, float(np.median(np.array(tries[136]) / np.array(tries[256])))


# Up to 3 measurements (a shared machine can be busy while you measure and calm while this does), and yours is
# right if it is within 0.2 of one of them: about 0.5 (not padded) and about 1 (padded) stay apart.
tries, ratio = measured_until(_ratio, lambda measured: abs(PADDING_RATIO - measured[1]) <= 0.2)
print(f"{runtime.kind}, {ROWS} rows, {DTYPE}: " + ", ".join(f"K={k}: {np.median(t):.2f} ms" for k, t in tries.items()))
print(f"time(136) / time(256) = {ratio:.2f} (yours: {PADDING_RATIO:.2f}); padded to 256, it would be about 1")
check(abs(PADDING_RATIO - ratio) <= 0.2, f"measured here: K=136 takes {ratio:.2f} of K=256's time, yours "
      f"{PADDING_RATIO:.2f}; did you read each result back, and divide 136's time by 256's?")
print("Exercise 4: correct.")
