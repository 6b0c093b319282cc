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
# # Scaling out on JAX and TPUs: devices, `keras.distribution`, several processes
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/24<br>
# **Last modified:** 2026/11/26<br>
# **Description:** Plain JAX devices and sharded arrays, Keras 3 on JAX with `keras.distribution.DataParallel` and
# `ModelParallel` over 8 simulated devices, then tpukit's `connect()` and the same training across two processes
# with `python -m tpukit launch`.<br>
# **Accelerator:** TPU (Colab's TPU runtime: JAX, no TensorFlow), GPU or CPU; the lessons run on 8 simulated CPU
# devices wherever the runtime has fewer than 8
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/07_jax_and_tpu_scale_out.ipynb)

# %% [markdown]
# ## Introduction
#
# Colab's TPU runtime is a TPU VM with JAX and Keras 3 and no TensorFlow: there Keras runs on JAX, and data
# parallelism is `keras.distribution`, not `tf.distribute`. Notebook 06 teaches TensorFlow's multi-worker
# strategies; this one teaches the JAX route, which is also how tpukit trains across processes.
#
# **You will learn to:**
#
# - list JAX's devices, lay a batch out over them with a `Mesh` and a `NamedSharding`, and read its shards;
# - train a Keras 3 model with `keras.distribution.DataParallel`: variables replicated, each batch split;
# - split a layer's weights too, with `DeviceMesh`, `LayoutMap` and `ModelParallel`;
# - see what `tpukit.connect()` and `tpukit.train` do with the same API;
# - predict a run's global batch, then run it on two processes with `python -m tpukit launch`;
# - know what changes on a real TPU: one v5e or v6e chip on Colab, 8 chips on Kaggle's v5e-8, a pod slice.
#
# Colab's TPU runtime has one chip, and one device shows nothing about sharding, so the setup asks XLA for 8
# simulated CPU devices (the way JAX's own tests get them) and the lessons run on those wherever the runtime has
# fewer than 8 devices of its own. They share the CPU's cores: they teach the layouts, not the speed.

# %% [markdown]
# ## Setup
#
# XLA reads `--xla_force_host_platform_device_count` once, when JAX starts its backends (its first device list or
# array; importing JAX or Keras does not start them), so it is set here, before anything uses JAX. It splits only
# the CPU: on a TPU or GPU runtime `jax.devices()` still lists the real devices, and the lessons take their 8 from
# `jax.devices("cpu")` there. Run after other JAX work, the flag comes too late: restart the runtime first.

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
import importlib.util
import json
import os
import runpy
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SIMULATED = 8  # devices for the lessons: 8 simulated CPU devices where the runtime has fewer of its own
# XLA reads this flag when JAX starts its backends, so it is set before anything uses JAX.
COUNT_FLAG = "--xla_force_host_platform_device_count"
flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(COUNT_FLAG)]
os.environ["XLA_FLAGS"] = " ".join(flags + [f"{COUNT_FLAG}={SIMULATED}"])

import numpy as np

from tpukit.teaching import SOLUTIONS, answered, check  # the exercises' self-checks

HAS_JAX = importlib.util.find_spec("jax") is not None
if HAS_JAX:
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    # The runtime's own devices where it has 8 (Kaggle's v5e-8), else the 8 CPU devices (Colab's TPU: one chip)
    DEVICES = (jax.devices() if len(jax.devices()) >= SIMULATED else jax.devices("cpu"))[:SIMULATED]
    print(f"JAX {jax.__version__}: this runtime has {len(jax.devices())} {jax.devices()[0].platform.upper()} "
          f"device(s); the lessons use {len(DEVICES)} {DEVICES[0].platform.upper()} devices")
else:
    DEVICES = [None] * SIMULATED  # no JAX: the fallbacks below split NumPy arrays instead
    print("JAX is not installed in this runtime (Colab's TPU runtime has it): the JAX cells print what they skip.")
ON_JAX = os.environ["KERAS_BACKEND"] == "jax"  # this kernel's Keras; on TensorFlow, the Keras cells run in a subprocess
WORKDIR = Path(tempfile.mkdtemp(prefix="tpukit-07-"))  # scripts written by this notebook
LOGDIR = Path("runs") / "07-jax-scale-out"


