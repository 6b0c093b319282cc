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
# # Profiling and input pipelines
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/22<br>
# **Description:** TensorBoard inside the notebook, a profile of chosen training steps, a naive vs a tuned tf.data pipeline, XLA and padding waste.<br>
# **Accelerator:** TPU, GPU or CPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/05_profiling_and_input_pipelines.ipynb)

# %% [markdown]
# ## What you will learn
#
# - How to show TensorBoard inside the notebook, bound to 127.0.0.1 (never through a public tunnel).
# - How to capture a profile of a window of training steps and read it: the overview (step time,
#   input-bound or not), the top ops, the trace viewer and the input pipeline analyzer.
# - How a naive input pipeline compares with a tuned one, in examples per second, and how the profile
#   tells an input-bound run from a compute-bound one.
# - What XLA fusion buys, why a TPU wants batch and feature sizes in multiples of 128 (a GPU in multiples of 8),
#   and which ops cost more than they look.

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
import atexit
import os
import tempfile
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import tensorflow as tf
from IPython.display import HTML, Javascript, display

import tpukit
from tpukit import config as tk_config
from tpukit import context, data, models, profiling, tensorboard
from tpukit.ui import embed

LOGDIR = "runs"  # every run and capture of this notebook goes under here
AUTOTUNE = tf.data.AUTOTUNE
runtime = tpukit.connect()
print(runtime.describe())

# %% [markdown]
# ## TensorBoard inline and a profile capture
#
# In Colab (and Jupyter) the TensorBoard magics are the shortest way:
#
# ```
# %load_ext tensorboard
# %tensorboard --logdir runs
# ```
#
# The magic starts TensorBoard on the VM's localhost and Colab shows it through its own port proxy, inside
# the output frame, visible only to you. The 2020 TPU post instead exposed TensorBoard through a public
# tunnel: anyone with the URL could read the runs, and TensorBoard has no login. Never do that.
#
# `tpukit.tensorboard.start` does what the magic does from Python: it reuses a TensorBoard that already
# serves the logdir, or starts one bound to **127.0.0.1**, and returns `Launched`, `Reused` or `Failed`
# (with a message you can act on). `tpukit.ui.embed` then shows it the way the front end allows: Colab's
# port proxy, an iframe in Jupyter, or a plain address elsewhere. (Its Profile tab also has a **Capture
# Profile** button: give it the address of a job's profiler server, notebook 06, and it captures from it.)

# %%
board = tensorboard.start(LOGDIR)
assert not isinstance(board, tensorboard.Failed), board.message
print(board)
if SMOKE and isinstance(board, tensorboard.Launched):
    atexit.register(tensorboard.stop, board)  # the tests leave no TensorBoard behind, even on failure


def show(url, height=600):
    """Show a TensorBoard page (a URL on 127.0.0.1) inside this notebook."""
    view = embed.tensorboard(url, context.detect(), height)
    display(HTML(view.html))
    if view.javascript:
        display(Javascript(view.javascript))


show(board.url)

# %% [markdown]
# ### A profile of chosen training steps
#
# `RunConfig(profile=(start, stop))` profiles that inclusive window of training steps. Skip the first
# steps: they trace and compile the step function, which you do not want to read as step time. tpukit marks
# every profiled step (`tf.profiler.experimental.Trace("train", step_num=n)`), so TensorBoard's overview
# gets its step-time graph. Keras 3.15's own `TensorBoard(profile_batch=...)` marks its steps too, but names
# them "Profiled batch", and XProf counts only steps named `train` or `test` for the step-time graph, so it
# ignores them: the overview of such a capture has no step-time graph (the 2020 post noted it missing).

# %%
PROFILE = (3, 6) if SMOKE else (10, 14)
config = tpukit.RunConfig(dataset="shapes", dataset_size=512 if SMOKE else 8192, model="cnn", batch_size=32,
                          epochs=1, steps_per_epoch=8 if SMOKE else 60, profile=PROFILE, logdir=LOGDIR,
                          name="profiled")
result = tpukit.train(config, runtime)
print(result.summary())
summary = profiling.summarize(result.profile_files[0])
print(summary)

