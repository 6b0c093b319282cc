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
# # Profiling and input pipelines
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/27<br>
# **Description:** TensorBoard inside the notebook, a profile of chosen training steps, a naive vs a tuned input
# pipeline, input-bound vs compute-bound, steps_per_execution, recompiles, XLA and padding.<br>
# **Accelerator:** TPU, GPU or CPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/05_profiling_and_input_pipelines.ipynb)

# %% [markdown]
# ## What you will learn
#
# - How to show TensorBoard inside the notebook, bound to 127.0.0.1 (never through a public tunnel).
# - How to capture a profile of a window of training steps, with Keras' `TensorBoard(profile_batch=...)` or
#   `jax.profiler.trace`, then with tpukit, and read it: the overview (step time, input-bound or not), the top
#   ops, the trace viewer and the input pipeline analyzer.
# - How a naive input pipeline compares with a tuned one, in examples per second, and how to tell an input-bound
#   run from a compute-bound one.
# - What `steps_per_execution` buys (the main throughput setting on a TPU), and when a jitted step recompiles.
# - What XLA fusion buys, what a TPU pads (batch to multiples of 8, features to multiples of 128; a GPU wants
#   multiples of 8), and which ops cost more than they look.
#
# On TensorFlow (Colab's CPU and GPU runtimes) the pipelines are `tf.data`. Colab's TPU runtime has no TensorFlow
# and no TensorBoard: there the same lessons run on Keras 3 and JAX (a `keras.utils.PyDataset` pipeline,
# `jax.jit`, `jax.profiler`), and the first TensorBoard cell adds the viewers.

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
from tpukit.ui import context
from tpukit import data
from tpukit import models
from tpukit.observe import profiling
from tpukit.observe import tensorboard
from tpukit.teaching import SOLUTIONS, answered, check
from tpukit.ui import embed

import jax

HAS_XPROF = importlib.util.find_spec("xprof") is not None  # reads captures (profiling.summarize)
LOGDIR = "runs"  # every run and capture of this notebook goes under here
runtime = tpukit.connect()
print(runtime.describe())


# %% tags=["tf"]
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
from tpukit.ui import context
from tpukit import data
from tpukit import models
from tpukit.observe import profiling
from tpukit.observe import tensorboard
from tpukit.teaching import SOLUTIONS, answered, check
from tpukit.ui import embed

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
HAS_XPROF = importlib.util.find_spec("xprof") is not None  # reads captures (profiling.summarize)
LOGDIR = "runs"  # every run and capture of this notebook goes under here
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
# `tpukit.observe.tensorboard.start` does what the magic does from Python: it reuses a TensorBoard that already
# serves the logdir, or starts one bound to **127.0.0.1**, and returns `Launched`, `Reused` or `Failed`
# (with a message you can act on). `tpukit.ui.embed` then shows it the way the front end allows: Colab's
# port proxy, an iframe in Jupyter, or a plain address elsewhere. (Its Profile tab also has a **Capture
# Profile** button: give it the address of a job's profiler server, notebook 06, and it captures from it.)
#
# Colab's TPU runtime has neither TensorBoard nor xprof (its profile tab). In Colab, the next cell runs
# `tpukit.colab.setup()`: it pip-installs only what is missing, with every package already installed pinned (so
# nothing the runtime has moves), never TensorFlow, prints a line while pip runs (tens of seconds) and one summary
# line after, and returns at once when nothing is missing. Outside Colab it installs nothing and says so.
# Training and captures work without the viewers; only the viewing needs them.

# %%
if context.detect() == context.COLAB:
    import tpukit.colab

    print(tpukit.colab.setup())
    HAS_XPROF = importlib.util.find_spec("xprof") is not None
