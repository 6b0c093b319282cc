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
# # Keras training: the classic Colab CIFAR CNN through tpukit
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/27<br>
# **Description:** Train the classic Colab CIFAR-10 CNN with plain Keras (`fit` with `validation_split` and
# `EarlyStopping`, then `evaluate`), then through tpukit's engine; your own model; `steps_per_execution`; how batch
# size scales.<br>
# **Accelerator:** TPU, GPU or CPU (any runtime; sizes adapt to it)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/04_keras_training.ipynb)

# %% [markdown]
# ## What you will learn
#
# - What the old `detect_strategy()` helper did (TPU, else MirroredStrategy, else the default strategy)
#   and how `tpukit.connect()` replaces it, on TensorFlow and on JAX.
# - Why the model, its optimizer and its metrics are built inside the strategy's (or distribution's) scope.
# - How to train the classic Colab CIFAR-10 CNN with plain Keras: `model.fit` with `validation_split` and
#   `keras.callbacks.EarlyStopping`, then `model.evaluate` once on the test split; and how many examples
#   `validation_split` holds out and how many steps an epoch then runs.
# - What `tpukit.train` adds to the same training: a run directory with its config and results, resume, one table
#   of runs, and an offline fallback dataset.
# - How `EarlyStopping` on `val_loss` ends a run and keeps the best weights.
# - How to train **your own** Keras model on your own NumPy arrays through the same engine.
# - What `compile(steps_per_execution=...)` changes; after class (the extra at the end), how examples per second
#   change with the global batch size, measured on the hardware at hand.
# - How every run is recorded, and how to compare runs in one table.
# - How to get the trained model back: predict with it, save it as `.keras`, and load it back; after class, fine-tune
#   from a run.
# - How to save the plain Keras way, as you will after the workshop: `model.save`, `keras.callbacks.ModelCheckpoint` and
#   `model.export`, into Google Drive, which outlives Colab's VM.
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

# %%
import os

import keras
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import tpukit
from tpukit import data
from tpukit import models
from tpukit import precision
from tpukit.runs import records
from tpukit.teaching import SOLUTIONS, answered, check  # the exercises' answers and self-checks

LOGDIR = os.path.join("runs", "04-keras-training")  # every run gets a directory in here
runtime = tpukit.connect()  # the next section says what this does

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
# replica, plus a line for the TPU and the GPU saying why each was skipped. On Colab's T4 runtime, `Connected:
# GPU` and TensorFlow's default strategy (`_DefaultDistributionStrategy`, one replica: plain `fit` on one GPU;
# `MirroredStrategy` comes with a second GPU); on Colab's TPU runtime, `jax` in the first line and one replica per TPU device:
# 1 on Colab's TPU runtime (one v5e or v6e chip), 8 on Kaggle's v5e-8 or a v2-8/v3-8 board.

# %% [markdown]
# ## Model and metrics in the strategy's scope
#
# Variables created inside `strategy.scope()` belong to the strategy: under MirroredStrategy or TPUStrategy
# each one is a *mirrored* variable, with one copy per replica kept equal by all-reduce. So the model, its
# optimizer and its metrics are all created inside the scope; `compile` in the scope as well. Swap the strategy
# and the same code distributes differently. Keras 3 on JAX has the same shape: a `keras.distribution`
# `DataParallel` has a `scope()` too, and variables built in it are replicated over its devices (each holds a
# whole copy, laid out by a sharding). `tpukit.train` enters the right scope for you; here it is by hand.
#
# The model is the seeds' CIFAR CNN, written out in plain Keras below so you can change it: two blocks of two 3x3
# convolutions (64, then 128 filters) with BatchNorm and ReLU, a max-pool after each block, then global average
# pooling and a 256-unit Dense layer, and a float32 softmax (notebook 02 says why float32). It is the model
# tpukit's zoo builds as `"cnn"` (`models.build("cnn")`, which the runs below name), layer for layer.

