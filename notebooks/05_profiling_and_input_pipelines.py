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
# **Last modified:** 2026/11/24<br>
# **Description:** TensorBoard inside the notebook, a profile of chosen training steps, a naive vs a tuned input
# pipeline, XLA and padding waste.<br>
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
#
# On TensorFlow (Colab's CPU and GPU runtimes) the pipelines are `tf.data`. Colab's TPU runtime has no TensorFlow
# and no TensorBoard: there the same lessons run on Keras 3 and JAX (a `keras.utils.PyDataset` pipeline,
# `jax.jit`, `jax.profiler`), and the cells say what they skip and how to add the viewers.

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
import importlib.util
import os
import tempfile
import time
import warnings

import keras
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML, Javascript, display

import tpukit
from tpukit import config as tk_config
from tpukit import context
from tpukit import data
from tpukit import models
from tpukit.observe import profiling
from tpukit.observe import tensorboard
from tpukit.ui import embed

TF = keras.backend.backend() == "tensorflow"  # tf.data and tf.function here; else Keras 3 and JAX
if TF:
    import tensorflow as tf

    AUTOTUNE = tf.data.AUTOTUNE
else:
    import jax
HAS_XPROF = importlib.util.find_spec("xprof") is not None  # reads captures (profiling.summarize)
LOGDIR = "runs"  # every run and capture of this notebook goes under here
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
# `tpukit.observe.tensorboard.start` does what the magic does from Python: it reuses a TensorBoard that already
# serves the logdir, or starts one bound to **127.0.0.1**, and returns `Launched`, `Reused` or `Failed`
# (with a message you can act on). `tpukit.ui.embed` then shows it the way the front end allows: Colab's
# port proxy, an iframe in Jupyter, or a plain address elsewhere. (Its Profile tab also has a **Capture
# Profile** button: give it the address of a job's profiler server, notebook 06, and it captures from it.)
#
# Colab's TPU runtime has neither TensorBoard nor xprof (its profile tab). `tpukit.colab.setup()` adds both, pinned
# so that nothing the runtime has moves, and never TensorFlow. Set `ADD_VIEWERS = True` to run it. Without them,
# training and captures work all the same; only the viewing is skipped.

# %%
ADD_VIEWERS = False  # True: add TensorBoard and xprof where they are missing (Colab's TPU runtime)
if ADD_VIEWERS:
    import tpukit.colab

    print(tpukit.colab.setup())
    HAS_XPROF = importlib.util.find_spec("xprof") is not None

board = tensorboard.start(LOGDIR)
print(board)
if SMOKE and isinstance(board, tensorboard.Launched):
    atexit.register(tensorboard.stop, board)  # the tests leave no TensorBoard behind, even on failure


def show(url, height=600):
    """Show a TensorBoard page (a URL on 127.0.0.1) inside this notebook, where TensorBoard runs."""
    if isinstance(board, tensorboard.Failed):
        print("not shown:", board.message)
        return
    view = embed.tensorboard(url, context.detect(), height)
    display(HTML(view.html))
    if view.javascript:
        display(Javascript(view.javascript))


show(getattr(board, "url", None))

# %% [markdown]
# ### A profile of chosen training steps
#
# `RunConfig(profile=(start, stop))` profiles that inclusive window of training steps. Skip the first
# steps: they trace and compile the step function, which you do not want to read as step time. tpukit marks
# every profiled step (`tf.profiler.experimental.Trace("train", step_num=n)` on TensorFlow,
# `jax.profiler.StepTraceAnnotation("train", step_num=n)` on JAX), so TensorBoard's overview gets its step-time
# graph. Keras 3.15's own `TensorBoard(profile_batch=...)` marks its steps too, but names
# them "Profiled batch", and XProf counts only steps named `train` or `test` for the step-time graph, so it
# ignores them: the overview of such a capture has no step-time graph (the 2020 post noted it missing).

