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
# # Keras training: the classic Colab CIFAR CNN through tpukit
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/25<br>
# **Description:** Train the classic Colab CIFAR-10 CNN in the right strategy, stop early, evaluate, and see how batch size scales.<br>
# **Accelerator:** TPU, GPU or CPU (any runtime; sizes adapt to it)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/04_keras_training.ipynb)

# %% [markdown]
# ## What you will learn
#
# - What the old `detect_strategy()` helper did (TPU, else MirroredStrategy, else the default strategy)
#   and how `tpukit.connect()` replaces it, on TensorFlow and on JAX.
# - Why the model, its optimizer and its metrics are built inside the strategy's (or distribution's) scope.
# - How to train the classic Colab CIFAR-10 CNN through the engine, with an offline fallback dataset.
# - How `EarlyStopping` on `val_loss` (validation data split off the *training* set) ends a run and keeps the
#   best weights, and why the test split is evaluated once, at the end.
# - How to train **your own** Keras model on your own NumPy arrays through the same engine.
# - How examples per second change with the global batch size, measured on the hardware at hand.
# - How every run is recorded, and how to compare runs in one table.
# - How to get the trained model back: predict with it, save it as `.keras`, load it back, and fine-tune from a run.
#
# Everything here runs on TensorFlow (Colab's CPU and GPU runtimes) and on JAX (Colab's TPU runtime, which has no
# TensorFlow): the same Keras calls, and the same `tpukit.train`.

# %% [markdown]
# ## Setup
#
# The first cell, the same in every tpukit notebook, installs tpukit where it is missing (keeping the runtime's
# own TensorFlow, JAX and Keras) and picks the Keras backend before anything imports Keras. `SMOKE` is set by
# the tests (`TPUKIT_SMOKE=1`): it shrinks every size so that the notebook runs in about a minute on a CPU.

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

import keras
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import tpukit
from tpukit import data
from tpukit import models
from tpukit.training import precision
from tpukit.runs import records

LOGDIR = os.path.join("runs", "04-keras-training")  # every run gets a directory in here
runtime = tpukit.connect()  # the next section says what this does

# The exercises leave `...` for you to fill in. Each has a hidden solution cell that runs only with
# TPUKIT_SOLUTIONS=1 (the tests set it), so the self-checks test your answer, not ours.
SOLUTIONS = os.environ.get("TPUKIT_SOLUTIONS") == "1"


def answered(value, hint):
    """The start of every self-check: an answer still `...` fails here, with a hint."""
    assert value is not ..., f"Not answered yet: replace the `...` in the cell above. Hint: {hint}"
    return value

# %% [markdown]
# ## From `detect_strategy()` to `tpukit.connect()`
#
# The 2020 Colab CIFAR-10 notebooks started with a helper like this one (TF 2.1 era, old TPU-node runtime):
#
# ```python
# def detect_strategy():
#     try:
#         tpu = tf.distribute.cluster_resolver.TPUClusterResolver()  # reads COLAB_TPU_ADDR
#         tf.config.experimental_connect_to_cluster(tpu)
#         tf.tpu.experimental.initialize_tpu_system(tpu)
#         return tf.distribute.experimental.TPUStrategy(tpu)         # 8 TPU cores
#     except ValueError:
#         if len(tf.config.list_logical_devices("GPU")) > 1:
#             return tf.distribute.MirroredStrategy()                 # all GPUs, all-reduce
#         return tf.distribute.get_strategy()                         # one device: the default strategy
# ```
#
# It swallowed every TPU error, could not tell you why it fell back, and knew nothing about today's
# TPU VMs (`tpu="local"`). `tpukit.connect()`, called in the setup, tries the same order (TPU, then GPUs, then
# the CPU), and returns a `Runtime` that says what it found, which strategy to use, the precision it recommends,
# and why each other kind was skipped. On TensorFlow the strategy is a `tf.distribute` strategy; on JAX (Colab's
# TPU runtime) it is a `keras.distribution.DataParallel` over the devices, or, on one device, `OneDevice`: no
# distribution at all.