# %% [markdown]
# **What you should see:** the step time over the profiled steps, a verdict on input (`not input-bound`:
# tpukit's own pipeline is the tuned one below), and the ops with the most self time. On a CPU the top ops
# are the convolution gradients (`Conv2DBackpropFilter`, `Conv2DBackpropInput`); on a TPU they are XLA
# fusions and convolutions.
#
# The same capture in TensorBoard's Profile tab (open it there; the link selects this capture):

# %%
show(tensorboard.profile_url(board, result.profile_files[0]))

# %% [markdown]
# ## Reading the overview, the trace and the input pipeline analysis
#
# TensorBoard's Profile tab has one tool per question:
#
# - **Overview page**: the average step time and its *step-time graph* (one bar per profiled step, split
#   into compute, input, host and communication time), the verdict on input, and *recommendations* for the
#   next step. On a TPU it also shows the matrix unit (MXU) utilization: the 2020 post found a naive
#   Keras model at **4.1%** there (see the padding section below).
# - **Top ops / op profile** (TensorFlow stats, HLO op profile on TPU): where the time goes, op by op. A
#   surprise here (a transpose, a slice, a gather) is often a layout or padding problem.
# - **Trace viewer**: a timeline, one row per thread or TPU core. Gaps on the device between steps mean it
#   waited; look at the host rows for what it waited on. Find a step with the `train N` markers.
# - **Input pipeline analyzer**: how much of each step was spent waiting for input, and which `tf.data`
#   stage (map, batch, a generator...) is slow on the host.
# - **Memory profile**: peak memory and what held it; where a bigger batch would run out.
# - **Pod Viewer** (TPU Pods): the step breakdown of every core of a pod side by side, to find the slow one.
# - On GPUs, **GPU kernel stats** list each CUDA kernel and whether it used the Tensor Cores; TensorFlow's
#   GPU performance guide (tensorflow.org/guide/gpu_performance_analysis) walks through a GPU profile.
#
# `profiling.summarize` reads the same capture offline, with no server, into plain values.

# %% [markdown]
# ### Exercise 1: the profile window is inclusive
#
# The capture covered steps `PROFILE[0]` to `PROFILE[1]`. How many step rows should the summary have?

# %%
expected_steps = PROFILE[1] - PROFILE[0] + 1  # answer

# Self-check
assert len(summary.steps) == expected_steps, summary.steps
assert summary.step_time_ms > 0
print(f"Exercise 1: correct ({expected_steps} steps, {summary.step_time_ms:.1f} ms on average).")

# %% [markdown]
# ## A naive pipeline vs a tuned one, measured
#
# Each image gets a random left-right flip. The **naive** pipeline is how many first notebooks look:
# a Python generator yields one example at a time, the flip is mapped per example on one thread, and
# nothing prefetches, so the accelerator waits while the host prepares every batch.
#
# The **tuned** pipeline follows the TPU post's advice:
#
# - `from_tensor_slices` + `cache()`: small data lives in memory after the first pass;
# - `shuffle` **before** `repeat`: every epoch sees each example once (exercise 2);
# - `batch` first, then a **vectorized** `map` over the whole batch: one op call per batch, not per image
#   (tf.data also fuses a `map` followed by `batch` into one stage, the old `map_and_batch`);
# - `num_parallel_calls=AUTOTUNE`: map on several threads;
# - `prefetch(AUTOTUNE)` **last**: the next batches are ready while the device computes.
#
# When preprocessing makes the data *bigger* (decoding JPEGs, crops), put `shuffle` and `interleave`
# before it, on the small records. For many remote files, read them with `interleave` (below).

# %%
BATCH = 128
shapes = data.load("shapes", size=2048 if SMOKE else 8192)
x, y = shapes.x_train, shapes.y_train
spec = (tf.TensorSpec((32, 32, 3), tf.uint8), tf.TensorSpec((), tf.int32))


def examples():
    for i in np.random.permutation(len(x)):
        yield x[i], y[i]


def flip_one(image, label):
    return tf.image.random_flip_left_right(image), label


def flip_batch(images, labels):
    return tf.image.random_flip_left_right(images), labels  # 4-D: each image flipped independently


