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
# **Last modified:** 2026/11/24<br>
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
# - seed Python, NumPy, TensorFlow and Keras with one call, and see that it fixes the initial weights (and every
#   random draw after it);
# - see why the order of additions changes the last bits of a result;
# - turn on op determinism (and know its history, `TF_DETERMINISTIC_OPS=1`), and measure what it costs here;
#   on JAX (Colab's TPU runtime, which has no TensorFlow), know what stands in for it;
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

import tpukit
from tpukit import data
from tpukit.training import determinism
from tpukit import models

TF = keras.backend.backend() == "tensorflow"  # False on Colab's TPU runtime, where Keras runs on JAX
if TF:
    import tensorflow as tf
else:
    import jax

runtime = tpukit.connect()
digits = data.load("digits")
print(runtime.describe())

# The exercises leave `...` for you to fill in. Each has a hidden solution cell that runs only with
# TPUKIT_SOLUTIONS=1 (the tests set it), so the self-checks test your answer, not ours.
SOLUTIONS = os.environ.get("TPUKIT_SOLUTIONS") == "1"


def answered(value, hint):
    """The start of every self-check: an answer still `...` fails here, with a hint."""
    assert value is not ..., f"Not answered yet: replace the `...` in the cell above. Hint: {hint}"
    return value


# %% [markdown]
# ## Seeds: the same initial weights
#
# `keras.utils.set_random_seed(n)` seeds Python's `random`, NumPy, TensorFlow (where installed) and Keras in one
# call; `tpukit.training.determinism.set_seed` is that call. Build a model twice without it and the weights differ; seed
# before each build and they are equal. `tpukit.fingerprint` hashes every weight bit for bit into 16 hex digits.

# %%
unseeded = [tpukit.fingerprint(models.build("mlp", input_shape=(8, 8, 1), num_classes=10)) for _ in range(2)]
print("no seed:   ", unseeded)

determinism.set_seed(42)
first = tpukit.fingerprint(models.build("mlp", input_shape=(8, 8, 1), num_classes=10))
determinism.set_seed(42)
second = tpukit.fingerprint(models.build("mlp", input_shape=(8, 8, 1), num_classes=10))
print("seed 42 before each build:", [first, second])

# %% [markdown]
# ### Exercise 1: what a seed fixes
#
# A seed does not fix one build: it restarts the stream that every later random draw comes from. This cell
# seeds **once** and builds twice, then seeds again and builds twice more. **Predict `DISTINCT`**: how many
# different fingerprints do the four models have? The self-check builds them and counts.

# %% tags=["exercise"]
DISTINCT = ...  # YOUR PREDICTION: a count, 1 to 4

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    DISTINCT = 2  # builds 1 and 3 start the stream at seed 7; builds 2 and 4 both take its next draws

# %% tags=["self-check"]
# Self-check: seed, build, build; seed, build, build
answered(DISTINCT, "after set_seed(7) the draws come in a fixed order; the second seeding starts that order over")
fingerprints = []
for _ in range(2):
    determinism.set_seed(7)
    fingerprints += [tpukit.fingerprint(models.build("mlp", input_shape=(8, 8, 1), num_classes=10)) for _ in range(2)]
print("the four fingerprints:", fingerprints)
assert DISTINCT == len(set(fingerprints)), f"you predicted {DISTINCT}; count the equal ones above"
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
# ### Exercise 2: one sum, every order
#
# Add the four float32 numbers `1e8, 1, -1e8, 1`, one at a time from 0, in every one of their orders.
# **Predict `RESULTS`**: how many different totals come out? The self-check tries every order.

# %% tags=["exercise"]
RESULTS = ...  # YOUR PREDICTION: a count of different totals

# %% tags=["solution"] jupyter={"source_hidden": true}
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
assert RESULTS == len(totals), f"you predicted {RESULTS}"
print("Exercise 2: correct.")

# %% [markdown]
# ## Op determinism, and what it costs
#
# **History.** TensorFlow 2.1 read an environment variable, `TF_DETERMINISTIC_OPS=1`, that made cuDNN
# convolutions and max-pooling deterministic on GPUs. TensorFlow 2.8 made it an API,
# `tf.config.experimental.enable_op_determinism()`, which covers many more ops, makes `tf.data` deterministic, and
# raises `UnimplementedError` for ops that have no deterministic implementation instead of silently varying. The
# environment variable is still read when TensorFlow starts, so it must be set before the first import.
#
# **JAX** has no such switch to call. XLA's CPU and TPU kernels are deterministic already; on a GPU, XLA reads
# `--xla_gpu_deterministic_ops=true` from `XLA_FLAGS` when it starts (`tpukit.connect(deterministic=True)` sets
# it, so connect first). And JAX's random numbers have no hidden state: every draw takes an explicit key, so the
# same key gives the same numbers, in any order and on any device.
#
# **Cost.** Deterministic kernels are often slower: they give up atomics, fix an algorithm, or serialize work.
# Op determinism cannot be turned off again in a running process (more on that below), so measure the
# nondeterministic side first. Two workloads: a training step of a small CNN, and a `tf.data` pipeline whose
# `map` draws random numbers (random augmentation). Determinism forces a `map` with *stateful* random ops such as
# `tf.random.uniform` to run serially; the cure is *stateless* random ops, seeded per batch, measured third. On
# JAX only the training step is timed: there is no `tf.data`, and no switch to compare.

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