else:
    print(f"Not in Colab ({context.detect()}): tpukit.colab.setup() would pip-install TensorBoard and xprof where "
          "they are missing; nothing is installed here.")

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
# ### A profile of chosen training steps: Keras and JAX
#
# Skip the first steps when you profile: they trace and compile the step function, which you do not want to read
# as step time. With TensorFlow, Keras' own callback does it: `keras.callbacks.TensorBoard(log_dir,
# profile_batch=(a, b))` profiles batches `a` to `b` of the first epoch. (On JAX it works too, from Python 3.12,
# but it writes with `tensorflow.summary`, so not on Colab's TPU runtime, which has no TensorFlow.) On JAX the
# real API is `jax.profiler.trace(log_dir)` (or `start_trace`/`stop_trace`) around the steps you want, after a
# warm-up that compiled them. Either writes a `.xplane.pb` under `log_dir/plugins/profile/<time>/`, which
# TensorBoard's Profile tab reads. A small CNN on the `shapes` images, a few seconds on any runtime:

# %% tags=["jax"]
shapes_small = data.load("shapes", size=1024)
x_small, y_small = np.asarray(shapes_small.x_train), np.asarray(shapes_small.y_train)
keras_logdir = os.path.join(LOGDIR, "keras-profile")
with runtime.strategy.scope():  # build and fit inside: on JAX, fit reads the distribution from the scope
    cnn = models.build("cnn", input_shape=x_small.shape[1:], num_classes=4)
    cnn.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    cnn.fit(x_small, y_small, batch_size=32, epochs=1, steps_per_epoch=4, verbose=0)  # warm-up: compile
    with jax.profiler.trace(keras_logdir):
        cnn.fit(x_small, y_small, batch_size=32, epochs=1, steps_per_epoch=3, verbose=0)
captured = [os.path.join(d, f) for d, _, files in os.walk(keras_logdir) for f in files if f.endswith(".xplane.pb")]
print(f"{len(captured)} capture(s):", *captured, sep="\n  ")

# %% tags=["tf"]
shapes_small = data.load("shapes", size=1024)
x_small, y_small = np.asarray(shapes_small.x_train), np.asarray(shapes_small.y_train)
keras_logdir = os.path.join(LOGDIR, "keras-profile")
with runtime.strategy.scope():  # build and fit inside the strategy's scope
    cnn = models.build("cnn", input_shape=x_small.shape[1:], num_classes=4)
    cnn.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    cnn.fit(x_small, y_small, batch_size=32, epochs=1, steps_per_epoch=10, verbose=0,
            callbacks=[keras.callbacks.TensorBoard(keras_logdir, profile_batch=(4, 6))])
captured = [os.path.join(d, f) for d, _, files in os.walk(keras_logdir) for f in files if f.endswith(".xplane.pb")]
print(f"{len(captured)} capture(s):", *captured, sep="\n  ")

# %% [markdown]
# ### The same with tpukit
#
# `RunConfig(profile=(start, stop))` profiles that inclusive window of training steps, and the run's result
# lists the capture. tpukit marks every profiled step (`tf.profiler.experimental.Trace("train", step_num=n)` on
# TensorFlow, `jax.profiler.StepTraceAnnotation("train", step_num=n)` on JAX), so TensorBoard's overview gets its
# step-time graph. Keras 3.13's `TensorBoard(profile_batch=...)` marks its steps too, but names them "Profiled
# batch", and XProf counts only steps named `train` or `test` for the step-time graph, so it ignores them: the
# overview of such a capture has no step-time graph (the 2020 post noted it missing). `profiling.summarize`
# reads a capture into a few plain values: step time, the verdict on input, the top ops. 60 steps of a small CNN:
# seconds on a T4 or a v5e-1, under a minute on a CPU.

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
    print("xprof is not installed here, so the capture is not read (in Colab, tpukit.colab.setup() above adds it).")

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
# whole batch at once (every 32x32 window of a padded image is a NumPy view, so a batch of crops is one copy), and
# worker threads prepare the next batches while `fit` trains
# (`workers=4`: its prefetch).

# %% tags=["jax"]
BATCH = 128
shapes = data.load("shapes", size=2048 if SMOKE else 8192)
x, y = np.asarray(shapes.x_train), np.asarray(shapes.y_train)