# %%
def cifar_cnn(input_shape=(32, 32, 3), num_classes=10):
    """The seeds' CIFAR CNN (BatchNorm where it had Dropout; global average pooling instead of Flatten)."""
    inputs = keras.Input(input_shape, dtype="uint8", name="images")
    x = keras.layers.Rescaling(1.0 / 255, name="rescale")(inputs)  # uint8 pixels to [0, 1]
    for filters in (64, 128):
        for _ in range(2):
            x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)  # BatchNorm's offset is the bias
            x = keras.layers.BatchNormalization(momentum=0.9)(x)
            x = keras.layers.ReLU()(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(256, activation="relu")(x)
    x = keras.layers.Dense(num_classes, name="logits")(x)
    outputs = keras.layers.Activation("softmax", dtype="float32", name="probabilities")(x)
    return keras.Model(inputs, outputs, name="cifar_cnn")


with runtime.strategy.scope():
    model = cifar_cnn()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

kernel = model.weights[0].value  # the backend's variable under the Keras variable
zoo = models.build("cnn", input_shape=(32, 32, 3), num_classes=10)
assert [w.shape for w in model.weights] == [w.shape for w in zoo.weights]  # the zoo's "cnn", layer for layer
print(f"{model.count_params():,} parameters (the zoo's cnn: {zoo.count_params():,}); first kernel is a "
      f"{type(kernel).__name__}")
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
# CIFAR-10 (50,000 training and 10,000 test images, 32x32x3, 10 classes) comes from
# `keras.datasets.cifar10.load_data()`, which downloads `cifar-10-python.tar.gz` (170 MB) from
# www.cs.toronto.edu/~kriz once and caches it under `~/.keras/datasets`. `tpukit.data.load("cifar10")` calls
# exactly that, after checking that the host can be reached, and raises `tpukit.data.DatasetUnavailable` instead
# of hanging when the download cannot happen. Then this notebook falls back to `shapes`: generated 32x32x3 images
# of four coloured shapes, the same input shape, offline and of any size. (The smoke test never downloads.)

# %%
try:
    if SMOKE and not data.cached("cifar10"):
        raise data.DatasetUnavailable("the smoke test does not download CIFAR-10")
    data.load("cifar10")  # keras.datasets.cifar10.load_data(): 170 MB, the first time only
    DATASET = "cifar10"
except data.DatasetUnavailable as e:
    print(f"CIFAR-10 unavailable ({str(e).splitlines()[0]}): using the offline 'shapes' dataset instead.")
    DATASET = "shapes"
print(data.info(DATASET).description)

# %% [markdown]
# ### How long: about 3 minutes a training cell
#
# The seeds trained with a per-core batch of 512 on a TPU v2-8 (a global batch of 4,096) for 73 epochs. Here
# the epochs are capped so that each training cell below takes about 3 minutes at most on a T4 or a v5e-1: the CNN
# costs 0.58 GFLOP per training example (`tpukit.models.flops`), 26 TFLOP an epoch of 45,000 images; at an assumed
# 2.5 TFLOP/s on a T4 (4% of its float16 peak) that is 12 epochs in about 2 minutes, at 10 TFLOP/s on a v5e-1
# (5%) 30 epochs in under 2. The CPU plan, 5 epochs of 5,000 images, takes about 90 s on Colab's 2-core CPU.
# Every run prints its own examples per second, the figure to trust. For the seeds' 67.6%, raise the epochs.

# %%
PLANS = {  # per-replica batch, epochs (a cap: early stopping may stop sooner), training examples (None: all)
    "tpu": dict(batch_size=512, epochs=30, dataset_size=None),
    "gpu": dict(batch_size=256, epochs=12, dataset_size=None),
    "cpu": dict(batch_size=128, epochs=5, dataset_size=5_000),
}
plan = dict(batch_size=32, epochs=3, dataset_size=512) if SMOKE else PLANS[runtime.kind]
PATIENCE = 1 if SMOKE else 3
GLOBAL_BATCH = plan["batch_size"] * runtime.replicas  # Keras' batch_size is the global batch
cifar = data.load(DATASET, size=plan["dataset_size"])  # NumPy arrays: uint8 images, int32 labels
print(f"{len(cifar.x_train):,} training and {len(cifar.x_test):,} test images, global batch {GLOBAL_BATCH}, "
      f"up to {plan['epochs']} epochs")

# %% [markdown]
# ### Plain Keras: `fit` with `validation_split` and `EarlyStopping`, then `evaluate`
#
# The whole recipe in plain Keras, the code to take home. `validation_split=0.1` holds out the *last* 10% of the
# training arrays (taken before shuffling) for validation. `EarlyStopping(monitor="val_loss", patience=PATIENCE,
# restore_best_weights=True)` ends training once `val_loss` has not improved for `PATIENCE` epochs, and puts the
# best epoch's weights back. `evaluate` scores the test split once, at the end. The precision is the one
# `connect()` recommends, set the Keras 3 way with `keras.config.set_dtype_policy` (notebook 02), and put back
# to float32 afterwards. The model is `cifar_cnn` from above.
#
# Where `fit` runs matters. With TensorFlow, the model keeps the `tf.distribute` strategy it was built in, so
# `fit` may be called outside the scope. Keras on JAX looks the distribution up when `fit` runs, so there `fit`
# and `evaluate` go inside the scope too (or set the distribution for the whole session with
# `keras.distribution.set_distribution`). Everything inside the scope, as here, is right on both.

# %%
# Over several JAX devices every batch, the last, partial one included, must split evenly across them: so keep
# a multiple of 10 x replicas (then the 90% / 10% split and the test split are whole multiples of the replicas).
keep, keep_test = (len(a) - len(a) % (10 * runtime.replicas) for a in (cifar.x_train, cifar.x_test))
keras.config.set_dtype_policy(runtime.precision)  # e.g. mixed_bfloat16 on a TPU, mixed_float16 on a T4
with runtime.strategy.scope():
    keras_model = cifar_cnn(cifar.info.image_shape, cifar.info.num_classes)
    keras_model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=PATIENCE, restore_best_weights=True)
    fitted = keras_model.fit(cifar.x_train[:keep], cifar.y_train[:keep], validation_split=0.1,
                             batch_size=GLOBAL_BATCH, epochs=plan["epochs"], callbacks=[stopper], verbose=2)
    test_scores = keras_model.evaluate(cifar.x_test[:keep_test], cifar.y_test[:keep_test], batch_size=GLOBAL_BATCH,
                                       verbose=0, return_dict=True)