pipelines = {
    "naive": tf.data.Dataset.from_generator(examples, output_signature=spec).map(flip_one).batch(BATCH).repeat(),
    "parallel per-example map": tf.data.Dataset.from_tensor_slices((x, y)).cache().shuffle(len(x)).repeat()
    .map(flip_one, num_parallel_calls=AUTOTUNE).batch(BATCH, drop_remainder=True).prefetch(AUTOTUNE),
    "tuned": tf.data.Dataset.from_tensor_slices((x, y)).cache().shuffle(len(x)).repeat()
    .batch(BATCH, drop_remainder=True).map(flip_batch, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE),
}


def examples_per_sec(dataset, batches=10 if SMOKE else 50):
    """Read `batches` batches (after a first, warming one) and return examples per second."""
    iterator = iter(dataset)
    next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * BATCH / (time.perf_counter() - start)


speeds = pd.Series({name: examples_per_sec(ds) for name, ds in pipelines.items()}, name="examples/s")
speeds.round(0)

# %%
speeds.plot.barh(title="Input pipeline alone (host CPU)")
plt.xlabel("examples / s")
plt.show()

# %% [markdown]
# **What you should see:** the tuned pipeline delivers ten or more times the naive one's examples per second.
# Does it matter? Only if the model consumes faster than the pipeline produces. The seeds' TPU v2-8 ran the
# CIFAR CNN at 4,096 examples every 88 ms (8 cores: the 2020 Colab TPU; today's free Colab TPU is one v5e chip):

# %%
tpu_demand = 4096 / 0.088
print(f"A TPU v2-8 consumes {tpu_demand:,.0f} examples/s; on this host the naive pipeline delivers "
      f"{speeds['naive'] / tpu_demand:.0%} of that, the tuned one {speeds['tuned'] / tpu_demand:.0%}.")
assert speeds["tuned"] > speeds["naive"]

# %% [markdown]
# ### Input-bound or not: ask the profile
#
# A small MLP consumes examples much faster than the CNN, so it shows the difference on any runtime.
# We fit it on the naive and on the tuned pipeline, profiling steps 3 to 8 of each with tpukit's
# `ProfileCallback`, and compare the overview's verdicts.

# %%
verdicts = {}
for name in ("naive", "tuned"):
    with runtime.strategy.scope():
        mlp = models.build("mlp", input_shape=(32, 32, 3), num_classes=4)
        mlp.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    capture = profiling.ProfileCallback(os.path.join(LOGDIR, f"pipeline-{name}"), start=3, stop=8)
    mlp.fit(pipelines[name], steps_per_epoch=12, epochs=1, callbacks=[capture], shuffle=False, verbose=0)
    verdicts[name] = profiling.summarize(capture.files[0])
    print(f"{name:>6}: {verdicts[name].input_percent:5.1f}% of step time waiting for input -> "
          f"{'input-bound' if verdicts[name].input_bound else 'not input-bound'}")
assert verdicts["naive"].input_percent > verdicts["tuned"].input_percent

# %% [markdown]
# **What you should see:** the naive pipeline leaves the MLP waiting for most of each step; the tuned one
# barely at all. In TensorBoard, open the `pipeline-naive` run's input pipeline analyzer: the generator
# stage is the slow one. In the trace viewer the device rows have gaps between steps.

# %% [markdown]
# ### Exercise 2: shuffle before repeat
#
# `shuffle(...).repeat()` reshuffles inside each epoch; `repeat().shuffle(...)` mixes the end of one epoch
# with the start of the next, so an "epoch" can see some examples twice and miss others. Build the first
# from `tf.data.Dataset.range(10)` and check that its first 10 elements are each example exactly once.

# %%
ten = tf.data.Dataset.range(10)
shuffle_then_repeat = ten.shuffle(10, seed=1).repeat(2)  # answer
repeat_then_shuffle = ten.repeat(2).shuffle(10, seed=1)

# Self-check
first_epoch = [int(v) for v in shuffle_then_repeat.take(10)]
assert sorted(first_epoch) == list(range(10)), first_epoch
print("shuffle, then repeat:", first_epoch)
print("repeat, then shuffle:", [int(v) for v in repeat_then_shuffle.take(10)], "(duplicates are allowed)")