padded = np.pad(x, ((0, 0), (4, 4), (4, 4), (0, 0)))  # the deterministic part, done once: the cache


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
        if self.vectorized:  # whole-batch array ops: every 32x32 window of the padded images is a view
            windows = np.lib.stride_tricks.sliding_window_view(padded[rows], (32, 32), axis=(1, 2))
            images = windows[np.arange(BATCH), dy, dx].transpose(0, 2, 3, 1)  # one copy: (batch, 32, 32, 3)
            images[flip] = images[flip, :, ::-1]
            return images, y[rows]
        images = []
        for i, f, a, b in zip(rows, flip, dy, dx):  # one image at a time: pad, crop, flip
            image = np.pad(x[i], ((4, 4), (4, 4), (0, 0)))[a:a + 32, b:b + 32]
            images.append(image[:, ::-1] if f else image)
        return np.stack(images), y[rows]


pipelines = {"naive": CropFlips(False), "tuned": CropFlips(True, workers=4, use_multiprocessing=False)}


def examples_per_sec(dataset, batches=10 if SMOKE else 50):
    """Read `batches` batches (after a first, warming one) and return examples per second."""
    read = lambda i: dataset[i % len(dataset)]  # noqa: E731 (on this thread: the host's cost per batch)
    read(0)
    start = time.perf_counter()
    for i in range(batches):
        read(i)
    return batches * BATCH / (time.perf_counter() - start)


speeds = pd.Series({name: examples_per_sec(ds) for name, ds in pipelines.items()}, name="examples/s")
speeds.round(0)

# %% tags=["tf"]
BATCH = 128
shapes = data.load("shapes", size=2048 if SMOKE else 8192)
x, y = np.asarray(shapes.x_train), np.asarray(shapes.y_train)

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
    read = lambda i: next(iterator)  # noqa: E731
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
# second; on the NumPy path several times (measured 5-6x on a 2-core CPU: whole-batch array ops instead of a Python loop;
# its worker threads only help once `fit` reads).
# Does it matter? Only if the model consumes faster than the pipeline produces. The seeds' TPU v2-8 ran the
# CIFAR CNN at 4,096 examples every 88 ms (8 cores: the 2020 Colab TPU; today's free Colab TPU is one v5e chip):

# %%
tpu_demand = 4096 / 0.088
print(f"A TPU v2-8 consumes {tpu_demand:,.0f} examples/s; on this host the naive pipeline delivers "
      f"{speeds['naive'] / tpu_demand:.0%} of that, the tuned one {speeds['tuned'] / tpu_demand:.0%}.")
if speeds["tuned"] <= speeds["naive"]:
    print("Not the usual outcome: the tuned pipeline was no faster here; run the cell again on a quieter host.")

# %% [markdown]
# ### Input-bound or not: ask the profile
#
# A small MLP consumes examples much faster than the CNN, so it shows the difference on any runtime.
# We fit it on the naive and on the tuned pipeline, profiling steps 3 to 8 of each with tpukit's
# `ProfileCallback`, and compare the examples per second and the overview's verdicts. (xprof finds the input wait
# in TensorFlow captures, from `tf.data`'s own events; a JAX capture has no such events, so on JAX the examples
# per second are the verdict.) 48 steps in all: seconds on any runtime.

# %%
verdicts = {}
for name in ("naive", "tuned"):
    capture = profiling.ProfileCallback(os.path.join(LOGDIR, f"pipeline-{name}"), start=3, stop=8)
    with runtime.strategy.scope():  # fit inside it too: Keras on JAX looks the distribution up when fit runs
        mlp = models.build("mlp", input_shape=(32, 32, 3), num_classes=4)
        mlp.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
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
if len(verdicts) == 2 and verdicts["naive"].input_percent <= verdicts["tuned"].input_percent:
    print("Not the usual outcome: the naive pipeline waited no longer than the tuned one here (a busy host?).")

# %% [markdown]
# **What you should see:** on TensorFlow the naive pipeline leaves the MLP waiting for most of each step and the
# tuned one barely at all, and feeds it several times the examples per second. In TensorBoard, open the
# `pipeline-naive` run's input pipeline analyzer: the generator stage is the slow one. In the trace viewer the
# device rows have gaps between steps. On JAX on a CPU the gap is smaller: host and "device" share the cores.