def run_on_jax(name, source, *args):
    """Run a plain-Keras script with Keras on JAX: in this kernel where its Keras runs on JAX (returns the script's
    variables), else in a fresh process with KERAS_BACKEND=jax (Keras picks its backend once per process)."""
    script = WORKDIR / name
    script.write_text(source)
    if not HAS_JAX:
        print("skipped: needs JAX (installed on Colab's TPU runtime)")
    elif ON_JAX:
        saved_argv, sys.argv = sys.argv, [str(script), *args]
        try:
            return runpy.run_path(str(script), run_name="__main__")  # in this kernel, on its devices
        finally:
            sys.argv = saved_argv
    else:
        child = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600,
                               env={**os.environ, "KERAS_BACKEND": "jax", "CUDA_VISIBLE_DEVICES": ""})
        print(child.stdout or child.stderr[-3000:])
        assert child.returncode == 0, child.stderr[-3000:]
    return None


def launch(args):
    """Run `python -m tpukit ARGS` on the CPU; return the chief's JSON result (its last line)."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "TF_CONFIG")}  # each worker sets its own
    env.update(JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")  # the kernel keeps the TPU or GPU
    done = subprocess.run([sys.executable, "-m", "tpukit", *args], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])

# %% [markdown]
# ## Devices and a sharded array
#
# JAX numbers its devices: `jax.devices()` lists them (8 simulated `CpuDevice`s on a CPU runtime; one
# `TpuDevice` on Colab's TPU runtime, a single v5e or v6e chip; 8 on Kaggle's v5e-8 or a v2-8/v3-8 board), and
# `jax.devices("cpu")` lists the CPU's. The lessons use the setup's 8 `DEVICES`. A **mesh** names axes over them,
# and a **sharding** says how an array's dimensions map onto those axes. Data parallelism is one mesh axis,
# `batch`: the batch dimension is split across the devices, every other dimension stays whole. `jax.device_put`
# puts each slice on its device, and every jitted function then runs on all of them at once.

# %%
if HAS_JAX:
    mesh = Mesh(np.array(DEVICES), ("batch",))
    split = NamedSharding(mesh, PartitionSpec("batch"))  # dimension 0 over the "batch" axis
    images = jax.device_put(np.arange(16 * 4, dtype=np.float32).reshape(16, 4), split)
    for shard in images.addressable_shards[:3]:
        print(shard.device, "holds rows", shard.index[0], "shape", shard.data.shape)
    print("every device's shard:", [shard.data.shape for shard in images.addressable_shards], "of", images.shape)
    print("mean over the whole batch, computed where the shards live:", float(jax.jit(lambda a: a.mean())(images)))
else:
    print("skipped: needs JAX")

# %% [markdown]
# ### Exercise 1: what shape is each device's shard?
#
# A global batch of **64** images (32x32x3, so shape `(64, 32, 32, 3)`) is laid out with the sharding above,
# `PartitionSpec("batch")`, over the setup's 8 `DEVICES`. **Predict `SHARD_SHAPE`**, the shape of the array one
# device holds; the self-check lays the batch out and reads every shard's shape.

# %% tags=["exercise"]
SHARD_SHAPE = ...  # YOUR PREDICTION: one device's shard, as a tuple

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["SHARD_SHAPE = (64, 32, 32, 3)", "SHARD_SHAPE = (8, 4, 4, 3)", "SHARD_SHAPE = (8,)", "SHARD_SHAPE = 8"]
# @title Solution
if SOLUTIONS:
    SHARD_SHAPE = (64 // 8, 32, 32, 3)  # only the batch dimension is split, 8 ways; the images stay whole

# %% tags=["self-check"]
# Self-check: lay the batch out over the 8 devices and measure the shards
answered(SHARD_SHAPE, "PartitionSpec('batch') splits dimension 0 only, evenly among the devices")
batch = np.zeros((64, 32, 32, 3), np.float32)
if HAS_JAX:
    laid_out = jax.device_put(batch, NamedSharding(Mesh(np.array(DEVICES), ("batch",)), PartitionSpec("batch")))
    shapes = [shard.data.shape for shard in laid_out.addressable_shards]
else:
    shapes = [a.shape for a in np.array_split(batch, len(DEVICES))]  # what the sharding would do
print(f"{len(shapes)} devices hold shards of shape {sorted(set(shapes))}")
check(isinstance(SHARD_SHAPE, (tuple, list)) and {tuple(SHARD_SHAPE)} == set(shapes),
      f"each of the {len(shapes)} devices holds {shapes[0]}: which dimension does 'batch' split, and how many ways?")
print("Exercise 1: correct. A global batch that does not divide evenly is refused: keep it a multiple of the devices.")

# %% [markdown]
# ## Keras 3 on JAX: `keras.distribution.DataParallel`
#
# Keras 3 brings the same idea to `fit`. `keras.distribution.DataParallel(devices=...)` builds the one-axis mesh.
# Set it for the whole program with `keras.distribution.set_distribution`, and every variable created afterwards
# is **replicated** on each device, while every batch `fit` takes is **split** along the batch axis; XLA inserts
# the all-reduce of the gradients. Keras looks the distribution up when `fit` runs, not when the model was
# built: used as a scope instead (`with distribution.scope():`), the scope must hold `fit` too, or each device
# computes the whole batch. There is no `strategy.run`: the same `compile`/`fit` as on one device.
# (`tf.distribute`'s MirroredStrategy is the TensorFlow counterpart: notebook 01.)
#
# The script below is plain Keras, to take home. On Colab's TPU runtime this kernel's Keras already runs on JAX,
# and `run_on_jax` (from the setup) runs the script right here; where the kernel's Keras runs on TensorFlow, it
# runs in a fresh process with `KERAS_BACKEND=jax`, since Keras picks its backend once per process. At full size,
# 10 epochs of the 1,792 digits take about 20 s on a CPU.

# %%
DATA_PARALLEL = textwrap.dedent("""
    import sys

    import jax
    import keras
    import numpy as np

    # 8 devices: the runtime's own where it has 8, else the CPU's (the notebook's XLA flag makes 8 of them)
    devices = jax.devices() if len(jax.devices()) >= 8 else jax.devices("cpu")[:8]
    distribution = keras.distribution.DataParallel(devices=devices)
    keras.distribution.set_distribution(distribution)  # variables replicated, batches split over the devices
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    kernel = model.weights[0].value
    print("kernel laid out as", kernel.sharding.spec, "on", len(kernel.sharding.device_set), "devices (replicated)")

    from sklearn.datasets import load_digits
    digits = load_digits()
    batch = 16 * len(devices)
    keep = len(digits.target) // batch * batch  # whole batches only: each must split evenly over the devices
    x, y = (digits.images[:keep] / 16).astype("float32")[..., None], digits.target[:keep]
    fed = keras.distribution.distribute_tensor(x[:batch], distribution.get_data_layout(x[:batch].shape))
    print("fit splits a batch of", fed.shape, "into", [s.data.shape for s in fed.addressable_shards])
    history = model.fit(x, y, batch_size=batch, epochs=int(sys.argv[1]), verbose=0)
    print("Keras", keras.__version__, "on", keras.backend.backend(), "| loss per epoch:",
          [round(v, 3) for v in history.history["loss"]])
    print("TensorFlow imported in this process:", "tensorflow" in sys.modules)
    keras.distribution.set_distribution(None)  # leave no global distribution behind