# %%
PROFILE = (3, 6) if SMOKE else (10, 14)
config = tpukit.RunConfig(dataset="shapes", dataset_size=512 if SMOKE else 8192, model="cnn", batch_size=32,
                          epochs=1, steps_per_epoch=8 if SMOKE else 60, profile=PROFILE, logdir=LOGDIR,
                          name="profiled")
result = tpukit.train(config, runtime)
print(result.summary())
if HAS_XPROF:
    print(profiling.summarize(result.profile_files[0]))
else:
    print("xprof is not installed here, so the capture is not read (ADD_VIEWERS above adds it).")

# %% [markdown]
# **What you should see:** the step time over the profiled steps, a verdict on input on TensorFlow
# (`not input-bound`: tpukit's own pipeline is the tuned one below), and the ops with the most self time. On a CPU
# with TensorFlow the top ops are the convolution gradients (`Conv2DBackpropFilter`, `Conv2DBackpropInput`); on
# JAX, and on a TPU, they are XLA fusions and convolutions.
#
# The same capture in TensorBoard's Profile tab (open it there; the link selects this capture):

# %%
if not isinstance(board, tensorboard.Failed):
    show(tensorboard.profile_url(board, result.profile_files[0]))
else:
    print("not shown:", board.message)

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
# ## A naive pipeline vs a tuned one, measured
#
# Each image gets a random left-right flip. The **naive** pipeline is how many first notebooks look:
# a Python generator yields one example at a time, the flip is mapped per example on one thread, and
# nothing prefetches, so the accelerator waits while the host prepares every batch.
#
# The **tuned** pipeline follows the TPU post's advice:
#
# - `from_tensor_slices` + `cache()`: small data lives in memory after the first pass;
# - `shuffle` **before** `repeat`: every epoch sees each example once;
# - `batch` first, then a **vectorized** `map` over the whole batch: one op call per batch, not per image
#   (tf.data also fuses a `map` followed by `batch` into one stage, the old `map_and_batch`);
# - `num_parallel_calls=AUTOTUNE`: map on several threads;
# - `prefetch(AUTOTUNE)` **last**: the next batches are ready while the device computes.
#
# When preprocessing makes the data *bigger* (decoding JPEGs, crops), put `shuffle` and `interleave`
# before it, on the small records. For many remote files, read them with `interleave` (below).
#
# Without TensorFlow the two pipelines are `keras.utils.PyDataset`s, and each image also gets the classic CIFAR
# random crop (pad 4 pixels, cut 32x32 at a random offset). The naive one pads, crops and flips image by image in
# a Python loop. The tuned one pads the whole set once (the deterministic part: the cache), then crops and flips a
# whole batch with a single NumPy gather, and worker threads prepare the next batches while `fit` trains
# (`workers=4`: its prefetch).

# %%
BATCH = 128
shapes = data.load("shapes", size=2048 if SMOKE else 8192)
x, y = np.asarray(shapes.x_train), np.asarray(shapes.y_train)

if TF:
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
else:
    padded = np.pad(x, ((0, 0), (4, 4), (4, 4), (0, 0)))  # the deterministic part, done once: the cache
    pixels = np.arange(32)

    class CropFlips(keras.utils.PyDataset):
        """Shuffled batches, each image randomly cropped (after 4 pixels of padding) and flipped."""

        def __init__(self, vectorized, **kwargs):
            super().__init__(**kwargs)
            self.vectorized, self.rng = vectorized, np.random.default_rng(0)

        def __len__(self):
            return len(x) // BATCH

        def __getitem__(self, index):
            rows = self.rng.choice(len(x), BATCH, replace=False)
            flip, (dy, dx) = self.rng.random(BATCH) < 0.5, self.rng.integers(0, 9, (2, BATCH))
            if self.vectorized:  # one gather for the whole batch: rows, crop offsets and flips as index arrays
                cols = dx[:, None] + np.where(flip[:, None], 31 - pixels, pixels)
                return padded[rows[:, None, None], (dy[:, None] + pixels)[:, :, None], cols[:, None, :]], y[rows]
            images = []
            for i, f, a, b in zip(rows, flip, dy, dx):  # one image at a time: pad, crop, flip
                image = np.pad(x[i], ((4, 4), (4, 4), (0, 0)))[a:a + 32, b:b + 32]
                images.append(image[:, ::-1] if f else image)
            return np.stack(images), y[rows]

    pipelines = {"naive": CropFlips(False), "tuned": CropFlips(True, workers=4, use_multiprocessing=False)}


