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
# # Determinism: same config, same weights, and what it costs
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/27<br>
# **Description:** Seeds, op determinism, weight fingerprints, and the price of determinism measured here.<br>
# **Accelerator:** GPU (where it matters most), TPU or CPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/03_determinism.ipynb)

# %% [markdown]
# ## Introduction
#
# Two runs of the same code can end with different weights for two reasons: randomness that was not seeded
# (initial weights, shuffling, dropout), and ops that add floating-point numbers in a different order each time
# (mostly on GPUs). Seeds fix the first; **op determinism** fixes the second, at a price.
#
# **You will learn to:**
#
# - seed Python, NumPy, TensorFlow and Keras with one call, `keras.utils.set_random_seed`, and see that it fixes
#   the initial weights (and every random draw after it);
# - see why the order of additions changes the last bits of a result;
# - make the ops deterministic: `tf.config.experimental.enable_op_determinism()` on TensorFlow (and its history,
#   `TF_DETERMINISTIC_OPS=1`), XLA's `--xla_gpu_deterministic_ops=true` for JAX on a GPU; and measure the cost;
# - train twice with plain Keras and compare the weights bit for bit; then let tpukit's `deterministic` setting
#   do the same, and compare runs by the **fingerprint** of their weights;
# - know what "determinism off" can and cannot mean in a running kernel.

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
import os
import time

import numpy as np

# JAX on a GPU: XLA reads this flag once, when JAX starts, so it goes in before Keras (and JAX) start. XLA's
# CPU and TPU kernels are deterministic without it; there it changes nothing.
os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), "--xla_gpu_deterministic_ops=true"]))

import keras

import tpukit
from tpukit import data, models
from tpukit.teaching import SOLUTIONS, answered, check
from tpukit.training import determinism

import jax

runtime = tpukit.connect()
digits = data.load("digits")
print(runtime.describe())

# Each exercise leaves `...` for you to fill in. Its folded solution cell fills it in only with TPUKIT_SOLUTIONS=1
# (the tests set it), so the self-check under it tests your answer, not ours.

# %% tags=["tf"]
import os
import time

import numpy as np
import keras

import tpukit
from tpukit import data, models
from tpukit.teaching import SOLUTIONS, answered, check
from tpukit.training import determinism

import tensorflow as tf

runtime = tpukit.connect()
digits = data.load("digits")
print(runtime.describe())

# Each exercise leaves `...` for you to fill in. Its folded solution cell fills it in only with TPUKIT_SOLUTIONS=1
# (the tests set it), so the self-check under it tests your answer, not ours.

# %% [markdown]
# ## Seeds: the same initial weights
#
# `keras.utils.set_random_seed(n)` seeds Python's `random`, NumPy, TensorFlow (wherever it is installed, for
# `tf.data`'s shuffles) and Keras' own global seed generator, in one call. Build a model twice without it and the
# initial weights differ; seed before each build and they are equal. "Equal" here means bit for bit: the bytes
# of every array of `model.get_weights()`, which `np.array_equal` would not quite say (it calls `-0.0` equal to
# `0.0`, and a NaN unequal to itself).

# %%
def small_model():
    """An MLP for the 8x8 digits; its initial weights are random draws from Keras' global seed generator."""
    return keras.Sequential([keras.Input(digits.info.image_shape), keras.layers.Rescaling(1 / 255),
                             keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
                             keras.layers.Dropout(0.2), keras.layers.Dense(10)])


def same_bits(weights_a, weights_b):
    """True when two lists of arrays (two models' `get_weights()`) are equal bit for bit."""
    return len(weights_a) == len(weights_b) and all(
        a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes() for a, b in zip(weights_a, weights_b))


print("no seed, equal weights:", same_bits(small_model().get_weights(), small_model().get_weights()))
keras.utils.set_random_seed(42)
first = small_model().get_weights()
keras.utils.set_random_seed(42)
second = small_model().get_weights()
print("seed 42 before each build, equal weights:", same_bits(first, second))
print("tpukit.fingerprint of each:", tpukit.fingerprint(first), tpukit.fingerprint(second))