keras.config.set_dtype_policy("float32")  # back to the default for the cells below
print(f"{len(fitted.epoch)} epochs ({'stopped early' if stopper.stopped_epoch else 'every epoch'}); "
      f"test accuracy {test_scores['accuracy']:.3f}")

# %% [markdown]
# **What you should see:** one line per epoch with `loss`, `accuracy`, `val_loss` and `val_accuracy`, then the
# test accuracy. On the CPU the first epoch is slower: it includes tracing and compiling the training step.
#
# ### Exercise 1: what `validation_split` holds out, and the steps in an epoch
#
# You call `model.fit(x, y, validation_split=0.1, batch_size=32, epochs=1)` on **1,000** examples, on one device.
# **Predict `N_VALIDATION`**, the examples Keras holds out for validation, and **`STEPS_PER_EPOCH`**, the training
# steps it runs in that epoch. The self-check runs that `fit` on a tiny model and counts both with a callback:
# the training steps, and the validation batches with `validation_batch_size=1` (one example each).

# %% tags=["exercise"]
N_VALIDATION = ...  # YOUR PREDICTION: examples held out for validation
STEPS_PER_EPOCH = ...  # YOUR PREDICTION: training steps in one epoch

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["N_VALIDATION, STEPS_PER_EPOCH = 100, 28", "N_VALIDATION, STEPS_PER_EPOCH = 100, 32", "N_VALIDATION, STEPS_PER_EPOCH = 10, 29"]
# @title Solution
if SOLUTIONS:
    N_VALIDATION = 100  # the last 10% of the 1,000 examples
    STEPS_PER_EPOCH = 29  # 900 examples in batches of 32: 28 full ones and a last one of 4, which Keras keeps

# %% tags=["self-check"]
# Self-check: run that fit and count
answered(N_VALIDATION, "validation_split=0.1 holds out 10% of all the examples")
answered(STEPS_PER_EPOCH, "the other examples go in batches of 32; does Keras keep the last, smaller batch?")