def examples_per_sec(dataset, batches=10 if SMOKE else 50):
    """Read `batches` batches (after a first, warming one) and return examples per second."""
    if TF:
        iterator = iter(dataset)
        read = lambda i: next(iterator)  # noqa: E731
    else:
        read = lambda i: dataset[i % len(dataset)]  # noqa: E731 (on this thread: the host's cost per batch)
    read(0)
    start = time.perf_counter()
    for i in range(batches):
        read(i)
    return batches * BATCH / (time.perf_counter() - start)


speeds = pd.Series({name: examples_per_sec(ds) for name, ds in pipelines.items()}, name="examples/s")
speeds.round(0)

# %%
speeds.plot.barh(title="Input pipeline alone (host CPU)")
plt.xlabel("examples / s")
plt.show()

# %% [markdown]
# **What you should see:** on `tf.data` the tuned pipeline delivers ten or more times the naive one's examples per
# second; on the NumPy path about twice (the single gather; its worker threads only help once `fit` reads).
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
# `ProfileCallback`, and compare the examples per second and the overview's verdicts. (xprof finds the input wait
# in TensorFlow captures, from `tf.data`'s own events; a JAX capture has no such events, so on JAX the examples
# per second are the verdict.)

# %%
verdicts = {}
for name in ("naive", "tuned"):
    with runtime.strategy.scope():
        mlp = models.build("mlp", input_shape=(32, 32, 3), num_classes=4)
        mlp.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    capture = profiling.ProfileCallback(os.path.join(LOGDIR, f"pipeline-{name}"), start=3, stop=8)
    mlp.fit(pipelines[name], steps_per_epoch=12, epochs=1, callbacks=[capture], shuffle=False, verbose=0)
    started = time.perf_counter()  # timed again, compiled: the examples per second the pipeline lets through
    mlp.fit(pipelines[name], steps_per_epoch=12, epochs=1, shuffle=False, verbose=0)
    fed = 12 * BATCH / (time.perf_counter() - started)
    verdict = profiling.summarize(capture.files[0]) if HAS_XPROF else None
    if getattr(verdict, "input_percent", None) is None:  # no xprof, or a JAX capture: no input-wait figure
        print(f"{name:>6}: {fed:8,.0f} examples/s (capture: {capture.files[0]})")
        continue
    verdicts[name] = verdict
    print(f"{name:>6}: {fed:8,.0f} examples/s; {verdict.input_percent:5.1f}% of step time waiting for input -> "
          f"{'input-bound' if verdict.input_bound else 'not input-bound'}")
if len(verdicts) == 2:
    assert verdicts["naive"].input_percent > verdicts["tuned"].input_percent

# %% [markdown]
# **What you should see:** on TensorFlow the naive pipeline leaves the MLP waiting for most of each step and the
# tuned one barely at all, and feeds it several times the examples per second. In TensorBoard, open the
# `pipeline-naive` run's input pipeline analyzer: the generator stage is the slow one. In the trace viewer the
# device rows have gaps between steps. On JAX on a CPU the gap is smaller: host and "device" share the cores.