# %%
print(runtime.describe())
print(f"strategy: {type(runtime.strategy).__name__}, replicas in sync: {runtime.replicas}")

# %% [markdown]
# **What you should see:** on Colab's CPU runtime, `Connected: CPU` and the default strategy with one
# replica, plus a line for the TPU and the GPU saying why each was skipped. On a GPU runtime,
# MirroredStrategy over the GPUs; on Colab's TPU runtime, `jax` in the first line and one replica per TPU device:
# 1 on the free tier (a single v5e chip), 8 on Kaggle's v5e-8 or a v2-8/v3-8 board.

# %% [markdown]
# ## Model and metrics in the strategy's scope
#
# Variables created inside `strategy.scope()` belong to the strategy: under MirroredStrategy or TPUStrategy
# each one is a *mirrored* variable, with one copy per replica kept equal by all-reduce. So the model, its
# optimizer and its metrics are all created inside the scope; `compile` in the scope as well. Swap the strategy
# and the same code distributes differently. Keras 3 on JAX has the same shape: a `keras.distribution`
# `DataParallel` has a `scope()` too, and variables built in it are replicated over its devices (each holds a
# whole copy, laid out by a sharding). `tpukit.train` enters the right scope for you; here it is by hand.

# %%
with runtime.strategy.scope():
    model = models.build("cnn", input_shape=(32, 32, 3), num_classes=10)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

kernel = model.weights[0].value  # the backend's variable under the Keras variable
print(models.describe("cnn"))
print(f"{model.count_params():,} parameters; first kernel is a {type(kernel).__name__}")
if runtime.backend == "tensorflow":
    print("copies on:", [v.device for v in getattr(kernel, "values", [kernel])])
else:
    print("laid out by a", type(kernel.sharding).__name__, "over", len(kernel.sharding.device_set), "device(s)")

# %% [markdown]
# **What you should see:** on one CPU or one TPU chip, a single copy. On several GPUs or TPU chips, one copy per
# replica (a `MirroredVariable` on TensorFlow; on JAX a `NamedSharding` over every device that splits no
# dimension, so each device holds all of it). Notebook 01 shows two simulated replicas; notebook 07 eight, on JAX.

# %% [markdown]
# ## The classic CIFAR CNN through the engine (offline fallback)
#
# ### The dataset: CIFAR-10 when online, shapes when not
#
# CIFAR-10 (50,000 training images, 32x32x3, 10 classes) comes from `keras.datasets` and needs the
# network once (170 MB). tpukit checks first and raises `tpukit.data.DatasetUnavailable` instead of hanging
# when it is not cached and cannot be downloaded. Then we fall back to `shapes`: generated 32x32x3 images
# of four coloured shapes, the same input shape, offline and of any size. (The smoke test never downloads.)

# %%
try:
    if SMOKE and not data.cached("cifar10"):
        raise data.DatasetUnavailable("the smoke test does not download CIFAR-10")
    data.load("cifar10")
    DATASET = "cifar10"
except data.DatasetUnavailable as e:
    print(f"CIFAR-10 unavailable ({e})\n-> using the offline 'shapes' dataset instead.")
    DATASET = "shapes"
print(data.info(DATASET).description)

# %% [markdown]
# ### Train it, with early stopping
#
# The seeds trained with a per-core batch of 512 on a TPU v2-8 (a global batch of 4,096) and
# `EarlyStopping` on `val_loss`. `RunConfig(early_stopping=PATIENCE)` adds exactly that callback:
# training ends once `val_loss` has not improved for `PATIENCE` epochs. The sizes below depend on the
# runtime, so that a CPU finishes in minutes.