# %% [markdown] tags=["tf"]
# ### Exercise 1: how far can a shuffle buffer reach?
#
# `shuffle(buffer_size=B)` does not shuffle the whole dataset: it keeps a buffer of the next `B` elements and
# picks one of them at random each time, refilling from the stream. Shuffle `range(100)` with `B = 10`.
# **Predict `LARGEST_FIRST`**, the largest value that can come out *first*. The self-check shuffles 300 times,
# with 300 seeds, with `tf.data`, and takes the largest first element it saw. (So a buffer much smaller than the
# dataset barely shuffles sorted data: shuffle the file list too, and use a buffer as large as memory allows. The
# same reasoning says why `shuffle` goes **before** `repeat`: after it, the buffer mixes the end of one epoch into
# the next.)

# %% tags=["exercise", "tf"]
LARGEST_FIRST = ...  # YOUR PREDICTION: the largest value that can come out first

# %% tags=["solution", "tf"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["LARGEST_FIRST = 99", "LARGEST_FIRST = 10", "LARGEST_FIRST = 0"]
# @title Solution
if SOLUTIONS:
    LARGEST_FIRST = 9  # the first pick is among the first 10 elements, 0 to 9

# %% tags=["self-check", "tf"]
# Self-check: shuffle 300 times and look at the first element
answered(LARGEST_FIRST, "the first element is picked from a buffer holding the first B elements of the stream")
firsts = [int(next(iter(tf.data.Dataset.range(100).shuffle(10, seed=s)))) for s in range(300)]
print(f"predicted {LARGEST_FIRST}; over 300 seeds (tf.data) the first element was at most {max(firsts)}")
check(LARGEST_FIRST == max(firsts), "which elements are in the buffer when the first one is picked?")
print("Exercise 1: correct.")

# %% [markdown] tags=["jax"]
# ### Exercise 1: what does grain's window shuffle mix?
#
# Without TensorFlow, JAX users feed data with grain (it ships on Colab's TPU runtime). Its
# `grain.experimental.WindowShuffleMapDataset(ds, window_size=W, seed=s)` cuts the dataset into windows of `W`
# consecutive elements and shuffles each window on its own, by index. `tf.data`'s `shuffle(buffer_size=W)` instead
# picks from a buffer of the next `W` elements of a stream, so an early element can stay in the buffer and come out
# late. Shuffle `range(100)` with `W = 10`. **Predict `SMALLEST_ELEVENTH`**, the smallest value that can come out
# 11th (index 10). The self-check shuffles with 300 seeds (grain where installed, else the same window shuffle in
# NumPy) and takes the smallest 11th element it saw. (A small window barely shuffles sorted data: make `W` as large
# as memory allows; `MapDataset.shuffle` shuffles all of it.)

# %% tags=["exercise", "jax"]
SMALLEST_ELEVENTH = ...  # YOUR PREDICTION: the smallest value that can come out 11th

# %% tags=["solution", "jax"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["SMALLEST_ELEVENTH = 0", "SMALLEST_ELEVENTH = 1", "SMALLEST_ELEVENTH = 9"]
# @title Solution
if SOLUTIONS:
    SMALLEST_ELEVENTH = 10  # index 10 opens the second window, which holds 10 to 19 and nothing else

# %% tags=["self-check", "jax"]
# Self-check: shuffle with 300 seeds and look at the 11th element
answered(SMALLEST_ELEVENTH, "which elements share a window with index 10? (A buffer could hold 0 back; a window "
                            "cannot)")
if importlib.util.find_spec("grain") is not None:  # Colab's TPU runtime
    import grain

    shuffled_by = "grain"
    elevenths = [int(grain.experimental.WindowShuffleMapDataset(grain.MapDataset.range(100), window_size=10,
                                                                seed=s)[10]) for s in range(300)]
else:
    shuffled_by = "a window shuffle in NumPy"
    elevenths = [int(np.concatenate([np.random.default_rng(s).permutation(w) for w in
                                     np.split(np.arange(100), 10)])[10]) for s in range(300)]