# %% [markdown]
# ### Exercise 1: how far can a shuffle buffer reach?
#
# `shuffle(buffer_size=B)` does not shuffle the whole dataset: it keeps a buffer of the next `B` elements and
# picks one of them at random each time, refilling from the stream. Shuffle `range(100)` with `B = 10`.
# **Predict `LARGEST_FIRST`**, the largest value that can come out *first*. The self-check shuffles 300 times,
# with 300 seeds, and takes the largest first element it saw. (So a buffer much smaller than the dataset barely
# shuffles sorted data: shuffle the file list too, and use a buffer as large as memory allows. The same reasoning
# says why `shuffle` goes **before** `repeat`: after it, the buffer mixes the end of one epoch into the next.)

# %% tags=["exercise"]
LARGEST_FIRST = ...  # YOUR PREDICTION: the largest value that can come out first

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    LARGEST_FIRST = 9  # the first pick is among the first 10 elements, 0 to 9

# %% tags=["self-check"]
# Self-check: shuffle 300 times and look at the first element
answered(LARGEST_FIRST, "the first element is picked from a buffer holding the first B elements of the stream")
if TF:
    firsts = [int(next(iter(tf.data.Dataset.range(100).shuffle(10, seed=s)))) for s in range(300)]
else:  # what tf.data's buffer does, in NumPy: fill the buffer with the first 10, pick one of them at random
    firsts = [int(np.random.default_rng(s).choice(np.arange(100)[:10])) for s in range(300)]
print(f"predicted {LARGEST_FIRST}; over 300 seeds the first element was at most {max(firsts)}")
assert LARGEST_FIRST == max(firsts), "not quite: the buffer holds elements 0 to B-1 when the first one is picked"
print("Exercise 1: correct.")

# %% [markdown]
# ### Many files: interleave
#
# Data in the cloud is a set of shards (TFRecord files). `interleave` reads several at once, so one slow
# file does not stall the stream; `deterministic=False` lets it return whichever is ready first.

# %%
if TF:
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
else:
    print("TFRecord files and interleave belong to tf.data; without TensorFlow, grain (installed on Colab's TPU "
          "runtime) reads sharded files with parallel workers.")

# %% [markdown]
# ## XLA and padding waste
#
# ### XLA: fusing ops
#
# Without XLA, TensorFlow runs one kernel per op, and each elementwise op reads and writes the whole tensor
# in memory. XLA compiles the function and *fuses* chains of such ops into one kernel. On a TPU everything
# goes through XLA; on GPU and CPU you ask for it with `jit_compile=True` (`RunConfig(jit_compile=True)` for
# a run). On JAX every jitted function is compiled by XLA, and Keras always jits the train step; running ops one
# by one, without `jax.jit`, is the unfused baseline. Keras 3.15's `jit_compile="auto"` on TensorFlow leaves XLA
# off on CPU-only machines (where our float32 CNN ran no faster with it), under **any `tf.distribute` strategy**
# (a model compiled in `strategy.scope()`, even MirroredStrategy over one GPU), and with op determinism on. So a
# distributed run on a GPU gets XLA only if you ask with `jit_compile=True`. tpukit's `"auto"` follows Keras,
# with one exception: under mixed precision on a TensorFlow CPU it turns XLA on for a step long enough to win the
# compile back (10 ms or more) where the CPU probe measured XLA's 16-bit math faster than TensorFlow's own kernels.
# That depends on the CPU: one AMD EPYC's kernels emulate bfloat16 (our CNN ran 9.5x faster under XLA), another's,
# with AVX512-BF16, run it natively and beat XLA. The run's notes say what was measured.
# A chain of elementwise ops is where fusion shines:

# %%
values = keras.random.normal([1 << 20 if SMOKE else 1 << 23], seed=0)


def chain(v):
    for _ in range(8):
        v = keras.ops.relu(v * 1.01 + 0.1) - 0.05 * v
    return keras.ops.sum(v)


def ms_per_call(fn, arg, repeats=20):
    np.asarray(fn(arg))  # trace (and compile) once
    start = time.perf_counter()
    for _ in range(repeats):
        np.asarray(fn(arg))
    return 1000 * (time.perf_counter() - start) / repeats