# %% [markdown]
# `tpukit.fingerprint` hashes the same bytes (and each array's dtype and shape) into 16 hex digits: equal
# fingerprints mean bitwise-equal weights, and a fingerprint is short enough to print, log and compare later
# without the model. `tpukit.training.determinism.set_seed` is `keras.utils.set_random_seed`.
#
# ### Exercise 1: what a seed fixes
#
# A seed does not fix one build: it restarts the stream that every later random draw comes from. The self-check
# seeds **once** and builds two models, then seeds again and builds two more. **Predict `DISTINCT`**: how many
# different sets of initial weights do the four models have? The self-check builds them and counts.

# %% tags=["exercise"]
DISTINCT = ...  # YOUR PREDICTION: a count, 1 to 4

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["DISTINCT = 1", "DISTINCT = 4", "DISTINCT = 3"]
# @title Solution
if SOLUTIONS:
    DISTINCT = 2  # builds 1 and 3 start the stream at seed 7; builds 2 and 4 both take its next draws

# %% tags=["self-check"]
# Self-check: seed, build, build; seed, build, build; then count the different kernels
answered(DISTINCT, "after set_random_seed(7) the draws come in a fixed order; the second seeding starts that "
                   "order over")
kernels = []
for _ in range(2):
    keras.utils.set_random_seed(7)
    kernels += [keras.Sequential([keras.Input((64,)), keras.layers.Dense(10)]).get_weights()[0] for _ in range(2)]
print("the four fingerprints:", [tpukit.fingerprint([k]) for k in kernels])
check(DISTINCT == len({k.tobytes() for k in kernels}), "count the different fingerprints above")
print("Exercise 1: correct.")

# %% [markdown]
# ## Why the last bits differ: the order of additions
#
# Floating-point addition is not associative. A GPU reduces thousands of numbers with many threads at once, and
# when they add into one total with atomic operations, the order (and so the last bits) changes from run to run.
# cuDNN also picks among convolution algorithms by timing them, which can pick differently each run. Training
# amplifies a one-bit difference into visibly different weights after a few hundred steps.

# %%
a, b, c = np.float32(1e8), np.float32(-1e8), np.float32(1.0)
print(f"(a + b) + c = {(a + b) + c}")
print(f"a + (b + c) = {a + (b + c)}   (-1e8 + 1 rounds back to -1e8 in float32)")
values = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
orders = {float(np.sum(np.random.default_rng(seed).permutation(values), dtype=np.float32)) for seed in range(5)}
print(f"one sum of 100,000 float32 numbers, in 5 orders: {len(orders)} different results")

# %% [markdown]
# ## Op determinism, and what it costs
#
# **TensorFlow.** The recipe, from TensorFlow's own documentation of the call:
#
# ```python
# keras.utils.set_random_seed(1)
# tf.config.experimental.enable_op_determinism()
# ```
#
# **History.** TensorFlow 2.1 read an environment variable, `TF_DETERMINISTIC_OPS=1`, that made the gradient of
# `tf.nn.bias_add` deterministic on GPUs (its atomics were the first culprit NVIDIA's determinism work named), then
# cuDNN convolutions and max-pooling. TensorFlow 2.8 made it an API,
# `tf.config.experimental.enable_op_determinism()`, which covers many more ops, makes `tf.data` deterministic, and
# raises `UnimplementedError` for ops that have no deterministic implementation instead of silently varying. The
# environment variable is still read when TensorFlow starts, so it must be set before the first import.
#
# **JAX** has no such call. XLA's CPU and TPU kernels are deterministic already; on a GPU, XLA reads
# `--xla_gpu_deterministic_ops=true` from `XLA_FLAGS` once, when JAX starts, which is why the setup cell sets it
# before importing Keras (docs/gpu-benchmark.md: on an H100, two seeded runs differed without it and repeated
# with it). And JAX's random numbers have no hidden state: every draw takes an explicit key, so the same key gives
# the same numbers, in any order and on any device.
#
# **Cost.** Deterministic kernels are often slower: they give up atomics, fix an algorithm, or serialize work.
# Op determinism cannot be turned off again in a running process (more on that below), so measure the
# nondeterministic side first. Two workloads: a training step of a small CNN, and a `tf.data` pipeline whose
# `map` draws random numbers (random augmentation). Determinism forces a `map` with *stateful* random ops such as
# `tf.random.uniform` to run serially; the cure is *stateless* random ops, seeded per batch, measured third. On
# JAX only the training step is timed: there is no `tf.data`, and no switch to compare.
#
# **On a GPU the two training-step rows differ in more than determinism.** Keras' `jit_compile="auto"` compiles
# the step with XLA on one GPU, and turns XLA off once op determinism is on (XLA's kernels do not promise
# TensorFlow's determinism: `model_supports_jit` in Keras' trainer). So there the ratio is "XLA" against "no XLA,
# deterministic kernels", and the cell prints which rows XLA compiled. To see determinism's cost alone, compile both
# with `jit_compile=False`. On a CPU Keras leaves XLA off either way.