""")
data_parallel = run_on_jax("data_parallel.py", DATA_PARALLEL, "2" if SMOKE else "10")

# %% [markdown]
# **What you should see:** the kernel's `PartitionSpec(None, None)` splits no dimension, so each of the 8 devices
# holds all of it (replicated); a batch of 128 goes in as 8 shards of 16; the loss falls epoch by epoch; and
# `TensorFlow imported in this process: False` on Colab's TPU runtime (where TensorFlow is installed, Keras may
# import it for its data adapters).

# %% [markdown]
# ## Splitting the weights too: `DeviceMesh`, `LayoutMap`, `ModelParallel`
#
# Data parallelism keeps a whole copy of every weight on every device. When a layer is too big for that, its
# weights are split as well: a 2-D **`DeviceMesh`** of 2 x 4 devices with axes `batch` and `model`, a
# **`LayoutMap`** that says, per variable, which of its dimensions go over which mesh axis, and
# **`ModelParallel(layout_map=..., batch_dim_name="batch")`**. The map's keys are regular expressions matched
# against each variable's path (`sequential/hidden/kernel`); write them to match the whole path (`.*hidden/kernel`):
# Keras 3.13 searches the path for the key, newer releases match it in full. Here the hidden layer's kernel
# `(64, 256)` is split by columns over `model` (4 ways, `(64, 64)` on each device) and the next kernel by rows, so
# each device keeps a quarter of the units; each batch is split 2 ways over `batch`. Variables the map does not
# name are replicated. (About 10 s on a CPU at full size.)

# %%
MODEL_PARALLEL = textwrap.dedent("""
    import sys

    import jax
    import keras
    import numpy as np

    devices = jax.devices() if len(jax.devices()) >= 8 else jax.devices("cpu")[:8]
    mesh = keras.distribution.DeviceMesh(shape=(2, 4), axis_names=("batch", "model"), devices=devices[:8])
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[".*hidden/kernel"] = (None, "model")  # its columns (the 256 units) split over "model"
    layout_map[".*hidden/bias"] = ("model",)
    layout_map[".*classify/kernel"] = ("model", None)  # its rows follow the hidden units
    distribution = keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")

    keras.utils.set_random_seed(0)
    with distribution.scope():  # build, compile and fit inside: Keras reads the distribution when fit runs
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu", name="hidden"),
                                  keras.layers.Dense(10, activation="softmax", name="classify")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        for v in model.weights:
            print(f"{v.path:<26} {str(v.shape):<10} {str(v.value.sharding.spec):<30} "
                  f"per device {v.value.addressable_shards[0].data.shape}")

        from sklearn.datasets import load_digits
        digits = load_digits()
        keep = len(digits.target) // 64 * 64
        x, y = (digits.data[:keep] / 16).astype("float32"), digits.target[:keep]
        history = model.fit(x, y, batch_size=64, epochs=int(sys.argv[1]), verbose=0)
    print("loss per epoch:", [round(v, 3) for v in history.history["loss"]])