class CountBatches(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.train, self.validation = 0, 0

    def on_train_batch_end(self, batch, logs=None):
        self.train += 1

    def on_test_batch_end(self, batch, logs=None):
        self.validation += 1


counted = CountBatches()
split_probe = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
split_probe.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
split_probe.fit(np.zeros((1000, 4), "float32"), np.zeros(1000, "int32"), validation_split=0.1, batch_size=32,
                validation_batch_size=1, epochs=1, verbose=0, callbacks=[counted])
print(f"predicted {N_VALIDATION} validation examples and {STEPS_PER_EPOCH} steps; "
      f"Keras validated on {counted.validation} examples and ran {counted.train} training steps")
check(N_VALIDATION == counted.validation, "validation_split holds out that fraction of all the examples")
check(STEPS_PER_EPOCH == counted.train, "Keras keeps the last, partial batch: the training examples over 32, "
      "rounded up")
print("Exercise 1: correct.")

# %% [markdown]
# ### The same through `tpukit.train`
#
# `tpukit.train` runs the same recipe from a `RunConfig`: it builds the model in the strategy's scope under the
# recommended precision, holds out `validation_split` (10%) of the training data, adds exactly the
# `EarlyStopping` above for `early_stopping=PATIENCE`, and evaluates the test split once, at the end. What it
# adds: every run gets a directory under `LOGDIR` with its config, history, results and final weights (the table
# of runs below reads them back); a killed run resumes from its last whole epoch
# (`python -m tpukit train --resume RUN_DIR`, notebook 06); and the panel and the command line start the same
# run. Two things differ from plain `fit`: the validation examples are a random choice fixed by the run's seed,
# not the last 10%; and the last, partial batch is dropped, so that every step has the same static shape: on JAX
# (and under XLA on TensorFlow) a partial batch is a new shape, which XLA compiles into a second program, and it
# need not split evenly over the replicas.

# %%
config = tpukit.RunConfig(dataset=DATASET, model="cnn", early_stopping=PATIENCE, logdir=LOGDIR, name="cifar-cnn",
                          steps_per_epoch=4 if SMOKE else None, **plan)
result = tpukit.train(config, runtime)
print(result.summary())
print(f"test accuracy: {test_scores['accuracy']:.3f} with plain Keras, {result.test_metrics['accuracy']:.3f} "
      f"with tpukit; run directory {result.run_dir}")

# %% [markdown]
# **What you should see:** `COMPLETED`, the epochs done (fewer than asked if early stopping fired, with a
# line saying after which epoch), the final metrics, examples per second and the step time, and a test accuracy
# close to plain Keras' (the two runs differ in their random initialisation and validation examples).
#
# On the 1,000 examples of Exercise 1, tpukit holds out 100 too, and runs 28 steps of 32, where `fit` ran 29:

# %%
split_data = data.load("shapes", size=1000, seed=2)
split_run = tpukit.train(tpukit.RunConfig(model="mlp", epochs=1, batch_size=32, logdir=LOGDIR, name="the-split"),
                         runtime, data=(np.array(split_data.x_train), np.array(split_data.y_train)))
print(f"tpukit: {split_run.data['spec']['num_validation']} validation examples, {split_run.steps_per_epoch} steps "
      f"of {32 * runtime.replicas} (the {900 % (32 * runtime.replicas)} left over sit this epoch out)")

# %%
history = pd.DataFrame({"plain Keras": pd.Series(fitted.history["val_loss"]),
                        "tpukit": pd.Series(result.history["val_loss"])}, dtype=float)
history.index += 1
ax = history.plot(marker="o", title=f"val_loss of the CNN on {DATASET}")
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
# ### Evaluate the saved weights
#
# The engine validates on `validation_split` (10%) of the *training* data, split with the run's seed, and
# early stopping chooses its epoch on that. The test split stays held out: the engine evaluates it once,
# after training, into `result.test_metrics`. Every run also saves its final weights to `model.weights.h5`
# in its run directory. Rebuild the model in the scope and under the run's precision, load them, and
# `evaluate` on the test split (in the scope too, as `fit` above): the numbers match `result.test_metrics`, the same weights on the same batches.
# This repeats the engine's one test evaluation to show how; it chooses nothing. Early stopping, and any choice
# you make between runs, uses the validation figures: look at the test split once, at the end.

# %%
dataset = data.load(DATASET, size=config.dataset_size, seed=config.seed)  # NumPy arrays: train and test splits
with precision.policy(result.config["precision"]), runtime.strategy.scope():
    restored = models.build("cnn", input_shape=dataset.info.image_shape, num_classes=dataset.info.num_classes)
    restored.load_weights(os.path.join(result.run_dir, "model.weights.h5"))
    restored.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    scores = restored.evaluate(dataset.x_test, dataset.y_test, batch_size=config.batch_size * runtime.replicas,
                               verbose=0, return_dict=True)  # in the scope: on JAX, evaluate reads it as it runs
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

# %% [markdown]
# ## How batch size scales
#
# A training step has a fixed cost (launching the step, all-reducing gradients, Python) and a cost per
# example. Larger batches spread the fixed cost over more examples, until the hardware is full. A TPU multiplies
# matrices in its MXUs: a v5e has four MXUs of 128x128 per TensorCore and 197 bfloat16 TFLOP/s per chip
# (cloud.google.com/tpu/docs/v5e), a v6e two of 256x256 and 918 TFLOP/s (cloud.google.com/tpu/docs/v6e). XLA tiles
# every array on a TPU: of a Dense layer's `[batch, features]` it pads the batch to a multiple of 8 and the features
# to a multiple of 128 (the Cloud TPU performance guide, "Consequences of tiling"). So a per-replica batch that is
# a multiple of 8 loses nothing to padding, and layer widths do best as multiples of 128; a larger batch (128 and
# more per replica) keeps the MXUs busier, which is throughput, not padding. The seeds used 512 per core. The extra
# at the end of this notebook measures examples per second for a few batch sizes on the hardware at hand.

# %% [markdown]
# For context, the seeds' run on a TPU v2-8 (8 cores x 512 = 4,096 per step):

# %%
seed_run = dict(step_ms=88, steps_per_epoch=13, global_batch=8 * 512, epochs=73, test_accuracy=0.676)
print(f"{seed_run['global_batch'] / (seed_run['step_ms'] / 1000):,.0f} examples/s, "
      f"{seed_run['steps_per_epoch'] * seed_run['step_ms'] / 1000:.2f} s per epoch, "
      f"~{seed_run['epochs'] * seed_run['steps_per_epoch'] * seed_run['step_ms'] / 1000:.0f} s of steps "
      f"for {seed_run['epochs']} epochs -> {seed_run['test_accuracy']:.1%} test accuracy")

# %% [markdown]
# 13 steps per epoch is 50,000 / 4,096 rounded *up*: that notebook kept the last, partial batch, as `fit` does
# (Exercise 1). tpukit drops it, so every batch has the same static shape and XLA compiles one program, not two.
#
# ### `steps_per_execution`: several steps per call
#
# Part of a step's fixed cost is the host: `fit` calls the compiled training function once per step, and on a TPU
# a small step can end before Python has launched the next one. `model.compile(..., steps_per_execution=N)` runs
# N steps in one call (a loop compiled onto the device), so the host launches once per N steps, and the per-batch
# callbacks run once per call too. tpukit's `RunConfig(steps_per_execution="auto")`, the default, picks the
# largest divisor of the steps per epoch up to 32, so that every epoch ends where a call does (on the CPU, only for
# millisecond steps); the run's summary says what it chose.

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
# | Strategy from `connect()` | one replica per TPU device (1 on Colab's TPU runtime, one v5e or v6e chip; 8 on Kaggle's v5e-8 or a v2-8): Keras on JAX with `keras.distribution` on Colab's TPU runtime, TPUStrategy with TensorFlow on a TPU node | one GPU: the default strategy, as plain `fit`; two or more: MirroredStrategy | default (one replica), or simulated replicas |
# | Precision `auto` | `mixed_bfloat16` | `mixed_float16` from compute capability 7.0 | `mixed_bfloat16` only where measured faster |
# | Batch per replica | a multiple of 8 (XLA pads to it); 128 or more keeps the MXUs busier | a multiple of 8 (Tensor Cores, float16) | small is fine; the CNN is compute-bound |
# | Plan used above | 512 per replica, up to 30 epochs | 256 per GPU, up to 12 epochs | 128, 5 epochs on 5,000 images |
# | First step | XLA compiles the whole step: tens of seconds | a few seconds | a few seconds |
#
# On Colab's TPU runtime (JAX, no TensorFlow) every cell here runs unchanged, on Keras 3 and JAX; notebook 07
# goes further there: several devices and several processes.

# %% [markdown]
# ## Your trained model in hand
#
# Keras' `fit` trains the model you call it on; `tpukit.train` hands the trained model back too:
# `result.model` is a `keras.Model`, usable outside the strategy's scope like any other.
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
print(f"history epochs: {len(again.history['loss'])}, final weights fingerprint {again.fingerprint}")
same = np.abs(reloaded.predict(x_show, verbose=0) - trained.predict(x_show, verbose=0)).max()
print(f"largest difference between the saved file's predictions and the trained model's: {same:.2g}")
assert same < 1e-2 and np.array_equal(again.model.predict(x_show, verbose=0).argmax(1), predicted)

# %% [markdown]
# ### Saving the plain Keras way, and keeping it in Google Drive
#
# What you will do after the workshop, with or without tpukit. `model.save("name.keras")` writes the whole model
# (architecture, weights, and the optimizer's state) into one file that `keras.saving.load_model` opens in any
# Keras session. `keras.callbacks.ModelCheckpoint` does it during `fit`, every epoch (or only the best, with
# `save_best_only=True`). `model.export(path)` writes a TensorFlow SavedModel for serving (TF Serving, TFLite,
# other languages): it needs TensorFlow, which Colab's TPU runtime lacks, so there the cell says so instead.
#
# A Colab VM is wiped when its runtime ends: keep what you save in Google Drive. The first line below mounts it
# in Colab (a browser prompt asks you to allow it); anywhere else it saves to a local folder.

# %%
if "google.colab" in sys.modules:  # Colab: Google Drive outlives the VM
    from google.colab import drive

    drive.mount("/content/drive")
    SAVE_DIR = "/content/drive/MyDrive/tpukit-workshop"
else:  # a laptop, a server, the tests: a folder beside the runs
    SAVE_DIR = os.path.join(LOGDIR, "saved")
os.makedirs(SAVE_DIR, exist_ok=True)

keras_file = os.path.join(SAVE_DIR, "my_cnn.keras")
trained.save(keras_file)  # the whole model, one file
more = keras.saving.load_model(keras_file)  # compiled as it was saved: fit goes on where it left off
checkpoint = keras.callbacks.ModelCheckpoint(os.path.join(SAVE_DIR, "my_cnn.epoch{epoch:02d}.keras"))
more.fit(x_mine, y_mine, batch_size=32, epochs=2, verbose=0, callbacks=[checkpoint])
if importlib.util.find_spec("tensorflow") is not None:
    more.export(os.path.join(SAVE_DIR, "my_cnn_savedmodel"), verbose=False)  # format="tf_saved_model"
else:
    print("model.export skipped: it writes a TensorFlow SavedModel, and this runtime has no TensorFlow")
print(sorted(os.listdir(SAVE_DIR)))
saved = keras.saving.load_model(keras_file).get_weights()
assert all(np.array_equal(a, b) for a, b in zip(saved, trained.get_weights()))  # the file holds the model, exactly

# %% [markdown]
# **What you should see:** `my_cnn.keras`, one checkpoint per epoch (`my_cnn.epoch01.keras`,
# `my_cnn.epoch02.keras`) and, where TensorFlow is installed, the `my_cnn_savedmodel` folder. In Colab they are
# in your Drive, under `tpukit-workshop`.

# %% [markdown]
# ## Extra: two exercises for after class
#
# They practise "EarlyStopping and evaluate" and "How batch size scales".

# %% [markdown]
# ### Exercise 2: when does early stopping stop?
#
# A run of up to 20 epochs with `patience=2` records these validation losses, one per epoch:
#
# `0.90, 0.72, 0.65, 0.66, 0.61, 0.63, 0.64, 0.60, 0.59, ...`
#
# **Predict `EPOCHS_RUN`**: how many epochs run before `EarlyStopping` stops training? The self-check feeds these
# losses to Keras' own `EarlyStopping` callback, epoch by epoch, and counts.

# %% tags=["exercise"]
EPOCHS_RUN = ...  # YOUR PREDICTION: the number of epochs that run

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["EPOCHS_RUN = 6", "EPOCHS_RUN = 9", "EPOCHS_RUN = 20"]
# @title Solution
if SOLUTIONS:
    EPOCHS_RUN = 7  # best 0.61 at epoch 5 (the 0.66 at epoch 4 did not stop it); 6 and 7 do not improve: stop

# %% tags=["self-check"]
# Self-check: drive Keras' EarlyStopping with these losses
answered(EPOCHS_RUN, "count the epochs since the best loss so far; an improvement resets the count to 0")
losses = [0.90, 0.72, 0.65, 0.66, 0.61, 0.63, 0.64, 0.60, 0.59] + [0.58] * 11
stop_probe = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
stop_probe_cb = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
stop_probe_cb.set_model(stop_probe)
stop_probe.stop_training = False  # what fit does before the first epoch
stop_probe_cb.on_train_begin()
for epoch, loss in enumerate(losses):
    stop_probe_cb.on_epoch_end(epoch, {"val_loss": loss})
    if stop_probe.stop_training:
        break
print(f"predicted {EPOCHS_RUN}, Keras stopped after epoch {epoch + 1}; the best weights kept: epoch "
      f"{losses.index(min(losses[:epoch + 1])) + 1}")
check(EPOCHS_RUN == epoch + 1, "after the best epoch, `patience` more epochs run without improving; an epoch "
      "that improves on the best resets the count")
print("Exercise 2: correct.")

# %% [markdown]
# ### Exercise 3: what `steps_per_execution` changes
#
# A `fit` of one epoch over **1,000** examples with `batch_size=50` runs 20 training steps. The model was compiled
# with `steps_per_execution=8`. **Predict `BATCH_END_CALLS`**, how many times Keras calls a callback's
# `on_train_batch_end` in that epoch. The self-check runs that `fit` and counts.

# %% tags=["exercise"]
BATCH_END_CALLS = ...  # YOUR PREDICTION: calls of on_train_batch_end in one epoch of 20 steps

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["BATCH_END_CALLS = 20", "BATCH_END_CALLS = 2", "BATCH_END_CALLS = 8"]
# @title Solution
if SOLUTIONS:
    BATCH_END_CALLS = 3  # one per call of the training function: steps 1-8, 9-16, and the last 4 steps

# %% tags=["self-check"]
# Self-check: run that fit and count the callback's calls
answered(BATCH_END_CALLS, "callbacks run once per call of the training function, and each call runs up to 8 steps")


class CountBatchEnds(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.calls = 0

    def on_train_batch_end(self, batch, logs=None):
        self.calls += 1


batch_ends = CountBatchEnds()
spe_probe = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
spe_probe.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", steps_per_execution=8)
spe_probe.fit(np.zeros((1000, 4), "float32"), np.zeros(1000, "int32"), batch_size=50, epochs=1, verbose=0,
              callbacks=[batch_ends])
print(f"predicted {BATCH_END_CALLS}, Keras called on_train_batch_end {batch_ends.calls} times for 20 steps")
check(BATCH_END_CALLS == batch_ends.calls, "one call per execution of up to 8 steps, and a last, shorter one "
      "for the steps left over")
print("Exercise 3: correct. A progress bar or a per-batch callback sees every 8th step; the host launches 3 times, "
      "not 20.")

# %% [markdown]
# ## Extra: batch sizes measured, and fine-tuning from a run
#
# *Not part of the workshop day: for after class. The sweep trains ten short runs (a few minutes on an
# accelerator); fine-tuning starts from the model you trained above.*
#
# ### Examples per second for a few batch sizes
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