# %%
PLANS = {  # per-replica batch, epochs, training examples (None: all)
    "tpu": dict(batch_size=512, epochs=100, dataset_size=None),
    "gpu": dict(batch_size=256, epochs=40, dataset_size=None),
    "cpu": dict(batch_size=128, epochs=8, dataset_size=10_000),
}
plan = dict(batch_size=32, epochs=3, dataset_size=512, steps_per_epoch=4) if SMOKE else PLANS[runtime.kind]
PATIENCE = 1 if SMOKE else 5

config = tpukit.RunConfig(dataset=DATASET, model="cnn", early_stopping=PATIENCE, logdir=LOGDIR,
                          name="cifar-cnn", **plan)
result = tpukit.train(config, runtime)
print(result.summary())

# %% [markdown]
# **What you should see:** `COMPLETED`, the epochs done (fewer than asked if early stopping fired, with a
# line saying after which epoch), the final metrics, examples per second and the step time. On the CPU the
# first step takes several seconds: that is tracing the training function, not training.

# %%
history = pd.DataFrame(result.history)
ax = history[["loss", "val_loss"]].plot(marker="o", title=f"CNN on {DATASET}")
ax.set_xlabel("epoch")
plt.show()

# %% [markdown]
# ## EarlyStopping and evaluate
#
# `EarlyStopping(monitor="val_loss", patience=p)` counts the epochs since the best `val_loss` so far; an epoch that
# improves on the best resets the count, and training stops once `p` epochs in a row have not improved. With
# `restore_best_weights=True` (what tpukit sets) the model then goes back to the best epoch's weights.

# %%
val_loss = result.history["val_loss"]
best = int(np.argmin(val_loss))
print(f"best val_loss {val_loss[best]:.4f} at epoch {best + 1} of {len(val_loss)} run "
      f"({'stopped early' if result.epochs_done < config.epochs else 'ran every epoch'}, patience {PATIENCE})")

# %% [markdown]
# ### Exercise 1: when does early stopping stop?
#
# A run of up to 20 epochs with `patience=2` records these validation losses, one per epoch:
#
# `0.90, 0.72, 0.65, 0.66, 0.61, 0.63, 0.64, 0.60, 0.59, ...`
#
# **Predict `EPOCHS_RUN`**: how many epochs run before `EarlyStopping` stops training? The self-check feeds these
# losses to Keras' own `EarlyStopping` callback, epoch by epoch, and counts.

# %% tags=["exercise"]
EPOCHS_RUN = ...  # YOUR PREDICTION: the number of epochs that run

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    EPOCHS_RUN = 7  # best 0.61 at epoch 5 (the 0.66 at epoch 4 did not stop it); 6 and 7 do not improve: stop

# %% tags=["self-check"]
# Self-check: drive Keras' EarlyStopping with these losses
answered(EPOCHS_RUN, "count the epochs since the best loss so far; an improvement resets the count to 0")
losses = [0.90, 0.72, 0.65, 0.66, 0.61, 0.63, 0.64, 0.60, 0.59] + [0.58] * 11
probe = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
stopper.set_model(probe)
probe.stop_training = False  # what fit does before the first epoch
stopper.on_train_begin()
for epoch, loss in enumerate(losses):
    stopper.on_epoch_end(epoch, {"val_loss": loss})
    if probe.stop_training:
        break
print(f"predicted {EPOCHS_RUN}, Keras stopped after epoch {epoch + 1}; the best weights kept: epoch "
      f"{losses.index(min(losses[:epoch + 1])) + 1}")
assert EPOCHS_RUN == epoch + 1, "not quite: after the best epoch, `patience` more epochs run without improving"
print("Exercise 1: correct.")

