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
# # Determinism: same config, same weights, and what it costs
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/22<br>
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
# - seed Python, NumPy, TensorFlow and Keras with one call, and see that it fixes the initial weights;
# - see why the order of additions changes the last bits of a result;
# - turn on op determinism (and know its history, `TF_DETERMINISTIC_OPS=1`), and measure what it costs here;
# - compare runs by the **fingerprint** of their weights: equal fingerprints mean bitwise-equal weights;
# - know what "determinism off" can and cannot mean in a running kernel.

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

import keras
import numpy as np
import tensorflow as tf

import tpukit
from tpukit import data, determinism, models

runtime = tpukit.connect()
digits = data.load("digits")
print(runtime.describe())

# %% [markdown]
# ## Seeds: the same initial weights
#
# `keras.utils.set_random_seed(n)` seeds Python's `random`, NumPy, TensorFlow and Keras in one call;
# `tpukit.determinism.set_seed` is that call. Build a model twice without it and the weights differ; seed before
# each build and they are equal. `tpukit.fingerprint` hashes every weight bit for bit into 16 hex digits.

# %%
unseeded = [tpukit.fingerprint(models.build("mlp", input_shape=(8, 8, 1), num_classes=10)) for _ in range(2)]
print("no seed:   ", unseeded)

FIRST_SEED = 42
determinism.set_seed(FIRST_SEED)
first = tpukit.fingerprint(models.build("mlp", input_shape=(8, 8, 1), num_classes=10))

# %% [markdown]
# ### Exercise 1: start from the same weights
#
# **Try changing `SECOND_SEED`**. The self-check passes when the second model starts with exactly the first
# model's weights.

# %%
SECOND_SEED = 42  # try changing this
determinism.set_seed(SECOND_SEED)
second = tpukit.fingerprint(models.build("mlp", input_shape=(8, 8, 1), num_classes=10))
print("seeded:    ", [first, second])

# %%
# Self-check
assert unseeded[0] != unseeded[1], "unseeded builds should differ"
assert first == second, f"different starting weights: seed {FIRST_SEED} vs {SECOND_SEED}"
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
# **History.** TensorFlow 2.1 read an environment variable, `TF_DETERMINISTIC_OPS=1`, that made cuDNN
# convolutions and max-pooling deterministic on GPUs. TensorFlow 2.8 made it an API,
# `tf.config.experimental.enable_op_determinism()`, which covers many more ops, makes `tf.data` deterministic, and
# raises `UnimplementedError` for ops that have no deterministic implementation instead of silently varying. The
# environment variable is still read when TensorFlow starts, so it must be set before the first import.
#
# **Cost.** Deterministic kernels are often slower: they give up atomics, fix an algorithm, or serialize work.
# Op determinism cannot be turned off again in a running process (more on that below), so measure the
# nondeterministic side first. Two workloads: a training step of a small CNN, and a `tf.data` pipeline whose
# `map` draws random numbers (random augmentation). Determinism forces a `map` with *stateful* random ops such as
# `tf.random.uniform` to run serially; the cure is *stateless* random ops, seeded per batch, measured third.

# %%
STEPS = 5 if SMOKE else 50
images = data.load("mnist5k").x_train[: 1024 if SMOKE else None]