print(f"predicted {SMALLEST_ELEVENTH}; over 300 seeds ({shuffled_by}) the 11th element was at least "
      f"{min(elevenths)}")
check(SMALLEST_ELEVENTH == min(elevenths), "which elements share a window with index 10?")
print("Exercise 1: correct.")

# %% [markdown]
# ### Many files: interleave
#
# Data in the cloud is a set of shards (TFRecord files). `interleave` reads several at once, so one slow
# file does not stall the stream; `deterministic=False` lets it return whichever is ready first.

# %% tags=["jax"]
print("TFRecord files and interleave belong to tf.data; without TensorFlow, grain (installed on Colab's TPU "
      "runtime) reads sharded files with parallel workers.")

# %% tags=["tf"]
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
# ## Input-bound or compute-bound
#
# A step waits for whichever is slower: the host preparing the next batch, or the device computing this one. When
# the input is the slow side, a faster model changes nothing; preparing batches ahead, in parallel, does. In
# `tf.data` that is `map(..., num_parallel_calls=AUTOTUNE)` and `prefetch`; a `keras.utils.PyDataset` gets it from
# `workers=N` (threads, or processes with `use_multiprocessing=True`), which prepare the next batches while `fit`
# trains.

# %% [markdown]
# ## steps_per_execution: several steps per call
#
# `fit` calls the compiled step once per batch, and each call has a fixed cost on the host: dispatching to the
# device, a callback, a progress update, reading back the loss. On a TPU, whose step takes a millisecond or
# less, that overhead can be most of the time. `model.compile(steps_per_execution=N)` runs N steps inside one call
# (a loop in the compiled function): Keras' main throughput setting on a TPU. Callbacks and the progress bar then
# see only every N-th step. Measured here on the zoo MLP, 128 steps of batch 32 per setting (seconds on any runtime):

# %%
rows = np.arange(2048) % len(x_small)  # 64 batches of 32
x_spe, y_spe = x_small[rows], y_small[rows]
steps_per_s = {}
for spe in (1, 8, 32):
    with runtime.strategy.scope():
        mlp = models.build("mlp", input_shape=x_spe.shape[1:], num_classes=4)
        mlp.compile(optimizer="adam", loss="sparse_categorical_crossentropy", steps_per_execution=spe)
        mlp.fit(x_spe, y_spe, batch_size=32, epochs=1, verbose=0)  # the first epoch compiles
        started = time.perf_counter()
        mlp.fit(x_spe, y_spe, batch_size=32, epochs=2, verbose=0)
    steps_per_s[spe] = 128 / (time.perf_counter() - started)
pd.Series(steps_per_s, name="steps/s").rename_axis("steps_per_execution").round(0)

# %% [markdown]
# **What you should see:** more steps per second with N above 1, most where a step is short (a TPU, or this
# small model on any device; on a busy CPU the figures are noisy). tpukit's `RunConfig(steps_per_execution="auto")`
# picks N for the hardware and the epoch (32 on a TPU, fewer where a step is long, 1 while a profile window needs
# each step on its own) and says why:

# %%
from tpukit.training import plan

print(plan.resolve_steps_per_execution("auto", runtime, steps_per_epoch=64))

# %% [markdown]
# ## Recompiles
#
# `jax.jit` and `tf.function` trace your Python function once per input *signature* (shapes and dtypes), and XLA
# compiles each trace: seconds for a real model on a TPU. A Python side effect inside the function (a `print`, a
# list append) runs only while tracing, so it counts the traces. (JAX also has `jitted._cache_size()`, a private
# API in jax 0.7.2.) In `fit`, a last partial batch is a new shape, so one more compile: make the dataset a
# multiple of the batch, or `drop_remainder=True` in `tf.data`. The same goes for a sequence padded to each
# batch's own length: pad to a few fixed lengths (buckets) instead.

# %% tags=["jax"]
shapes_seen = []


def double_sum(v):
    shapes_seen.append(tuple(v.shape))  # Python: runs only while tracing
    return keras.ops.sum(v * 2.0)


