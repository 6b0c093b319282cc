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
# # Quick start: the tpukit panel in three cells
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/24<br>
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
# - predict the padding and the global batch of a batch size, then check them;
# - check that a deterministic run can be reproduced bit for bit.
#
# The later notebooks open the panel up: 01 connecting and distributing, 02 mixed precision, 03 determinism,
# 04 Keras training, 05 profiling and input pipelines, and from 06 on scaling out.

# %% [markdown]
# ## Setup
#
# **Cell 1: install.** The same cell works on Colab's CPU, GPU and TPU runtimes: it installs tpukit only where it
# is missing, without extras, so the runtime's own framework stays (TensorFlow on CPU and GPU; JAX, with no
# TensorFlow, on TPU) and no package Colab ships changes. Where tpukit is installed already, it does nothing.
# It then picks Keras' backend, which must happen before anything imports Keras: TensorFlow where it is installed,
# else JAX (a `KERAS_BACKEND` you set yourself wins). Every tpukit notebook starts with this same cell.

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

# %% [markdown]
# The tests run every notebook with `TPUKIT_SMOKE=1`, which shrinks the run to a few seconds on a CPU
# (8x8 digits, a small MLP, a few steps). Without it the panel starts from `RunConfig()`'s defaults: the classic
# Colab CNN on 5,000 MNIST digits bundled with tpukit, so nothing needs the network.

# %%
import os

import numpy as np

import tpukit

START = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1, steps_per_epoch=4) if SMOKE else None

# The exercises leave `...` for you to fill in. Each has a hidden solution cell that runs only with
# TPUKIT_SOLUTIONS=1 (the tests set it), so the self-checks test your answer, not ours.
SOLUTIONS = os.environ.get("TPUKIT_SOLUTIONS") == "1"


def answered(value, hint):
    """The start of every self-check: an answer still `...` fails here, with a hint."""
    assert value is not ..., f"Not answered yet: replace the `...` in the cell above. Hint: {hint}"
    return value

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
# - The accelerator group names what `connect` found, for example `TPU, 1 replica` (Colab's free TPU, one v5e
#   chip), `GPU, 1 replica (Tesla T4)` or `CPU`, with the precision tpukit recommends there and why.
# - While the run goes on: epoch, step, examples per second, an ETA and a loss/accuracy plot that updates.
# - At the end, a line such as `completed: 20261122-...-mlp-digits, val_accuracy 0.9...` and a row in the runs
#   table. At smoke size accuracy is low (a few steps). With the defaults (3 epochs of the CNN), training accuracy
#   ends near 0.97 and `val_accuracy` somewhere around 0.8 to 0.95: it still jumps from epoch to epoch.
# - The printed summary: final metrics, examples/s, step time, MFU (the share of the chip's peak FLOP/s the model
#   used) and the weights fingerprint. Every run also has a directory under `runs/` with `config.json` and
#   `result.json`.
# - The last line: `result.model` is the trained `keras.Model` (also `panel.model`), here predicting the class
#   probabilities of a blank image; `predict`, `evaluate` and `save` it as any Keras model (notebook 04 does).

# %% [markdown]
# ## Change a setting from code
#
# `panel.config` is a frozen `RunConfig`, the single source of truth: assign a new one (or a dict of fields to
# change) and every widget follows. A bad value raises `ValueError` with the field, the value and the choices,
# exactly the message the panel shows beside the widget.
#
# `padding_advice` says what a batch size costs in padding. A TPU's matrix unit works on 128x128 tiles; XLA pads
# one dimension of a matrix to a multiple of 8 and the other to a multiple of 128, and which one gets 128
# depends on the layout it picks, so tpukit's rule is a per-replica batch that is a multiple of 128 on a TPU:
# then nothing is padded either way. On a GPU the rule is a multiple of 8 (Tensor Cores). A batch of 96 pads up
# to 128 on a TPU, so 32 of every 128 rows are padding:

# %%
panel.config = {"batch_size": 96}
print(panel.config.padding_advice("tpu"))
print(panel.config.padding_advice("gpu") or "GPU: 96 is a multiple of 8, no padding")
try:
    panel.config = {"precision": "float8"}
except ValueError as e:
    print(e)

# %% [markdown]
# ### Exercise 1: the padding in a batch of 100
#
# **Predict `PREDICTED_WASTE`**: on a TPU, what percentage of each padded batch is padding when the per-replica
# batch is 100? Work it out as above (the padded size first, then the padding's share of it); the self-check
# asks `padding_advice`.

# %% tags=["exercise"]
PREDICTED_WASTE = ...  # YOUR PREDICTION: percent of the padded batch, e.g. 12.5

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    PREDICTED_WASTE = 100 * (128 - 100) / 128  # 100 pads up to 128: 28 of 128 rows are padding