# %%
STEPS = 5 if SMOKE else 50


def best_ms(run, repeats=5 if SMOKE else 10):
    """The fastest of `repeats` calls of `run()`, in milliseconds (the minimum is the least noisy estimate)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


XLA_USED = []  # whether Keras compiled each timed model's step with XLA (its jit_compile="auto", resolved)


def train_steps_ms():
    """Milliseconds per training step of tpukit's small CNN, plain Keras on the default device."""
    keras.utils.set_random_seed(0)
    model = models.build("cnn", input_shape=digits.info.image_shape, num_classes=10)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x, y = digits.x_train[:64], digits.y_train[:64]
    model.train_on_batch(x, y)  # warm-up: tracing
    XLA_USED.append(bool(model.jit_compile))
    return best_ms(lambda: [model.train_on_batch(x, y) for _ in range(STEPS)]) / STEPS


# %% tags=["jax"]
print(f"train step: {train_steps_ms():.1f} ms on {jax.devices()[0].platform.upper()}")  # after its warm-up
print("XLA_FLAGS:", os.environ["XLA_FLAGS"])
key = jax.random.key(1)
again = bool((jax.random.uniform(key, (3,)) == jax.random.uniform(key, (3,))).all())
other = bool((jax.random.uniform(jax.random.split(key)[0], (3,)) != jax.random.uniform(key, (3,))).any())
print(f"the same key draws the same numbers: {again}; a key split from it draws others: {other}")

# %% tags=["tf"]
images = data.load("mnist5k").x_train[: 1024 if SMOKE else None]


def augment(batch):
    pixels = tf.image.resize(tf.cast(batch, tf.float32), (56, 56))
    return pixels + tf.random.uniform(tf.shape(pixels), -8.0, 8.0)  # stateful: a hidden random state


def augment_stateless(batch, seed):
    pixels = tf.image.resize(tf.cast(batch, tf.float32), (56, 56))
    return pixels + tf.random.stateless_uniform(tf.shape(pixels), seed, -8.0, 8.0)  # a pure function of seed


def pipeline_ms(stateless=False):
    batches = tf.data.Dataset.from_tensor_slices(images).batch(32)
    if stateless:  # one (seed, seed) pair per batch, from a seeded stream
        batches = tf.data.Dataset.zip(batches, tf.data.Dataset.random(seed=1).batch(2))
    pipeline = batches.map(augment_stateless if stateless else augment, num_parallel_calls=tf.data.AUTOTUNE)
    return best_ms(lambda: [None for _ in pipeline])


train_steps_ms(), pipeline_ms()  # a throwaway round: the first calls in a process pay one-time costs
cost = {"nondeterministic": (train_steps_ms(), pipeline_ms(), pipeline_ms(stateless=True))}
keras.utils.set_random_seed(42)
tf.config.experimental.enable_op_determinism()  # from here on, for the rest of this process
cost["deterministic"] = (train_steps_ms(), pipeline_ms(), pipeline_ms(stateless=True))

print(f"{'':>17} {'train step':>11} {'tf.data, stateful':>18} {'tf.data, stateless':>19}")
for name, (step, stateful, stateless) in cost.items():
    print(f"{name:>17} {step:8.1f} ms {stateful:15.1f} ms {stateless:16.1f} ms")
ratios = [d / n for d, n in zip(cost["deterministic"], cost["nondeterministic"])]
print("deterministic / nondeterministic:", ", ".join(f"{r:.2f}x" for r in ratios))
print(f"XLA compiled the train step: nondeterministic {XLA_USED[-2]}, deterministic {XLA_USED[-1]}")