def best_ms(run, repeats=5 if SMOKE else 10):
    """The fastest of `repeats` calls of `run()`, in milliseconds (the minimum is the least noisy estimate)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def train_steps_ms():
    keras.utils.set_random_seed(0)
    with runtime.strategy.scope():
        model = models.build("cnn", input_shape=digits.info.image_shape, num_classes=10)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x, y = digits.x_train[:64], digits.y_train[:64]
    model.train_on_batch(x, y)  # warm-up: tracing
    return best_ms(lambda: [model.train_on_batch(x, y) for _ in range(STEPS)]) / STEPS


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
print(determinism.setup(seed=42, deterministic=True))
cost["deterministic"] = (train_steps_ms(), pipeline_ms(), pipeline_ms(stateless=True))

print(f"{'':>17} {'train step':>11} {'tf.data, stateful':>18} {'tf.data, stateless':>19}")
for name, (step, stateful, stateless) in cost.items():
    print(f"{name:>17} {step:8.1f} ms {stateful:15.1f} ms {stateless:16.1f} ms")
ratios = [d / n for d, n in zip(cost["deterministic"], cost["nondeterministic"])]
print("deterministic / nondeterministic:", ", ".join(f"{r:.2f}x" for r in ratios))

# %% [markdown]
# The nondeterministic side ran first, in the same process. For a cleaner comparison run two fresh processes,
# which is also how you would compare on a GPU:
#
# ```bash
# python -m tpukit train --dataset digits --model cnn --epochs 1 --json
# python -m tpukit train --dataset digits --model cnn --epochs 1 --json --deterministic
# ```

# %% [markdown]
# ## Fingerprints: two runs, one fingerprint
#
# With seeds and op determinism on, a run is a pure function of its config. `tpukit.train` records the
# fingerprint of the final weights in its `RunResult` (and in `result.json`), so two runs can be compared
# without loading either model; the panel's **Check reproducibility** button does exactly this.

# %%
config = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1 if SMOKE else 3,
                          steps_per_epoch=5 if SMOKE else None, deterministic=True, seed=7)
run_a = tpukit.train(config, runtime)
print(run_a.summary())

# %% [markdown]
# ### Exercise 2: what the fingerprint depends on
#
# **Try changing the field in `CHANGE`** for the second run. Some fields change the weights (the seed, the
# learning rate, the batch size); others only change where and how the run is recorded. The self-check passes
# when the configs differ but the weights are bitwise equal.

# %%
CHANGE = {"name": "second-run"}  # try changing this, e.g. {"seed": 8} or {"learning_rate": 0.01}
run_b = tpukit.train(config.replace(**CHANGE), runtime)
print("run a:", run_a.fingerprint, "| run b:", run_b.fingerprint)

# %%
# Self-check
assert run_b.config != run_a.config, "change a field of the config"
assert run_b.fingerprint == run_a.fingerprint, f"{CHANGE} changes the weights: pick a field that does not"
print("Exercise 2: correct: the same weights, bit for bit, from a different config.")

# %% [markdown]
# ## Turning determinism off in a running kernel
#
# TensorFlow has no public call that turns op determinism off again. So in tpukit, unticking **deterministic**
# after a deterministic run still seeds (runs start from the same weights), but the ops stay deterministic until
# the runtime restarts (Colab: *Runtime > Restart session*). `setup` says so, and
# `determinism.op_determinism_enabled()` tells you which state you are in.

# %%
print(determinism.setup(seed=42, deterministic=False))
print("op determinism on:", determinism.op_determinism_enabled())

# %% [markdown]
# ## What you should see
#
# - Unseeded builds have different fingerprints; seeded ones share one.
# - `(a + b) + c` is 1 and `a + (b + c)` is 0; one sum in five orders gives several results.
# - The cost table. On a CPU the training step costs about the same either way (CPU kernels are mostly
#   deterministic already). The stateful `tf.data` pass gets slower with determinism, since its `map` runs
#   serially, by up to the number of cores; the stateless one keeps its speed. Timings are noisy on a shared or
#   2-core machine (like Colab's CPU runtime): read the ratios, and rerun the cell if one looks odd.
# - Two runs that differ only in their name have the same fingerprint.
# - After `setup(..., deterministic=False)`: op determinism is still on.
#
# ## On a TPU, a GPU or the CPU
#
# - **GPU**: nondeterminism is common (atomics in reductions and bias gradients, cuDNN autotuning), and
#   determinism can cost a lot, from a few percent to several times slower for scatter and segment ops. Some
#   ops raise `UnimplementedError`; the error names the op.
# - **TPU**: XLA compiles each step into one fixed program, so with seeds runs usually repeat exactly; keep the
#   input order fixed (tpukit's pipelines shuffle with a seed per epoch).
# - **CPU**: mostly deterministic with seeds, but oneDNN and multi-threaded ops can still vary (TensorFlow warns
#   about round-off from "different computation orders" at start-up); `tf.data` with parallel random `map`s is
#   the usual cost of determinism here.