plain, fused = (tf.function(chain), tf.function(chain, jit_compile=True)) if TF else (chain, jax.jit(chain))
plain_ms, xla_ms = ms_per_call(plain, values), ms_per_call(fused, values)
print(f"{'tf.function' if TF else 'op by op'}: {plain_ms:.2f} ms, with XLA: {xla_ms:.2f} ms ({plain_ms / xla_ms:.1f}x)")

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
# ### Exercise 2: the padding waste of your batch
#
# You train with a global batch of **1,000** on an 8-chip TPU (Kaggle's v5e-8; the seeds' v2-8 had 8 cores), so
# each gets 125 examples. **Predict `WASTE_PERCENT`**, the share of each padded per-replica batch that is padding,
# in percent. The self-check measures it with `padding_waste` and prints `padding_advice`.

# %% tags=["exercise"]
WASTE_PERCENT = ...  # YOUR PREDICTION: percent of the padded per-replica batch, e.g. 12.5

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    WASTE_PERCENT = 100 * (128 - 125) / 128  # 125 pads up to 128: 3 of 128 rows are padding, 2.3%

# %% tags=["self-check"]
# Self-check: tpukit's padding figures
answered(WASTE_PERCENT, "1,000 / 8 = 125 per replica; round up to a multiple of 128; padding / padded size")
measured = tk_config.padding_waste(125, 128)
print(f"predicted {WASTE_PERCENT:.1f}%, measured {measured:.1f}%")
print(tk_config.padding_advice(125, "tpu"))
assert abs(WASTE_PERCENT - measured) < 0.5, "not quite: the waste is a share of the padded size (128), in percent"
print("Exercise 2: correct. Small here; a global batch of 1,024 (128 each) wastes nothing.")

# %% [markdown]
# ### Exercise 3: how much of the matrix unit does a layer use?
#
# The MNIST classifier's last layer is a `Dense` from 784 features to 10 classes: a `[batch, 784] x [784, 10]`
# product. **Predict `MXU_PERCENT`**, the share of the 128x128 matrix unit it keeps busy,
# `k / pad128(k) x n / pad128(n)` in percent. The self-check computes it from `padding_waste` of each dimension.

# %% tags=["exercise"]
MXU_PERCENT = ...  # YOUR PREDICTION: percent of the MXU used by Dense 784 -> 10

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    MXU_PERCENT = 100 * 784 / 896 * 10 / 128  # 784 pads to 7 x 128 = 896, 10 pads to 128: 6.8%

# %% tags=["self-check"]
# Self-check: the fill of each dimension, from tpukit's padding figures
answered(MXU_PERCENT, "784 rounds up to 896 and 10 to 128; multiply the two fill ratios")
fill_k, fill_n = (1 - tk_config.padding_waste(d, 128) / 100 for d in (784, 10))
measured = 100 * fill_k * fill_n
print(f"predicted {MXU_PERCENT:.1f}%, measured {measured:.1f}% ({fill_k:.1%} x {fill_n:.1%})")
assert abs(MXU_PERCENT - measured) < 0.5, "not quite: both dimensions are padded to multiples of 128"
print("Exercise 3: correct. Few output features leave most of the array idle, as in the 2020 post's 4.1%.")

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
images = keras.random.normal([16 if SMOKE else 64, 32, 32, 64], seed=1)


def pool_gradient(pool):
    """A compiled function: the gradient of sum(pool(v)) with respect to v."""
    total = lambda v: keras.ops.sum(pool(v, 2, strides=2))  # noqa: E731
    if not TF:
        return jax.jit(jax.grad(total))

    @tf.function
    def gradient(v):
        with tf.GradientTape() as tape:
            tape.watch(v)
            result = total(v)
        return tape.gradient(result, v)
    return gradient


for pool in (keras.ops.average_pool, keras.ops.max_pool):
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