# %% [markdown]
# ### Many files: interleave
#
# Data in the cloud is a set of shards (TFRecord files). `interleave` reads several at once, so one slow
# file does not stall the stream; `deterministic=False` lets it return whichever is ready first.

# %%
with tempfile.TemporaryDirectory(prefix="tpukit-shards-") as shard_dir:
    for shard in range(4):
        with tf.io.TFRecordWriter(os.path.join(shard_dir, f"train-{shard}.tfrecord")) as writer:
            for image in x[shard::4][:64]:
                writer.write(tf.io.serialize_tensor(image).numpy())
    records_ds = (tf.data.Dataset.list_files(os.path.join(shard_dir, "*.tfrecord"), shuffle=True)
                  .interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE,
                              deterministic=False)
                  .map(lambda r: tf.io.parse_tensor(r, tf.uint8), num_parallel_calls=AUTOTUNE))
    print(f"{sum(1 for _ in records_ds)} images read from 4 shards")

# %% [markdown]
# ## XLA and padding waste
#
# ### XLA: fusing ops
#
# Without XLA, TensorFlow runs one kernel per op, and each elementwise op reads and writes the whole tensor
# in memory. XLA compiles the function and *fuses* chains of such ops into one kernel. On a TPU everything
# goes through XLA; on GPU and CPU you ask for it with `jit_compile=True` (`RunConfig(jit_compile=True)` for
# a run; tpukit's `"auto"` lets Keras decide). Keras 3.15's `jit_compile="auto"` on TensorFlow leaves XLA off
# on CPU-only machines (where XLA made our CNN about 2x slower), under **any `tf.distribute` strategy** (a model
# compiled in `strategy.scope()`, even MirroredStrategy over one GPU), and with op determinism on. So a
# distributed run on a GPU gets XLA only if you ask with `jit_compile=True`. A chain of elementwise ops is
# where fusion shines:

# %%
values = tf.random.normal([1 << 20 if SMOKE else 1 << 23])


def chain(v):
    for _ in range(8):
        v = tf.nn.relu(v * 1.01 + 0.1) - 0.05 * v
    return tf.reduce_sum(v)


def ms_per_call(fn, arg, repeats=20):
    fn(arg)  # trace (and compile) once
    start = time.perf_counter()
    for _ in range(repeats):
        fn(arg).numpy()
    return 1000 * (time.perf_counter() - start) / repeats


plain_ms = ms_per_call(tf.function(chain), values)
xla_ms = ms_per_call(tf.function(chain, jit_compile=True), values)
print(f"tf.function: {plain_ms:.2f} ms, with XLA: {xla_ms:.2f} ms ({plain_ms / xla_ms:.1f}x)")

# %% [markdown]
# ### Padding waste and the 128x128 matrix unit
#
# A TPU core multiplies matrices on a 128x128 systolic array (the MXU). XLA pads tensors to its tiles: one
# dimension to a multiple of **8** and another to a multiple of **128**. Which dimension gets 128 depends on the
# layout XLA picks for each op, so the rule that is safe either way, and the one tpukit applies, is a
# per-replica batch (and feature sizes) in multiples of **128** on a TPU. Padding is computed and thrown away.
# GPU Tensor Cores want multiples of **8** for the same reason. `RunConfig` warns when the per-replica batch
# wastes part of each tile, with the same advice `padding_advice` gives:

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tpukit.RunConfig(accelerator="tpu", batch_size=100)
print(caught[0].message)
print(tk_config.padding_advice(100, "gpu"))
pd.DataFrame({b: {"TPU (128)": tk_config.padding_waste(b, 128), "GPU (8)": tk_config.padding_waste(b, 8)}
              for b in (20, 64, 100, 128, 200, 256)}).round(1).rename_axis("% wasted at batch")

# %% [markdown]
# The feature dimensions matter as much as the batch. For a matrix product `[batch, k] x [k, n]` the MXU is
# busy in proportion to `k / pad128(k) x n / pad128(n)`. A model with few features leaves most of the array
# idle; that is how a naive Keras model ended up at **4.1% MXU utilization** in the 2020 post. For example:

