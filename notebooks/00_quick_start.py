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
# # Quick start: the tpukit panel in three cells
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/27<br>
# **Description:** Connect to the accelerator, train a Keras model and read the result from one widget panel.<br>
# **Accelerator:** TPU, GPU or CPU (any Colab runtime)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/00_quick_start.ipynb)

# %% [markdown]
# ## Introduction
#
# tpukit puts a small control panel in your notebook. It finds the accelerator in front of you (a TPU, else GPUs,
# else the CPU), lets you toggle precision, determinism and batch size, trains a Keras model inside the right
# `tf.distribute` strategy (on JAX, a `keras.distribution`), and shows progress, a table of runs and, when you
# ask for one, a profile.
#
# **You will learn to:**
#
# - install tpukit in Colab without replacing the runtime's own framework (TensorFlow, or JAX on the TPU runtime);
# - open the panel and train from it, or from code (every button is a method);
# - change a setting from code and see the panel follow;
# - know what a TPU pads a batch to, and pick a batch size that needs no padding;
# - count the steps of an epoch from the global batch (per-replica batch x replicas), then check with Keras;
# - after class (the extra at the end): check that a deterministic run can be reproduced bit for bit.
#
# The later notebooks open the panel up: 01 connecting and distributing, 02 mixed precision, 03 determinism,
# 04 Keras training, 05 profiling and input pipelines, and from 06 on scaling out.

# %% [markdown]
# ## Setup
#
# **Cell 1: install.** The same cell works on Colab's CPU, GPU and TPU runtimes: it installs tpukit only where it
# is missing, without extras, so the runtime's own framework stays (TensorFlow on CPU and GPU; JAX, with no
# TensorFlow, on TPU) and no package Colab ships changes. Where tpukit is installed already, it does nothing. It
# installs from a `tpukit-*.whl` file in the working directory when there is one (the wheel your instructor shared,
# uploaded with the Files pane on the left), else from the repository.
# It then picks Keras' backend, which must happen before anything imports Keras: TensorFlow where it is installed,
# else JAX (a `KERAS_BACKEND` you set yourself wins). Every tpukit notebook starts with this same cell.

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

# %% [markdown]
# The tests run every notebook with `TPUKIT_SMOKE=1`, which shrinks the run to a few seconds on a CPU
# (8x8 digits, a small MLP, a few steps). Without it the panel starts from `RunConfig()`'s defaults: the classic
# Colab CNN on 5,000 MNIST digits bundled with tpukit, so nothing needs the network.

# %%
import keras
import numpy as np

import tpukit
from tpukit.teaching import SOLUTIONS, answered, check

START = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1, steps_per_epoch=4) if SMOKE else None

# Each exercise leaves `...` for you to fill in. Its folded solution cell fills it in only with TPUKIT_SOLUTIONS=1
# (the tests set it), so the self-check under it tests your answer, not ours.

# %% [markdown]
# ## Open the panel
#
# **Cell 2: the panel.** It shows four groups: the accelerator (Connect finds it, and says why it skipped the
# others), the settings, Train / Stop with live progress, and the runs made in this kernel.

# %%
panel = tpukit.panel(START)

# %% [markdown]
# ## Train
#
# **Cell 3: train.** Pressing **Train** does the same as this cell. `wait=True` blocks until the run ends and
# returns its `RunResult`, which is what the tests need. From the button, training runs in a background thread in
# Jupyter (so **Stop** works) and in the foreground in Colab (stop with the interrupt button; the run is kept).

# %%
result = panel.train(wait=True)
assert result is not None, panel.message  # on failure the panel says why in one line
print(result.summary())
print(result.model.predict(np.zeros((1, *result.data["spec"]["input_shape"]), "uint8"), verbose=0).round(2))

# %% [markdown]
# ## What you should see
#
# - The accelerator group names what `connect` found, for example `TPU, 1 replica` (Colab's TPU runtime: one v5e
#   or one v6e chip), `GPU, 1 replica (Tesla T4)` or `CPU`, with the precision tpukit recommends there and why.
# - While the run goes on: epoch, step, examples per second, an ETA and a loss/accuracy plot that updates.
# - At the end, `completed: ...` and a row in the runs table. With the defaults (3 epochs of the CNN: about 30 s
#   on a 2-core CPU) `val_accuracy` ends somewhere around 0.8 to 0.95; at smoke size it is low.
# - The summary: final metrics, examples/s, step time, MFU (the share of the chip's peak FLOP/s used) and the
#   weights fingerprint; each run has a directory under `runs/`. `result.model` is the trained `keras.Model`.