# %% [markdown]
# ### Evaluate the saved weights
#
# The engine validates on `validation_split` (10%) of the *training* data, split with the run's seed, and
# early stopping chooses its epoch on that. The test split stays held out: the engine evaluates it once,
# after training, into `result.test_metrics`. Every run also saves its final weights to `model.weights.h5`
# in its run directory. Rebuild the model in the scope and under the run's precision, load them, and
# `evaluate` on the test split: the numbers match `result.test_metrics`, the same weights on the same batches.
# This repeats the engine's one test evaluation to show how; it chooses nothing. Early stopping, and any choice
# you make between runs, uses the validation figures: look at the test split once, at the end.

# %%
dataset = data.load(DATASET, size=config.dataset_size, seed=config.seed)  # NumPy arrays: train and test splits
with precision.policy(result.config["precision"]), runtime.strategy.scope():
    restored = models.build("cnn", input_shape=dataset.info.image_shape, num_classes=dataset.info.num_classes)
    restored.load_weights(os.path.join(result.run_dir, "model.weights.h5"))
    restored.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
scores = restored.evaluate(dataset.x_test, dataset.y_test, batch_size=config.batch_size * runtime.replicas,
                           verbose=0, return_dict=True)
print(f"test accuracy {scores['accuracy']:.4f} (the engine's: {result.test_metrics['accuracy']:.4f}; "
      f"validation: {result.validation_metrics['accuracy']:.4f})")
assert abs(scores["accuracy"] - result.test_metrics["accuracy"]) < 1e-3

# %% [markdown]
# ## Your own model, through the same engine
#
# Nothing above needs tpukit's zoo. `tpukit.train` takes **a function that builds your model** and **your
# own data**: NumPy arrays `(x, y)`, a dict of named inputs with `y`, or a `tf.data.Dataset` of unbatched
# `(x, y)`. It calls your function inside the strategy's scope and the precision policy (where variables must
# be made), splits off the validation set with the run's seed, feeds batches in an order fixed by
# `(seed, epoch)`, and records the run like any other: resume, the panel and the profile all work the same.
#
# Your function may take no argument, or one: a `DataSpec` with what the data says (`input_shape`,
# `input_dtype`, `num_classes`, ...). If it returns a compiled model, your `compile()` wins; otherwise tpukit
# compiles with `RunConfig.loss` and `RunConfig.metrics` (classification by default; `loss="mse"` for
# regression).
#
# Here the data is plain NumPy arrays, the way your own images would arrive.

# %%
mine = data.load("shapes", size=512 if SMOKE else 8192, seed=1)
x_mine, y_mine = np.array(mine.x_train), np.array(mine.y_train)  # your arrays: uint8 images, int labels


def my_cnn(spec):
    """A small CNN of your own: two conv blocks and a classifier head."""
    inputs = keras.Input(spec.input_shape, dtype=spec.input_dtype)
    x = keras.layers.Rescaling(1 / 255)(inputs)
    for filters in (16, 32):
        x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax", dtype="float32")(x)  # float32 out
    return keras.Model(inputs, outputs, name="my_cnn")


own = tpukit.train(tpukit.RunConfig(epochs=2 if SMOKE else 8, batch_size=32, logdir=LOGDIR, name="my-cnn"),
                   runtime, model=my_cnn, data=(x_mine, y_mine))
print(own.summary())

# %% [markdown]
# **What you should see:** the run named after your function, `validation:` metrics from the 10% split,
# examples per second, and an MFU: tpukit asked TensorFlow's graph (or XLA on JAX) how many FLOPs your
# model costs, so the figure holds for a model it has never seen.
#
# ### Exercise 2: predict the split, then train
#
# You hand `tpukit.train` **1,000** examples with the default `validation_split=0.1` and a per-replica batch of 32
# on this runtime (`runtime.replicas` replicas, printed above). **Predict `N_VALIDATION`**, the examples held out
# for validation, and **`STEPS_PER_EPOCH`**, the training steps in one epoch. The self-check trains one epoch
# (a few seconds) and reads both from the run.