jitted_sum = jax.jit(double_sum)
for rows in (16, 16, 24):
    jitted_sum(np.ones((rows, 4), "float32"))
print(f"3 calls, {len(shapes_seen)} traces: {shapes_seen}")

# %% tags=["tf"]
shapes_seen = []


def double_sum(v):
    shapes_seen.append(tuple(v.shape))  # Python: runs only while tracing
    return keras.ops.sum(v * 2.0)


jitted_sum = tf.function(double_sum, jit_compile=True)
for rows in (16, 16, 24):
    jitted_sum(np.ones((rows, 4), "float32"))
print(f"3 calls, {len(shapes_seen)} traces: {shapes_seen}")

# %% [markdown]
# ## XLA and padding
#
# ### XLA: fusing ops
#
# Without XLA, TensorFlow runs one kernel per op, and each elementwise op reads and writes the whole tensor
# in memory. XLA compiles the function and *fuses* chains of such ops into one kernel. On a TPU everything
# goes through XLA. On JAX every jitted function is compiled by XLA, and Keras always jits the train step; running
# ops one by one, without `jax.jit`, is the unfused baseline. On TensorFlow, Keras 3.13's `jit_compile="auto"` (the
# default of `model.compile`) turns XLA **on** for a single GPU, and leaves it off on CPU-only machines (where our
# float32 CNN ran no faster with it), under **any `tf.distribute` strategy** (a model *created* in
# `strategy.scope()`: Keras records the strategy when the model is built, not when it is compiled; such as
# MirroredStrategy over several GPUs), and with op determinism on. `jit_compile=True` asks for XLA anyway
# (`RunConfig(jit_compile=True)` for a tpukit run), except under op determinism: there Keras warns "Model doesn't
# support `jit_compile=True`. Proceeding with `jit_compile=False`." and runs without it. tpukit trains one GPU under TensorFlow's
# default strategy, so XLA is on there too. tpukit's `"auto"` follows Keras, with one exception: under mixed
# precision on a TensorFlow CPU it turns XLA on for a step long enough to win the compile back (10 ms or more)
# where the CPU probe measured XLA's 16-bit math faster than TensorFlow's own kernels. That depends on the CPU:
# one AMD EPYC's kernels emulate bfloat16 (our CNN ran 9.5x faster under XLA), another's, with AVX512-BF16, run
# it natively and beat XLA. The run's notes say what was measured.
# A chain of elementwise ops is where fusion shines:

# %% tags=["jax"]
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


plain, fused = chain, jax.jit(chain)
plain_ms, xla_ms = ms_per_call(plain, values), ms_per_call(fused, values)
print(f"op by op: {plain_ms:.2f} ms, with XLA: {xla_ms:.2f} ms ({plain_ms / xla_ms:.1f}x)")

# %% tags=["tf"]
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


plain, fused = tf.function(chain), tf.function(chain, jit_compile=True)
plain_ms, xla_ms = ms_per_call(plain, values), ms_per_call(fused, values)
print(f"tf.function: {plain_ms:.2f} ms, with XLA: {xla_ms:.2f} ms ({plain_ms / xla_ms:.1f}x)")

# %% [markdown]
# ### What a TPU pads, and its matrix units
#
# A TPU stores every array in tiles: XLA pads one of the two minor dimensions of a tensor to a multiple of **8**
# and the other to a multiple of **128**, the layout chosen by heuristics (Cloud TPU performance guide,
# "Consequences of tiling", cloud.google.com/tpu/docs/performance-guide). For a `Dense` layer's
# `[batch, features]` the batch usually goes on the 8 side and the features on the 128 side. So: a per-replica
# batch in multiples of 8, and feature sizes (units, filters) in multiples of 128. Padding is computed and thrown
# away. A larger batch, in multiples of 128, fills the matrix units better, but that is throughput, not padding.
# A GPU pads nothing (cuBLAS and cuDNN run any size), but its Tensor Core kernels for 16-bit math run fastest on
# multiples of **8**. Notebook 02 measures what padding costs on the device at hand. `RunConfig` warns when the
# per-replica batch does not suit the accelerator, with the advice `padding_advice` gives:

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tpukit.RunConfig(accelerator="tpu", batch_size=100)
for warning in caught:
    print(warning.message)