# %% tags=["self-check"]
# Self-check: your prediction against tpukit's advice
answered(PREDICTED_WASTE, "round 100 up to a multiple of 128, then divide the padding by the padded size")
print(tpukit.config.padding_advice(100, "tpu"))
measured = tpukit.config.padding_waste(100, 128)
print(f"predicted {PREDICTED_WASTE:.1f}%, measured {measured:.1f}%")
assert abs(PREDICTED_WASTE - measured) < 0.5, "not quite: the waste is a share of the padded size (not of 100)"
print("Exercise 1: correct.")

# %% [markdown]
# ### Exercise 2: a batch that fills the tiles, and the global batch
#
# `batch_size` is **per replica**: each step takes `batch_size x replicas` examples, the *global batch*. Look at
# the panel's accelerator group for the number of replicas here. **Set `BATCH`** to the per-replica batch nearest
# to 100 that wastes nothing on a TPU, and **predict `GLOBAL_BATCH`**, the examples per step it gives on this
# runtime.

# %% tags=["exercise"]
BATCH = ...  # YOUR ANSWER: a per-replica batch size
GLOBAL_BATCH = ...  # YOUR PREDICTION: examples per step on this runtime

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    BATCH = 128  # the multiple of 128 nearest to 100
    GLOBAL_BATCH = BATCH * tpukit.connect().replicas  # the accelerator group says how many replicas

# %% tags=["self-check"]
# Self-check
answered(BATCH, "a multiple of 128 has no padding on a TPU")
answered(GLOBAL_BATCH, "global batch = per-replica batch x replicas; the panel shows the replicas")
replicas = tpukit.connect().replicas
assert tpukit.config.padding_advice(BATCH, "tpu") is None, tpukit.config.padding_advice(BATCH, "tpu")
assert abs(BATCH - 100) < 64, "a multiple of 128, but not the one nearest to 100"
measured = tpukit.RunConfig(batch_size=BATCH, replicas=replicas).global_batch_size
assert GLOBAL_BATCH == measured, f"{BATCH} per replica on {replicas} replica(s) is not {GLOBAL_BATCH} per step"
print(f"Exercise 2: correct: {BATCH} per replica x {replicas} replica(s) = {measured} examples per step.")

# %% [markdown]
# Give the panel that batch size; the runs below use it.

# %%
panel.config = {"batch_size": BATCH}
print(panel.config.padding_advice("tpu") or f"batch_size={BATCH}: no padding on a TPU")

# %% [markdown]
# ## Reproduce a run bit for bit
#
# With **deterministic** on, tpukit seeds everything and makes the ops deterministic (TensorFlow's op
# determinism; on JAX, XLA's kernels are deterministic already), so the same config gives the same weights, down
# to the last bit. `check_reproducibility` reruns the latest completed run and compares the weights'
# fingerprints (the **Check reproducibility** button). Try it with `deterministic` off too: on a GPU the
# fingerprints then usually differ, on a CPU they often still match, by luck rather than by guarantee.
# Notebook 03 shows what the fingerprint depends on.

# %%
panel.config = {"deterministic": True, "epochs": 1}
panel.train(wait=True)
check = panel.check_reproducibility(wait=True)
print(check.text())
assert check.reproducible, check.text()

# %% [markdown]
# ## Compare the runs
#
# **Compare** (or `panel.compare()`) lists the runs of this kernel side by side, with a chart of step time and
# accuracy. The rows are plain dicts, so a notebook can sort or plot them too.

# %%
for row in panel.compare():
    print(row["run"], row["status"], row["batch_size"], row["deterministic"], row["fingerprint"])

# %% [markdown]
# ## On a TPU, a GPU or the CPU
#
# - **TPU**: one replica per TPU device: 1 on Colab's free TPU (a single v5e chip), 8 on Kaggle's v5e-8 or a
#   v2-8/v3-8 board (4 chips x 2 cores). `batch_size` is per replica, so the global batch is that many times
#   larger. On Colab's TPU runtime (JAX, no TensorFlow) tpukit runs Keras 3 on JAX, on the TPU. Precision
#   "auto" means `mixed_bfloat16`; `mixed_float16` is refused.
# - **GPU**: one replica per GPU under `MirroredStrategy`; "auto" picks `mixed_float16` on Tensor-Core GPUs
#   (compute capability 7.0 or higher, such as the T4) and `float32` on older ones.
# - **CPU**: one replica (or simulated replicas, see notebook 01); "auto" is decided by measuring float32 against
#   bfloat16 matmuls and conv gradients on this very CPU.
#
# The panel, the code and the run directories are the same on all three. Next: **TensorBoard** opens inline
# (never through a public tunnel) with the TensorBoard button; notebook 05 reads a profile capture in detail.