# %% tags=["exercise"]
N_VALIDATION = ...  # YOUR PREDICTION: examples held out for validation
STEPS_PER_EPOCH = ...  # YOUR PREDICTION: training steps in one epoch

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    N_VALIDATION = round(0.1 * 1000)  # 100
    STEPS_PER_EPOCH = (1000 - N_VALIDATION) // (32 * runtime.replicas)  # whole global batches only: 28 on 1 replica

# %% tags=["self-check"]
# Self-check: train one epoch and read the run
answered(N_VALIDATION, "10% of all the examples are held out")
answered(STEPS_PER_EPOCH, "the rest is cut into whole global batches (32 x replicas); the remainder is dropped")
split_data = data.load("shapes", size=1000, seed=2)
split_run = tpukit.train(tpukit.RunConfig(model="mlp", epochs=1, batch_size=32, logdir=LOGDIR, name="the-split"),
                         runtime, data=(np.array(split_data.x_train), np.array(split_data.y_train)))
spec = split_run.data["spec"]
print(f"measured: {spec['num_train']} training and {spec['num_validation']} validation examples, "
      f"{split_run.steps_per_epoch} steps of {32 * runtime.replicas}")
assert N_VALIDATION == spec["num_validation"], "not quite: the split rounds 10% of all 1,000 examples"
assert STEPS_PER_EPOCH == split_run.steps_per_epoch, "not quite: only whole global batches (32 x replicas) count"
print("Exercise 2: correct.")

# %% [markdown]
# ## How batch size scales
#
# A training step has a fixed cost (launching the step, all-reducing gradients, Python) and a cost per
# example. Larger batches spread the fixed cost over more examples, until the hardware is full. On a TPU
# the 128x128 matrix units are full only from about 128 examples per core (notebook 05); the seeds used 512.
#
# Here we measure examples per second for a few per-replica batch sizes, for the CNN and for a small MLP.
# Each run is short (one epoch of a few steps; the first step, which traces, is left out of the figures).

# %%
BATCHES = (8, 32) if SMOKE else {"tpu": (64, 128, 256, 512, 1024), "gpu": (32, 64, 128, 256, 512),
                                      "cpu": (8, 16, 32, 64, 128)}[runtime.kind]
STEPS = 4 if SMOKE else 20
SCALING_SIZE = 1024 if SMOKE else 20_000  # enough examples for the largest global batch
scaling = []
for model_name in ("mlp", "cnn"):
    for batch in BATCHES:
        run = tpukit.train(config.replace(model=model_name, dataset="shapes", dataset_size=SCALING_SIZE,
                                          batch_size=batch, epochs=1, steps_per_epoch=STEPS, early_stopping=None,
                                          name=f"scaling-{model_name}-{batch}"), runtime)
        scaling.append({"model": model_name, "global_batch": batch * runtime.replicas,
                        "examples_per_sec": run.examples_per_sec, "step_time_ms": run.step_time_ms})
scaling = pd.DataFrame(scaling)
scaling.pivot(index="global_batch", columns="model", values="examples_per_sec").round(0)

# %%
ax = scaling.pivot(index="global_batch", columns="model", values="examples_per_sec").plot(marker="o", logx=True)
ax.set_ylabel("examples / s")
ax.set_title(f"Throughput vs global batch on {runtime.kind.upper()}")
plt.show()

# %% [markdown]
# **What you should see:** on a CPU the MLP gets several times faster with bigger batches (its steps are
# mostly fixed cost), while the CNN stays flat or even slows a little: its convolutions already keep the
# cores busy at a batch of 8. On a GPU or TPU both curves rise much further, and the CNN's flattens only when the device is full.
#
# For context, the seeds' run on a TPU v2-8 (8 cores x 512 = 4,096 per step):