def train_steps_ms():
    keras.utils.set_random_seed(0)
    with runtime.strategy.scope():
        model = models.build("cnn", input_shape=digits.info.image_shape, num_classes=10)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x, y = digits.x_train[:64], digits.y_train[:64]
    model.train_on_batch(x, y)  # warm-up: tracing
    return best_ms(lambda: [model.train_on_batch(x, y) for _ in range(STEPS)]) / STEPS


# %%
if TF:
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
    print(determinism.setup(seed=42, deterministic=True, backend=runtime.backend))
    cost["deterministic"] = (train_steps_ms(), pipeline_ms(), pipeline_ms(stateless=True))

    print(f"{'':>17} {'train step':>11} {'tf.data, stateful':>18} {'tf.data, stateless':>19}")
    for name, (step, stateful, stateless) in cost.items():
        print(f"{name:>17} {step:8.1f} ms {stateful:15.1f} ms {stateless:16.1f} ms")
    ratios = [d / n for d, n in zip(cost["deterministic"], cost["nondeterministic"])]
    print("deterministic / nondeterministic:", ", ".join(f"{r:.2f}x" for r in ratios))
else:
    print(f"train step: {train_steps_ms():.1f} ms")  # after its warm-up step, which compiled it
    print(determinism.setup(seed=42, deterministic=True, backend=runtime.backend))
    key = jax.random.key(1)
    again = bool((jax.random.uniform(key, (3,)) == jax.random.uniform(key, (3,))).all())
    other = bool((jax.random.uniform(jax.random.split(key)[0], (3,)) != jax.random.uniform(key, (3,))).any())
    print(f"the same key draws the same numbers: {again}; a key split from it draws others: {other}")

# %% [markdown]
# On TensorFlow the nondeterministic side ran first, in the same process. For a cleaner comparison run two
# fresh processes, which is also how you would compare on a GPU:
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
run_b = tpukit.train(config, runtime)  # the same config again
print("run a:", run_a.fingerprint, "| run b:", run_b.fingerprint)

# %% [markdown]
# ### Exercise 3: what the fingerprint depends on
#
# Some fields of a `RunConfig` change the weights a run ends with; others only change how the run is named,
# recorded or reported. `CANDIDATES` changes one field at a time from a deterministic config like the one above.
# **Predict `CHANGES_WEIGHTS`**: the set of fields whose change gives a different fingerprint. The self-check
# trains the config once as it is and once per candidate, and compares fingerprints.

# %% tags=["exercise"]
CANDIDATES = {"name": "renamed", "metrics": ("accuracy", "sparse_top_k_categorical_accuracy"),
              "learning_rate": 0.01, "batch_size": 32}
CHANGES_WEIGHTS = ...  # YOUR PREDICTION: a set of field names from CANDIDATES, such as {"name"}

# %% tags=["solution"] jupyter={"source_hidden": true}
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
assert set(CHANGES_WEIGHTS) == measured, "not quite: compare the two lists above"
print("Exercise 3: correct: the same config gives the same weights, and you know which fields count.")

# %% [markdown]
# ## Turning determinism off in a running kernel
#
# TensorFlow has no public call that turns op determinism off again. So in tpukit, unticking **deterministic**
# after a deterministic run still seeds (runs start from the same weights), but the ops stay deterministic until
# the runtime restarts (Colab: *Runtime > Restart session*). `setup` says so, and
# `determinism.op_determinism_enabled()` tells you which state you are in. On JAX nothing was switched on, so
# there is nothing to switch off: it stays `False`, and XLA's flags hold from start-up to the end.

# %%
print(determinism.setup(seed=42, deterministic=False, backend=runtime.backend))
print("op determinism on:", determinism.op_determinism_enabled())

# %% [markdown]
# ## What you should see
#
# - Unseeded builds have different fingerprints; seeded ones share one; seeding once and building twice gives
#   two, and seeding again repeats them.
# - `(a + b) + c` is 1 and `a + (b + c)` is 0; one sum in five orders gives several results; `1e8, 1, -1e8, 1`
#   sums to 0, 1 or 2.
# - The cost table (TensorFlow). On a CPU the training step costs about the same either way (CPU kernels are mostly
#   deterministic already). The stateful `tf.data` pass gets slower with determinism, since its `map` runs
#   serially, by up to the number of cores; the stateless one keeps its speed. Timings are noisy on a shared or
#   2-core machine (like Colab's CPU runtime): read the ratios, and rerun the cell if one looks odd.
# - On JAX: one training-step time, and the same key drawing the same numbers.
# - Two runs of one config have the same fingerprint; so do runs that differ only in their name or metrics.
# - After `setup(..., deterministic=False)`: op determinism is still on (TensorFlow), or was never a switch (JAX).
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