# %% [markdown]
# On TensorFlow the nondeterministic side ran first, in the same process. For a cleaner comparison run two
# fresh processes, which is also how you would compare on a GPU:
#
# ```bash
# python -m tpukit train --dataset digits --model cnn --epochs 1 --json
# python -m tpukit train --dataset digits --model cnn --epochs 1 --json --deterministic
# ```

# %% [markdown]
# ## Two runs, the same weights: plain Keras
#
# Seeds and deterministic ops together make training a pure function of the code and the data. Train the small
# MLP twice from scratch, with shuffling and dropout (both random), and compare every weight bit for bit. At full
# size that is 5 epochs of 1,437 digits, a few seconds.

# %%
def train_once(seed):
    """A seeded model trained from scratch; returns its weights."""
    keras.utils.set_random_seed(seed)  # on TensorFlow, op determinism is on since the cell above
    model = small_model()
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(digits.x_train, digits.y_train, batch_size=64, epochs=1 if SMOKE else 5, shuffle=True, verbose=0)
    return model.get_weights()


run_1, run_2, other_seed = train_once(7), train_once(7), train_once(8)
print("seed 7 twice, equal bit for bit:", same_bits(run_1, run_2))
print("seed 7 and seed 8, equal:", same_bits(run_1, other_seed))

# %% [markdown]
# ## tpukit: one setting, and a fingerprint in every run
#
# `RunConfig(deterministic=True, seed=7)` makes the same calls for a run: `keras.utils.set_random_seed(7)` and,
# on TensorFlow, `enable_op_determinism()`; on JAX, `tpukit.connect(deterministic=True)` sets XLA's GPU flag
# (when it is the first to start JAX). What it adds: each epoch's order of the data comes from the seed and the
# epoch number (so a resumed run sees the batches it would have seen), and `tpukit.train` records the fingerprint
# of the final weights in its `RunResult` (and in `result.json`), so two runs compare without loading either
# model; the panel's **Check reproducibility** button reruns a run and does exactly this.

# %%
config = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1 if SMOKE else 3,
                          steps_per_epoch=5 if SMOKE else None, deterministic=True, seed=7)
run_a = tpukit.train(config, runtime)
print(run_a.summary())
run_b = tpukit.train(config, runtime)  # the same config again
print("run a:", run_a.fingerprint, "| run b:", run_b.fingerprint)

# %% [markdown]
# ### Exercise 2: what the fingerprint depends on
#
# Some fields of a `RunConfig` change the weights a run ends with; others only change how the run is named,
# recorded or reported. `CANDIDATES` changes one field at a time from a deterministic config like the one above.
# **Predict `CHANGES_WEIGHTS`**: the set of fields whose change gives a different fingerprint. The self-check
# trains the config once as it is and once per candidate (five short runs), and compares fingerprints.

# %% tags=["exercise"]
CANDIDATES = {"name": "renamed", "metrics": ("accuracy", "sparse_top_k_categorical_accuracy"),
              "learning_rate": 0.01, "batch_size": 32}
CHANGES_WEIGHTS = ...  # YOUR PREDICTION: a set of field names from CANDIDATES, such as {"name"}

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["CHANGES_WEIGHTS = {'learning_rate'}", "CHANGES_WEIGHTS = {'learning_rate', 'batch_size', 'metrics'}", "CHANGES_WEIGHTS = set()"]
# @title Solution
if SOLUTIONS:
    CHANGES_WEIGHTS = {"learning_rate", "batch_size"}  # the name and the metrics only watch the run

# %% tags=["self-check"]
# Self-check: one run as configured, then one run per candidate change
answered(CHANGES_WEIGHTS, "a field changes the weights when it changes the initial weights, the data a step "
                          "sees, or the update; a metric is only computed from the outputs")
base = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1, steps_per_epoch=5 if SMOKE else 20,
                        validation_split=None, deterministic=True, seed=7)
reference = tpukit.train(base, runtime).fingerprint
measured = {field for field, value in CANDIDATES.items()
            if tpukit.train(base.replace(**{field: value}), runtime).fingerprint != reference}
print("you predicted:", sorted(CHANGES_WEIGHTS), "| measured:", sorted(measured))
check(set(CHANGES_WEIGHTS) == measured, "compare the two lists above")
print("Exercise 2: correct: the same config gives the same weights, and you know which fields count.")