# %%
seed_run = dict(step_ms=88, steps_per_epoch=13, global_batch=8 * 512, epochs=73, test_accuracy=0.676)
print(f"{seed_run['global_batch'] / (seed_run['step_ms'] / 1000):,.0f} examples/s, "
      f"{seed_run['steps_per_epoch'] * seed_run['step_ms'] / 1000:.2f} s per epoch, "
      f"~{seed_run['epochs'] * seed_run['steps_per_epoch'] * seed_run['step_ms'] / 1000:.0f} s of steps "
      f"for {seed_run['epochs']} epochs -> {seed_run['test_accuracy']:.1%} test accuracy")

# %% [markdown]
# 13 steps per epoch is 50,000 / 4,096 rounded *up*: that notebook kept the last, partial batch. tpukit
# drops it, so every batch has the same static shape, which TPUs need and XLA prefers.
#
# ### Exercise 3: the seeds' run on today's Colab TPU
#
# Colab's free TPU is now one v5e chip, not 8 cores. Keep the seeds' per-replica batch of 512 and CIFAR-10's
# 50,000 training images minus tpukit's 10% validation split. **Predict `STEPS_ON_V5E1`**, the steps per epoch
# tpukit runs there. The self-check asks tpukit's own step count (the function the trainer, the panel and the CLI
# call) for 1 replica.

# %% tags=["exercise"]
STEPS_ON_V5E1 = ...  # YOUR PREDICTION: steps per epoch with 1 replica x 512

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    STEPS_ON_V5E1 = (50_000 - 5_000) // 512  # 45,000 training images in whole batches of 512: 87 (the rest dropped)

# %% tags=["self-check"]
# Self-check: tpukit's step count
answered(STEPS_ON_V5E1, "45,000 training images (after the 10% validation split), whole batches of 1 x 512")
from tpukit.data import pipeline

measured = pipeline.steps_per_epoch(50_000 - round(0.1 * 50_000), 512 * 1)
print(f"predicted {STEPS_ON_V5E1}, tpukit runs {measured} steps per epoch")
assert STEPS_ON_V5E1 == measured, "not quite: divide by the global batch (512 x 1 replica) and round *down*"
print("Exercise 3: correct. Each step carries 512 images, an eighth of the seeds' 4,096.")

# %% [markdown]
# ## Every run is recorded
#
# Each `tpukit.train` call wrote `config.json` and `result.json` into its own directory under `LOGDIR`
# (runs of earlier sessions included; a killed run, with no throughput yet, is left out of the table).
# `records.list_runs` reads them back and `records.compare` makes one row per run: the table you want
# when you come back to an experiment a week later.

# %%
table = pd.DataFrame(records.compare(records.list_runs(LOGDIR))).dropna(subset=["examples_per_sec"])
table[["run", "status", "model", "dataset", "precision", "global_batch_size", "examples_per_sec",
       "step_time_ms", "val_accuracy"]].round(3)

# %% [markdown]
# ## What changes between TPU, GPU and CPU runtimes
#
# | | TPU | GPU | CPU |
# |---|---|---|---|
# | Strategy from `connect()` | one replica per TPU device (1 on Colab's free v5e chip, 8 on Kaggle's v5e-8 or a v2-8): Keras on JAX with `keras.distribution` on Colab's TPU runtime, TPUStrategy with TensorFlow on a TPU node | MirroredStrategy over the GPUs | default (one replica), or simulated replicas |
# | Precision `auto` | `mixed_bfloat16` | `mixed_float16` from compute capability 7.0 | `mixed_bfloat16` only where measured faster |
# | Batch per replica | 128 or more, a multiple of 128 | a multiple of 8 | small is fine; the CNN is compute-bound |
# | Plan used above | 512 per replica, up to 100 epochs | 256 per GPU, up to 40 epochs | 128, 8 epochs on 10,000 images |
# | First step | XLA compiles the whole step: tens of seconds | a few seconds | a few seconds |
#
# Colab's TPU runtime is a TPU VM with JAX and Keras 3 and no TensorFlow. There the first cell picks
# `KERAS_BACKEND=jax`, and tpukit runs Keras 3 on JAX, on the TPU (`connect()` says `jax` in its first line, and
# the strategy is `OneDevice` on the one chip, a `keras.distribution.DataParallel` over several). Every cell of
# this notebook runs there unchanged;
# notebook 07 goes further on JAX: several devices and several processes.