print(tk_config.padding_advice(100, "gpu"))

# %% [markdown]
# The matrix units (MXUs) are systolic arrays: a v5e has 4 of 128x128 per TensorCore, 197 bfloat16 TFLOP/s per
# chip (cloud.google.com/tpu/docs/v5e); a v6e (Trillium) has 2 of 256x256, 918 TFLOP/s
# (cloud.google.com/tpu/docs/v6e). Colab's TPU runtime is one chip of either. For a matrix product
# `[batch, k] x [k, n]` an array is busy at most in proportion to `k / pad(k) x n / pad(n)`, padding to the
# array's size: a model with few features leaves most of it idle; that is how a naive Keras model ended up at
# **4.1% MXU utilization** in the 2020 post (the profile's overview shows the measured figure). The arithmetic,
# for both sizes:

# %%
def mxu_fill(k, n, size):
    pad = lambda d: -(-d // size) * size  # noqa: E731 (round up to a multiple of the array's size)
    return k / pad(k) * n / pad(n)


layers = {"first conv, 3x3 on RGB, 32 filters": (27, 32), "Dense 784 -> 10 (MNIST logits)": (784, 10),
          "3x3 conv, 64 -> 64": (576, 64), "3x3 conv, 128 -> 128": (1152, 128), "Dense 256 -> 256": (256, 256)}
pd.DataFrame({"v5e, 128x128 (%)": {name: 100 * mxu_fill(k, n, 128) for name, (k, n) in layers.items()},
              "v6e, 256x256 (%)": {name: 100 * mxu_fill(k, n, 256) for name, (k, n) in layers.items()}}).round(1)

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

# %% tags=["jax"]
images = keras.random.normal([16 if SMOKE else 64, 32, 32, 64], seed=1)


def pool_gradient(pool):
    """A compiled function: the gradient of sum(pool(v)) with respect to v."""
    total = lambda v: keras.ops.sum(pool(v, 2, strides=2))  # noqa: E731
    return jax.jit(jax.grad(total))


for pool in (keras.ops.average_pool, keras.ops.max_pool):
    print(f"{pool.__name__} gradient: {ms_per_call(pool_gradient(pool), images):.2f} ms")

# %% tags=["tf"]
images = keras.random.normal([16 if SMOKE else 64, 32, 32, 64], seed=1)


def pool_gradient(pool):
    """A compiled function: the gradient of sum(pool(v)) with respect to v."""
    total = lambda v: keras.ops.sum(pool(v, 2, strides=2))  # noqa: E731

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
#   and infeed; per-replica batch in multiples of 8, features in multiples of 128; `steps_per_execution`
#   matters most here. The input pipeline runs on
#   the TPU VM's host CPU, so an input-bound TPU is common: profile before buying more cores.
# - **GPU**: the profile adds GPU kernel stats and a kernel-launch verdict; multiples of 8 for Tensor
#   Cores; Keras turns XLA on for one GPU (and off under MirroredStrategy over several: ask with
#   `jit_compile=True`).
# - **CPU**: the device *is* the host, so input and compute compete for the same cores; a big model is
#   compute-bound whatever the pipeline, and XLA can be slower.
#
# To profile a job that is already running (another process, another machine), start a profiler server in it
# and capture on demand: notebook 06, or TensorBoard's **Capture Profile** button with the server's address.

# %% [markdown]
# ## Extra: two exercises for after class
#
# *Not part of the workshop day: the exercises on input-bound steps and on recompiles, for after class. Both
# run in seconds.*

# %% [markdown]
# ### Exercise 2: which change helps?
#
# A `PyDataset` takes 60 ms to prepare each batch (a `time.sleep`, standing in for decoding JPEGs) and feeds a
# small MLP (a Dense layer of 256 units on 32x32x3 images) for 8 steps. Two changes: halve the model (128 units),
# or keep it and read with `workers=4`. **Predict `FASTER`**: which change makes an epoch faster? The self-check
# times an epoch of each (after a compiling one), on this device: a few seconds.

# %% tags=["exercise"]
FASTER = ...  # YOUR PREDICTION: "smaller model" or "workers=4"

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["FASTER = \"smaller model\"", "FASTER = \"both the same\""]
# @title Solution
if SOLUTIONS:
    FASTER = "workers=4"  # each step waits 60 ms for its batch and computes for a few: the input is the slow side

# %% tags=["self-check"]
# Self-check: time an epoch of each, on this device
answered(FASTER, "how long does a step wait for its batch, and how long does it compute?")
check(FASTER in ("smaller model", "workers=4"), 'answer "smaller model" or "workers=4"')


class SlowBatches(keras.utils.PyDataset):
    """8 batches of 64 random images; each takes 60 ms to prepare."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        time.sleep(0.06)
        rng = np.random.default_rng(index)
        return rng.random((64, 32, 32, 3), dtype=np.float32), rng.integers(0, 4, 64)


def epoch_seconds(units, workers):
    model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(units, activation="relu"), keras.layers.Dense(4)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    batches = SlowBatches(workers=workers, use_multiprocessing=False)
    model.fit(batches, epochs=1, verbose=0)  # compiles the step
    start = time.perf_counter()
    model.fit(batches, epochs=2, verbose=0)
    return (time.perf_counter() - start) / 2


seconds = {"as it is": epoch_seconds(256, 1), "smaller model": epoch_seconds(128, 1),
           "workers=4": epoch_seconds(256, 4)}
print(", ".join(f"{name}: {1000 * s:.0f} ms/epoch" for name, s in seconds.items()))
measured = min(("smaller model", "workers=4"), key=seconds.get)
check(FASTER == measured, f"measured here: {measured} is the faster change")
print("Exercise 2: correct. An input-bound run gains nothing from a faster model.")

# %% [markdown]
# ### Exercise 3: count the compiles
#
# The same function, fresh, is called on batches of **32, 32, 48, 32, 64 and 48** rows of 8 features.
# **Predict `TRACES`**: how many times is it traced (and compiled)? The self-check counts them.

# %% tags=["exercise"]
TRACES = ...  # YOUR PREDICTION: a whole number

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["TRACES = 6", "TRACES = 1", "TRACES = 4"]
# @title Solution
if SOLUTIONS:
    TRACES = 3  # one per new shape: 32, 48, 64; a shape seen before reuses its compiled function

# %% tags=["self-check", "jax"]
# Self-check: a fresh jitted function, a Python counter inside it
answered(TRACES, "a jitted function is traced once per new input shape")
traced = []


def step(v):
    traced.append(tuple(v.shape))  # Python: runs only while tracing
    return keras.ops.sum(v * 2.0)


fresh = jax.jit(step)
for rows in (32, 32, 48, 32, 64, 48):
    fresh(np.ones((rows, 8), "float32"))
print(f"6 calls, {len(traced)} traces: {traced}")
check(TRACES == len(traced), "count the distinct shapes")
print("Exercise 3: correct.")

# %% tags=["self-check", "tf"]
# Self-check: a fresh jitted function, a Python counter inside it
answered(TRACES, "a jitted function is traced once per new input shape")
traced = []


def step(v):
    traced.append(tuple(v.shape))  # Python: runs only while tracing
    return keras.ops.sum(v * 2.0)


fresh = tf.function(step, jit_compile=True)
for rows in (32, 32, 48, 32, 64, 48):
    fresh(np.ones((rows, 8), "float32"))
print(f"6 calls, {len(traced)} traces: {traced}")
check(TRACES == len(traced), "count the distinct shapes")
print("Exercise 3: correct.")

# %% [markdown]
# ## Extra: clean up
#
# In your own sessions keep TensorBoard running. The tests stop the one they started.

# %%
if SMOKE and isinstance(board, tensorboard.Launched):
    print("stopped TensorBoard:", tensorboard.stop(board))