# %% [markdown]
# ## Turning determinism off in a running kernel
#
# TensorFlow has no public call that turns op determinism off again. So in tpukit, unticking **deterministic**
# after a deterministic run still seeds (runs start from the same weights), but the ops stay deterministic until
# the runtime restarts (Colab: *Runtime > Restart session*). `setup` says so, and
# `determinism.op_determinism_enabled()` tells you which state you are in (it knows of tpukit's own calls: here
# the deterministic runs above). On JAX nothing is switched on in the running process: it stays `False`, and
# XLA's flags hold from start-up to the end.

# %%
print(determinism.setup(seed=42, deterministic=False, runtime=runtime))
print("op determinism on:", determinism.op_determinism_enabled())

# %% [markdown]
# ## What you should see
#
# - Unseeded builds have different weights; builds seeded alike have equal weights and one fingerprint; seeding
#   once and building twice gives two, and seeding again repeats them.
# - `(a + b) + c` is 1 and `a + (b + c)` is 0; one sum in five orders gives several results; `1e8, 1, -1e8, 1`
#   sums to 0, 1 or 2 (Exercise 3, the extra at the end).
# - The cost table (TensorFlow). On a CPU the training step costs about the same either way (CPU kernels are mostly
#   deterministic already). The stateful `tf.data` pass gets slower with determinism, since its `map` runs
#   serially, by up to the number of cores; the stateless one keeps its speed. Timings are noisy on a shared or
#   2-core machine (like Colab's CPU runtime): read the ratios, and rerun the cell if one looks odd.
# - On JAX: one training-step time, the flag in `XLA_FLAGS`, and the same key drawing the same numbers.
# - Plain Keras: seed 7 twice gives bitwise-equal weights, seeds 7 and 8 do not. tpukit: two runs of one config
#   have the same fingerprint; so do runs that differ only in their name or metrics.
# - After `setup(..., deterministic=False)`: op determinism is still on (TensorFlow), or was never a switch (JAX).
#
# ## On a TPU, a GPU or the CPU
#
# - **GPU**: nondeterminism is common (atomics in reductions and bias gradients, cuDNN autotuning), and
#   determinism can cost a lot, from a few percent to several times slower for scatter and segment ops. The
#   cost table there also holds XLA's gain: `XLA compiled the train step: nondeterministic True, deterministic
#   False`. Some
#   ops raise `UnimplementedError`; the error names the op. On JAX, only `--xla_gpu_deterministic_ops=true`
#   makes seeded runs repeat.
# - **TPU**: XLA compiles each step into one fixed program and its TPU kernels are deterministic, so with seeds
#   runs repeat exactly; keep the input order fixed (tpukit's pipelines shuffle with a seed per epoch).
# - **CPU**: mostly deterministic with seeds, but oneDNN and multi-threaded ops can still vary (TensorFlow warns
#   about round-off from "different computation orders" at start-up); `tf.data` with parallel random `map`s is
#   the usual cost of determinism here.

# %% [markdown]
# ## Extra: one sum, every order
#
# *Not part of the workshop day: an exercise for after class, on the order of additions shown above.*

# %% [markdown]
# ### Exercise 3: one sum, every order
#
# Add the four float32 numbers `1e8, 1, -1e8, 1`, one at a time from 0, in every one of their orders.
# **Predict `RESULTS`**: how many different totals come out? The self-check tries every order.

# %% tags=["exercise"]
RESULTS = ...  # YOUR PREDICTION: a count of different totals

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["RESULTS = 1", "RESULTS = 2", "RESULTS = 24"]
# @title Solution
if SOLUTIONS:
    RESULTS = 3  # 0, 1 or 2: a 1 survives only if it is added while the total is not near 1e8

# %% tags=["self-check"]
# Self-check: every order of the four numbers, summed in float32
import itertools

answered(RESULTS, "float32 keeps 24 significant bits: near 1e8 its neighbouring values are 8 apart, so 1e8 + 1 "
                  "rounds back to 1e8")
totals = set()
for order in itertools.permutations(np.array([1e8, 1.0, -1e8, 1.0], dtype=np.float32)):
    total = np.float32(0)
    for value in order:
        total = np.float32(total + value)
    totals.add(float(total))
print("the different totals:", sorted(totals))
check(RESULTS == len(totals), "count the different totals above")
print("Exercise 3: correct.")