# %% [markdown]
# ## Your trained model in hand
#
# Keras' `fit` trains the model you call it on; `tpukit.train` hands the trained model back too:
# `result.model` is a `keras.Model`, usable outside the strategy's scope like any other. (A built model you pass
# to `train` is trained in place where the strategy allows it, and the one-line note says so; where a strategy
# needs its own copy, your object is left as it was, and `result.model` is the trained copy.)
#
# Here is your CNN on a few test images: its prediction above each one, in green where it matches the label.

# %%
from tpukit.data.shapes import SHAPE_CLASSES

trained = own.model
x_show, y_show = np.array(mine.x_test[:12]), np.array(mine.y_test[:12])
predicted = trained.predict(x_show, verbose=0).argmax(axis=1)
fig, axes = plt.subplots(2, 6, figsize=(9, 3.4))
for ax, image, guess, label in zip(axes.flat, x_show, predicted, y_show):
    ax.imshow(image)
    ax.set_title(f"{SHAPE_CLASSES[guess]}\n(label: {SHAPE_CLASSES[label]})", fontsize=8,
                 color="green" if guess == label else "red")
    ax.axis("off")
fig.suptitle(f"my_cnn after {own.epochs_done} epochs: {np.mean(predicted == y_show):.0%} of these right")
plt.tight_layout()
plt.show()

# %% [markdown]
# ### Save it, load it back
#
# `result.export(path)` writes a `.keras` file that plain `keras.saving.load_model` opens, with float32 layers
# (a model trained in `mixed_bfloat16` runs anywhere), and on TensorFlow a SavedModel for serving beside it.
# `tpukit.load(run_dir)` rebuilds a run's model from its directory, in this session or a new one: the run records
# the zoo name or import path of its model; a function defined in a notebook is passed again as `model=`.
# (The CLI does the same: `python -m tpukit export RUN_DIR PATH`.)

# %%
exported = own.export(os.path.join(LOGDIR, "exports", "my_cnn.keras"))
print(exported.note)
reloaded = keras.saving.load_model(exported.keras_path)
again = tpukit.load(own.run_dir, model=my_cnn)
print(f"history epochs: {len(again.history['loss'])}, final weights fingerprint {again.result.fingerprint}")
same = np.abs(reloaded.predict(x_show, verbose=0) - trained.predict(x_show, verbose=0)).max()
print(f"largest difference between the saved file's predictions and the trained model's: {same:.2g}")
assert same < 1e-2 and np.array_equal(again.model.predict(x_show, verbose=0).argmax(1), predicted)

# %% [markdown]
# ### Fine-tune from the run
#
# "Now train the same model longer at a lower learning rate": `RunConfig(init_from=run_dir)` starts a new run
# from that run's final weights (with a fresh optimizer), and records where it started. With `deterministic=True`
# the same `init_from` and seed give the same weights again. In the panel, the Runs section's
# "Start next run from it" does the same.

# %%
fine = tpukit.train(tpukit.RunConfig(epochs=1 if SMOKE else 4, batch_size=32, learning_rate=1e-4, logdir=LOGDIR,
                                     name="my-cnn-fine-tuned", init_from=own.run_dir),
                    runtime, model=my_cnn, data=(x_mine, y_mine))
print(fine.summary())
print("started from:", fine.config["init_from"])
print(f"validation accuracy: {own.validation_metrics['accuracy']:.3f} before, "
      f"{fine.validation_metrics['accuracy']:.3f} after fine-tuning")

# %% [markdown]
# **What you should see:** the fine-tuned run's `init_from` naming your first run, and a validation accuracy that
# starts where that run ended (at full size it usually gains a little more; the smoke test runs one epoch).