""")
model_parallel = run_on_jax("model_parallel.py", MODEL_PARALLEL, "1" if SMOKE else "5")

# %% [markdown]
# **What you should see:** `hidden/kernel (64, 256)` laid out as `PartitionSpec(None, 'model')`, `(64, 64)` per
# device; `hidden/bias` `(64,)` per device; `classify/kernel` `(64, 10)`; `classify/bias` replicated; and the loss
# falling. Each batch of 64 reaches the devices as 32 rows each: the 4 devices of one `batch` row share the same
# 32 and compute a quarter of the hidden units for them.

# %% [markdown]
# ## tpukit: `connect()` and `train` on JAX
#
# `tpukit.connect()` does the data-parallel part for you on the JAX backend: its `Runtime.strategy` is a
# `DataParallel` over `jax.devices()` (on one device, such as Colab's one chip, `OneDevice` with no distribution:
# `DataParallel` over one device compiled the train step three times), and `tpukit.train` builds, compiles and
# fits inside its scope, so a `RunConfig` trains the same way on JAX as on TensorFlow. What it adds: the
# TPU/GPU/CPU choice with the reasons, the precision to train in, a per-replica batch, and the run's records.
# It uses the runtime's real devices, not the lessons' simulated ones.

# %%
if HAS_JAX and ON_JAX:
    import tpukit

    runtime = tpukit.connect()
    print(runtime.describe())
    print("strategy:", type(runtime.strategy).__name__, "over", runtime.replicas, "devices")
    run = tpukit.train(tpukit.RunConfig(dataset="digits", model="mlp", batch_size=16, epochs=1,
                                        steps_per_epoch=4 if SMOKE else None, logdir=str(LOGDIR), name="data-parallel"),
                       runtime)
    print(run.summary())
else:
    print("skipped in this kernel (Keras runs on TensorFlow here): `python -m tpukit train --backend jax` runs it,"
          " as the next section does")

# %% [markdown]
# ## Several processes: `python -m tpukit launch`
#
# One process drives the devices of one machine. Past that (a TPU pod slice, several GPU machines) every machine runs
# a process, and the processes join into one JAX runtime: `keras.distribution.initialize()` calls
# `jax.distributed.initialize`, then `DataParallel` spans the devices of every process and each process feeds its
# own share of every global batch. `python -m tpukit launch --workers N -- train ...` does this on one machine, for
# learning and testing: it starts N processes on 127.0.0.1 with a free coordinator port and sets Keras' variables
# (`KERAS_DISTRIBUTION_JOB_ADDRESSES`, `_NUM_PROCESSES`, `_PROCESS_ID`) for each. `--replicas` is per process:
# simulated CPU devices here. (`launch`, defined in the setup, runs `python -m tpukit` with the CPU only, so the
# kernel keeps the TPU or GPU, and returns the chief's `--json` result.)

# %% [markdown]
# tpukit counts the other way round: `--batch-size` (and `RunConfig.batch_size`) is **per replica**, so a run's
# global batch grows with its devices, as `tf.distribute` code usually writes it. The launch below, 2 processes of
# 4 devices each at `--batch-size 4`, trains on 2 x 4 x 4 = 32 examples a step, and its result says so (about 20 s
# on a CPU).

# %%
LAUNCH = ["launch", "--workers", "2", "--", "train", "--backend", "jax", "--accelerator", "cpu", "--model", "mlp",
          "--dataset", "digits", "--replicas", "4", "--batch-size", "4", "--epochs", "1",
          "--steps-per-epoch", "5" if SMOKE else "40", "--logdir", str(LOGDIR), "--json"]
print("python -m tpukit", " ".join(LAUNCH))
if HAS_JAX:
    launched = launch(LAUNCH)
    print(f"{launched['status']}: {launched['replicas']} replicas on {len(launched['devices'])} devices "
          f"{launched['devices']}, global batch {launched['global_batch_size']}, fingerprint {launched['fingerprint']}")
else:
    print("launch skipped (needs JAX)")

# %% [markdown]
# **What you should see:** `completed`, 8 replicas, and devices numbered 0-3 for the chief and 2048-2051 for the
# other process (JAX numbers each process's devices in its own range). Only the chief
# writes the run directory; the other process saves in step with it into a temporary directory. Against one
# process with all 8 devices the weights agree to about 1e-7, not bitwise: the all-reduce across processes adds
# the gradients in another order (docs/scaling.md has the measurements).
#
# If a worker dies, the launcher stops the others and names it; the last whole-epoch backup is kept, and
# `python -m tpukit train --resume RUN_DIR` continues it in one process (notebook 06 kills and resumes a job).

# %% [markdown]
# ## On a real TPU: a chip, a board, a pod slice
#
# - **Colab's TPU runtime** is one chip, a v5e or a v6e (v5e-1 or v6e-1; googlecolab/backend-info, 2026-08-19):
#   `jax.devices()` lists one `TpuDevice`, and tpukit trains on it with no distribution (`OneDevice`): plain
#   single-device training. (The lessons above ran there on `jax.devices("cpu")`.) A v5e chip has 4 MXUs of
#   128x128 per TensorCore and 197 bf16 TFLOP/s (cloud.google.com/tpu/docs/v5e); a v6e (Trillium) has 2 MXUs of
#   256x256 per TensorCore and 918 bf16 TFLOP/s (cloud.google.com/tpu/docs/v6e). The old "8 replicas" of the
#   2020 notebooks holds on Kaggle's v5e-8 (8 chips) or a v2-8/v3-8 board, and here with simulated devices.
# - **A pod slice** has several hosts. Every host runs the same command; JAX finds the coordinator and each host's
#   id from the TPU's metadata, so only the number of processes is needed:
#
# ```bash
# gcloud compute tpus tpu-vm ssh NAME --zone ZONE --worker=all --command \
#   "KERAS_DISTRIBUTION_NUM_PROCESSES=4 python -m tpukit train --backend jax --dataset mnist5k --model cnn \
#    --batch-size 128 --logdir gs://BUCKET/runs"
# ```
#
# - `--batch-size` stays per replica (per chip), and the global batch is that times every chip of the slice.
#   Keep it a multiple of 8 per chip: XLA tiles a Dense layer's `[batch, features]` as 8 x 128 on a TPU and pads
#   the rest (Cloud TPU performance guide, "Consequences of tiling"); a larger batch, in multiples of 128, fills
#   the MXU better, which is throughput, not padding (notebook 05). The logdir must be one every host can reach
#   (a bucket).
# - **GPUs**: one process per machine (or per GPU) with the three `KERAS_DISTRIBUTION_*` variables; the all-reduce
#   uses NCCL.

# %% [markdown]
# ## What you should see
#
# - 8 devices for the lessons everywhere (simulated CPU devices; on Colab's TPU runtime beside its one chip), and a
#   batch of 16 split into 2 rows per device.
# - `DataParallel`: the Keras model's variables replicated (`PartitionSpec(None, None)`), a batch of 128 fed as
#   8 shards of 16, and the loss falling.
# - `ModelParallel`: the hidden kernel split as `PartitionSpec(None, 'model')`, `(64, 64)` on each device.
# - A two-process launch that completes with 8 replicas and a global batch of 32.
#
# ## What changes between TPU, GPU and CPU runtimes
#
# | | TPU (Colab's TPU runtime) | GPU | CPU |
# |---|---|---|---|
# | Keras backend from the first cell | `jax` (no TensorFlow there) | `tensorflow` (set `KERAS_BACKEND=jax` to use this notebook's route) | `tensorflow`; the JAX cells run in subprocesses |
# | Devices | 1 v5e or v6e chip (the lessons: 8 simulated CPU devices); 8 on Kaggle's v5e-8 | the GPUs (the lessons: 8 simulated CPU devices) | simulated with `--xla_force_host_platform_device_count` |
# | All-reduce | over the chips' interconnect (ICI), across every host of a slice; between slices (Multislice) over the data-center network (DCN) | NCCL | gloo across processes |
# | Several processes | every host of a pod slice runs the command | `KERAS_DISTRIBUTION_*` on each machine | `python -m tpukit launch` |

# %% [markdown]
# ## Next
#
# [Notebook 08](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/08_fine_tuning_a_pretrained_model.ipynb)
# fine-tunes a pretrained Gemma with LoRA on this runtime.

# %% [markdown]
# ## Extra: what `fit(batch_size=...)` gives each device
#
# For after class: it practises "Keras 3 on JAX: `keras.distribution.DataParallel`".

# %% [markdown]
# ### Exercise 2: what does `fit(batch_size=...)` give each device?
#
# In plain Keras, `model.fit(x, y, batch_size=96)` under `DataParallel` over the 8 devices of this lesson (as in
# the `DataParallel` script above). **Predict `ROWS_PER_DEVICE`**: how many rows of each batch one device holds
# and computes. The self-check lays a batch of 96 out as Keras' JAX trainer does for `fit` (`distribute_tensor`
# with the distribution's data layout, in a Keras on JAX) and reads every device's shard.

# %% tags=["exercise"]
ROWS_PER_DEVICE = ...  # YOUR PREDICTION: rows of a fit(batch_size=96) batch on each of the 8 devices

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["ROWS_PER_DEVICE = 96", "ROWS_PER_DEVICE = 96 * 8"]
# @title Solution
if SOLUTIONS:
    ROWS_PER_DEVICE = 96 // 8  # Keras' batch_size is the global batch: fit splits it over the devices

# %% tags=["self-check"]
# Self-check: lay a fit batch of 96 out over the 8 devices as Keras does, and read each device's shard
answered(ROWS_PER_DEVICE, "is fit's batch_size each device's batch, or the one the devices share?")
SHARDS = textwrap.dedent("""
    import json, sys

    import jax
    import keras
    import numpy as np

    devices = jax.devices() if len(jax.devices()) >= 8 else jax.devices("cpu")[:8]
    distribution = keras.distribution.DataParallel(devices=devices)
    batch = np.zeros((96, 8, 8, 1), "float32")  # one batch of fit(batch_size=96)
    fed = keras.distribution.distribute_tensor(batch, distribution.get_data_layout(batch.shape))
    rows = [s.data.shape[0] for s in fed.addressable_shards]
    with open(sys.argv[1], "w") as f:
        json.dump(rows, f)
    print("rows on each device:", rows)
""")
shards_file = WORKDIR / "shards.json"
run_on_jax("shards.py", SHARDS, str(shards_file))
if HAS_JAX:
    rows = json.loads(shards_file.read_text())
    print(f"Keras laid a batch of 96 out as {len(rows)} shards of {sorted(set(rows))} rows")
    measured = rows[0]
    check(len(set(rows)) == 1, f"the shards differ: {rows}")
else:
    measured = 96 // 8
    print("skipped (needs JAX): checked against the rule instead")
check(ROWS_PER_DEVICE == measured, f"each device holds {measured} rows: fit's batch_size is the global batch, "
                                   "split over the devices")
print("Exercise 2: correct.")