# %% [markdown]
# ## Change a setting from code
#
# `panel.config` is a frozen `RunConfig`, the single source of truth: assign a new one (or a dict of fields to
# change) and every widget follows. A bad value raises `ValueError` with the field, the value and the choices,
# exactly the message the panel shows beside the widget.
#
# `padding_advice` says what a batch size costs in padding. On a TPU, XLA lays every array out in tiles: of a
# tensor's two minor dimensions it pads one to a multiple of 8 and the other to a multiple of 128, picking the
# layout by heuristics (Cloud TPU performance guide, "Consequences of tiling",
# cloud.google.com/tpu/docs/performance-guide). In a Dense layer's `[batch, features]` the batch usually takes the
# 8 and the features the 128. So on a TPU: a **per-replica batch that is a multiple of 8**, and layer widths
# (units, filters) that are multiples of 128. A larger batch also keeps the matrix units busier (a v5e has four
# 128x128 MXUs per TensorCore, a v6e two of 256x256: cloud.google.com/tpu/docs/v5e and /v6e), but that is
# throughput, not padding. A GPU pads nothing: cuBLAS and cuDNN run any size, and their Tensor Core kernels for
# 16-bit math run fastest on multiples of 8. On a TPU a batch of 100 is padded to 104; on a GPU it runs as it is:

# %%
panel.config = {"batch_size": 100}
print(panel.config.padding_advice("tpu"))
print(panel.config.padding_advice("gpu"))
panel.config = {"batch_size": 96}  # the multiple of 8 nearest to 100; the runs below use it
print(panel.config.padding_advice("tpu") or "batch_size=96: a multiple of 8, nothing to pad on a TPU or a GPU")
try:
    panel.config = {"precision": "float8"}
except ValueError as e:
    print(e)

# %% [markdown]
# ## The global batch, and the steps in an epoch
#
# The panel's `batch_size` is **per replica**: each step takes `batch_size x replicas` examples, the *global
# batch*, and each replica (a TPU chip, a GPU) computes its share. Plain Keras counts the other way round:
# `model.fit(x, y, batch_size=...)` takes the global batch, and a distribution (`keras.distribution.DataParallel`
# on JAX, a `tf.distribute` strategy on TensorFlow) splits it over the replicas. Colab's TPU runtime is one chip,
# so there the two are equal; on Kaggle's v5e-8 (8 chips, 8 replicas) a per-replica batch of 96 is a global batch
# of 768.
#
# ### Exercise 1: the steps in an epoch on 8 replicas
#
# **Predict `STEPS`**: on 8 replicas with a per-replica batch of 96, how many steps does plain Keras'
# `model.fit` take for one epoch of 5,000 examples? The self-check fits a small model for one epoch with that
# global batch and counts the steps Keras runs.

# %% tags=["exercise"]
STEPS = ...  # YOUR PREDICTION: steps in one epoch

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["STEPS = 53", "STEPS = 52", "STEPS = 6", "STEPS = 6.5"]
# @title Solution
if SOLUTIONS:
    STEPS = 7  # global batch 96 x 8 = 768; 5,000 / 768 = 6.5: six full batches, then a partial one of 392

# %% tags=["self-check"]
# Self-check: plain Keras fits one epoch of 5,000 examples with the global batch, and counts its steps
answered(STEPS, "the global batch is the per-replica batch x the replicas; does an epoch end on a full batch?")
features = np.random.default_rng(0).random((5000, 4), dtype="float32")
toy = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
toy.compile(optimizer="sgd", loss="mse")
steps_run = []  # one entry per step Keras trains
toy.fit(features, features.sum(axis=1), batch_size=96 * 8, epochs=1, verbose=0, shuffle=False,
        callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=lambda step, logs: steps_run.append(step))])
print(f"Keras ran {len(steps_run)} steps of up to {96 * 8} examples")
check(STEPS == len(steps_run), f"Keras ran {len(steps_run)} steps: fit takes the global batch (96 x 8), and it "
                               "keeps the last batch of an epoch even when that one is not full")
print("Exercise 1: correct.")

# %% [markdown]
# Keras trains on the last, partial batch (392 examples here). tpukit's pipelines drop it instead: a partial
# batch is a new shape, which XLA compiles into a second program, and it need not split evenly over the
# replicas. So a tpukit epoch of 5,000 examples at that batch is 6 steps; each epoch shuffles anew, so the 392 left
# out differ from epoch to epoch. `RunConfig` does the arithmetic:

# %%
print("global batch on 8 replicas:", panel.config.global_batch(8))
print("tpukit's steps in an epoch of 5,000:", tpukit.data.pipeline.steps_per_epoch(5000, panel.config.global_batch(8)))
print(f"here: {panel.runtime.replicas} replica(s), global batch {panel.config.global_batch(panel.runtime.replicas)}")