# %%
def mxu_fill(k, n):
    pad = lambda d: -(-d // 128) * 128  # noqa: E731 (round up to a multiple of 128)
    return k / pad(k) * n / pad(n)


layers = {"first conv, 3x3 on RGB, 32 filters": (27, 32), "Dense 784 -> 10 (MNIST logits)": (784, 10),
          "3x3 conv, 64 -> 64": (576, 64), "3x3 conv, 128 -> 128": (1152, 128), "Dense 256 -> 256": (256, 256)}
pd.Series({name: 100 * mxu_fill(k, n) for name, (k, n) in layers.items()}, name="% of the MXU used").round(1)

# %% [markdown]
# ### Exercise 3: pick a batch without padding
#
# You want at least 100 examples per TPU core. Which per-core batch wastes nothing on a TPU?

# %%
per_core_batch = 128  # answer

# Self-check
assert per_core_batch >= 100 and tk_config.padding_waste(per_core_batch, 128) == 0
assert tpukit.RunConfig(accelerator="tpu", batch_size=per_core_batch).padding_advice() is None
print("Exercise 3: correct.")

# %% [markdown]
# ### Ops that cost more than they look
#
# Notes from the TPU post, still true in spirit; the profile's top ops tell you which apply to you:
#
# - **Avoid needless broadcasting**: a broadcast materializes the big tensor; reshape so it can fuse.
# - **Slicing along a padded dimension**, **transpose** and **reshape** are not always free on a TPU: they
#   can change the tiled layout and copy the whole tensor.
# - **Pooling gradients**: `avg_pool`'s gradient is a cheap spread; `max_pool`'s must find the arg-max
#   again. The post measured the difference on TPU; measure your hardware below.
# - **Batch normalization**: a fused kernel (`FusedBatchNormV3`, Keras 2's `fused=True`) beats the op-by-op
#   version. Keras 3 builds it from elementwise ops and relies on XLA to fuse them (always on TPU).
# - **Random numbers**: some kinds of random ops were slow on TPU (the post singled out stateful ones);
#   prefer `tf.random.stateless_*` ops, and let TensorFlow pick the algorithm for the device with
#   `tf.random.Generator.from_seed(seed, alg="auto_select")`.
# - **Depthwise and separable convolutions** were slow on TPUs of the time: check them in the op profile.

# %%
images = tf.random.normal([16 if SMOKE else 64, 32, 32, 64])


def pool_gradient(pool):
    @tf.function
    def gradient(v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            total = tf.reduce_sum(pool(v, ksize=2, strides=2, padding="VALID"))
        return tape.gradient(total, v)
    return gradient


for pool in (tf.nn.avg_pool2d, tf.nn.max_pool2d):
    print(f"{pool.__name__} gradient: {ms_per_call(pool_gradient(pool), images):.2f} ms")

# %% [markdown]
# **What you should see:** two timings; on a CPU the gap between them depends on the sizes (try the full
# batch of 64), while on the TPUs of 2020 the max-pool gradient was the clearly slower one. That is the
# lesson: measure on the hardware you train on.

# %% [markdown]
# ## What changes between TPU, GPU and CPU runtimes
#
# - **TPU**: XLA always; the overview shows MXU utilization and the step-time split into device compute
#   and infeed; per-replica batch and features in multiples of 128. The input pipeline runs on
#   the TPU VM's host CPU, so an input-bound TPU is common: profile before buying more cores.
# - **GPU**: the profile adds GPU kernel stats and a kernel-launch verdict; multiples of 8 for Tensor
#   Cores; XLA is opt-in and often helps.
# - **CPU**: the device *is* the host, so input and compute compete for the same cores; a big model is
#   compute-bound whatever the pipeline, and XLA can be slower.
#
# To profile a job that is already running (another process, another machine), start a profiler server in it
# and capture on demand: notebook 06, or TensorBoard's **Capture Profile** button with the server's address.

# %% [markdown]
# ## Clean up
#
# In your own sessions keep TensorBoard running. The tests stop the one they started.

# %%
if SMOKE and isinstance(board, tensorboard.Launched):
    print("stopped TensorBoard:", tensorboard.stop(board))