# %% [markdown]
# ## On a TPU, a GPU or the CPU
#
# - **TPU**: one replica per chip: 1 on Colab's TPU runtime, 8 on Kaggle's v5e-8. There (JAX, no TensorFlow)
#   tpukit runs Keras 3 on JAX. Precision "auto" means `mixed_bfloat16`; `mixed_float16` is refused.
# - **GPU**: one GPU trains under TensorFlow's default strategy, as plain `model.fit` does, so Keras'
#   `jit_compile="auto"` compiles with XLA; two or more under `MirroredStrategy`, where Keras keeps XLA off (on
#   JAX: `DataParallel`). "auto" picks `mixed_float16` on Tensor-Core GPUs (compute capability 7.0 or higher, such
#   as the T4, L4 and A100) and `float32` on older ones.
# - **CPU**: one replica (or simulated replicas, see notebook 01); "auto" picks `mixed_bfloat16` only where this
#   CPU, measured at connect, runs it faster than float32.
#
# The panel, the code and the run directories are the same on all three. Next: **TensorBoard** opens inline
# (never through a public tunnel) with the TensorBoard button; notebook 05 reads a profile capture in detail.
# Colab's TPU runtime ships no TensorBoard: there the button says to run `tpukit.colab.setup()` first (a cell of
# its own; it adds TensorBoard and its profile plugin with pip, in tens of seconds, and moves nothing Colab
# ships), then press it again. On the CPU and GPU runtimes TensorBoard is there already.

# %% [markdown]
# ## Extra: reproduce a run bit for bit
#
# *Not part of the workshop day: for after class (notebook 03 teaches determinism in full).*
#
# With **deterministic** on, tpukit seeds everything (`keras.utils.set_random_seed`) and makes the ops
# deterministic. On TensorFlow that is `tf.config.experimental.enable_op_determinism()`. On JAX, XLA's CPU and TPU
# kernels are deterministic already, but a GPU's are not: there XLA needs `XLA_FLAGS=--xla_gpu_deterministic_ops=true`,
# which it reads once, when JAX starts (tpukit's `connect` sets it when deterministic is on; docs/gpu-benchmark.md
# shows two seeded runs on an H100 differing without it and repeating with it). Then the same config gives the
# same weights, down to the last bit. `check_reproducibility` reruns the latest completed run and compares the
# weights' fingerprints (the **Check reproducibility** button). With `deterministic` off, fingerprints on a GPU
# usually differ; on a CPU or a TPU they often still match, by luck rather than by guarantee. Notebook 03 does this
# with plain Keras first. At full size this cell trains the CNN for one epoch twice (about 25 s on a 2-core CPU).

# %%
panel.config = {"deterministic": True, "epochs": 1}
panel.train(wait=True)
rerun = panel.check_reproducibility(wait=True)
print(rerun.text())
assert rerun.reproducible, rerun.text()

# %% [markdown]
# ### Exercise 2: which runs repeat
#
# Three deterministic runs of a small MLP on the digits: run A with seed 7, run B with the very same config, and
# run C with seed 8. **Predict `SAME_AS_A`**: the set of runs, out of `"B"` and `"C"`, whose weights fingerprint
# equals run A's. The self-check trains all three (a few seconds each) and compares their fingerprints.

# %% tags=["exercise"]
SAME_AS_A = ...  # YOUR PREDICTION: a set, such as {"C"} or set()

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["SAME_AS_A = set()", "SAME_AS_A = {'B', 'C'}", "SAME_AS_A = {'C'}"]
# @title Solution
if SOLUTIONS:
    SAME_AS_A = {"B"}  # same config, same weights; the seed is part of the config, so C starts elsewhere

# %% tags=["self-check"]
# Self-check: train A, B and C, and compare the fingerprints of their weights
answered(SAME_AS_A, "deterministic means: same config, same weights. Is the seed part of the config?")
run_a = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1, steps_per_epoch=5 if SMOKE else 30,
                         validation_split=None, deterministic=True, seed=7)
fingerprints = {name: tpukit.train(config).fingerprint
                for name, config in {"A": run_a, "B": run_a, "C": run_a.replace(seed=8)}.items()}
print("fingerprints:", fingerprints)
check(set(SAME_AS_A) == {name for name in "BC" if fingerprints[name] == fingerprints["A"]},
      "compare the three fingerprints above: a seed fixes the initial weights and the order of the data")
print("Exercise 2: correct.")

# %% [markdown]
# ### Compare the runs
#
# **Compare** (or `panel.compare()`) lists the runs of this kernel side by side, with a chart of step time and
# accuracy. The rows are plain dicts, so a notebook can sort or plot them too.

# %%
for row in panel.compare():
    print(row["run"], row["status"], row["batch_size"], row["deterministic"], row["fingerprint"])
