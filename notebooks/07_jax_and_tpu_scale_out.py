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
# # Scaling out on JAX and TPUs: devices, `keras.distribution`, several processes
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/24<br>
# **Last modified:** 2026/11/24<br>
# **Description:** Plain JAX devices and sharded arrays, Keras 3 on JAX with `keras.distribution.DataParallel` over
# simulated devices, and the same training across two processes with `python -m tpukit launch`.<br>
# **Accelerator:** TPU (Colab's TPU runtime: JAX, no TensorFlow) or CPU with simulated devices
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
# - predict a run's global batch, then run it on two processes with `python -m tpukit launch`;
# - know what changes on a real TPU: one v5e chip on Colab's free tier, 8 chips on Kaggle's v5e-8, a pod slice.
#
# Everything runs on the CPU too: the setup asks XLA for 8 simulated CPU devices, the way JAX's own tests do.

# %% [markdown]
# ## Setup
#
# XLA reads `--xla_force_host_platform_device_count` once, when JAX starts, so it is set here, before anything
# imports JAX. It splits only the CPU: on a TPU or GPU runtime JAX uses the real devices and ignores it.

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
import importlib.util
import json
import os
import runpy
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

SIMULATED = 8  # CPU devices to simulate; real TPUs and GPUs are used as they are
HAS_JAX = importlib.util.find_spec("jax") is not None
if HAS_JAX and "jax" not in sys.modules:
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={SIMULATED}"
if HAS_JAX:
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    DEVICES = jax.devices()
    print(f"JAX {jax.__version__}: {len(DEVICES)} {DEVICES[0].platform.upper()} device(s)")
else:
    DEVICES = [None]  # one device: the fallbacks below split NumPy arrays instead
    print("JAX is not installed in this runtime (Colab's TPU runtime has it): the JAX cells print what they skip.")
ON_JAX = os.environ["KERAS_BACKEND"] == "jax"  # this kernel's Keras; on TensorFlow, the Keras cells run in a subprocess
WORKDIR = Path(tempfile.mkdtemp(prefix="tpukit-07-"))  # scripts written by this notebook
LOGDIR = Path("runs") / "07-jax-scale-out"

# The exercises leave `...` for you to fill in. Each has a hidden solution cell that runs only with
# TPUKIT_SOLUTIONS=1 (the tests set it), so the self-checks test your answer, not ours.
SOLUTIONS = os.environ.get("TPUKIT_SOLUTIONS") == "1"


def answered(value, hint):
    """The start of every self-check: an answer still `...` fails here, with a hint."""
    assert value is not ..., f"Not answered yet: replace the `...` in the cell above. Hint: {hint}"
    return value


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
# JAX numbers its devices: `jax.devices()` lists them (8 simulated `CpuDevice`s here; one `TpuDevice` on Colab's
# free TPU, a single v5e chip; 8 on Kaggle's v5e-8 or a v2-8/v3-8 board). A **mesh** names axes over them, and a
# **sharding** says how an array's dimensions map onto those axes. Data parallelism is one mesh axis, `batch`:
# the batch dimension is split across the devices, every other dimension stays whole. `jax.device_put` puts each
# slice on its device, and every jitted function then runs on all of them at once.

# %%
if HAS_JAX:
    mesh = Mesh(np.array(DEVICES), ("batch",))
    split = NamedSharding(mesh, PartitionSpec("batch"))  # dimension 0 over the "batch" axis
    images = jax.device_put(np.arange(16 * 4, dtype=np.float32).reshape(16, 4), split)
    for shard in images.addressable_shards[:3]:
        print(shard.device, "holds rows", shard.index[0], "shape", shard.data.shape)
    print("mean over the whole batch, computed where the shards live:", float(jax.jit(lambda a: a.mean())(images)))
else:
    print("skipped: needs JAX")

# %% [markdown]
# ### Exercise 1: how big is each device's shard?
#
# A global batch of **64** images (32x32x3) is laid out with `split` over this runtime's `len(DEVICES)` devices.
# **Predict `ROWS_PER_DEVICE`**, the number of images each device holds; the self-check lays the batch out and
# reads the first shard's shape.

# %% tags=["exercise"]
ROWS_PER_DEVICE = ...  # YOUR PREDICTION: images per device, for this runtime's number of devices

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    ROWS_PER_DEVICE = 64 // len(DEVICES)  # the batch dimension is split evenly: 8 each on 8 devices, 64 on one

# %% tags=["self-check"]
# Self-check: lay the batch out and measure the shard
answered(ROWS_PER_DEVICE, "the batch dimension is divided evenly among len(DEVICES) devices")
batch = np.zeros((64, 32, 32, 3), np.float32)
if HAS_JAX:
    batch_mesh = Mesh(np.array(DEVICES), ("batch",))
    laid_out = jax.device_put(batch, NamedSharding(batch_mesh, PartitionSpec("batch")))
    measured = laid_out.addressable_shards[0].data.shape[0]
else:
    measured = np.array_split(batch, len(DEVICES))[0].shape[0]  # what the sharding would do
print(f"{len(DEVICES)} device(s): predicted {ROWS_PER_DEVICE}, measured {measured} images per device")
assert ROWS_PER_DEVICE == measured, "not quite: divide the global batch, 64, by the number of devices"
print("Exercise 1: correct. A global batch that does not divide evenly is refused: keep it a multiple of them.")

# %% [markdown]
# ## Keras 3 on JAX: `keras.distribution.DataParallel`
#
# Keras 3 brings the same idea to `fit`. `keras.distribution.DataParallel(devices=...)` builds the one-axis mesh;
# set it globally with `keras.distribution.set_distribution` (or use it as a scope), and every variable created
# afterwards is **replicated** on each device, while every batch `fit` takes is **split** along the batch axis.
# XLA inserts the all-reduce of the gradients. There is no `strategy.scope()` and no `strategy.run`: the same
# `compile`/`fit` as on one device. (`tf.distribute`'s MirroredStrategy is the TensorFlow counterpart: notebook 01.)
#
# The script below is plain Keras. On Colab's TPU runtime this kernel's Keras already runs on JAX, and the script
# runs right here (`runpy`), on the TPU. Where the kernel's Keras runs on TensorFlow, it runs in a fresh process with
# `KERAS_BACKEND=jax`, since Keras picks its backend once per process.

# %%
DATA_PARALLEL = textwrap.dedent("""
    import sys

    import jax
    import keras
    import numpy as np

    devices = jax.devices()
    distribution = keras.distribution.DataParallel(devices=devices)
    keras.distribution.set_distribution(distribution)  # variables replicated, batches split over the devices
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    print("kernel laid out as", model.weights[0].value.sharding.spec, "on", len(devices), "devices (replicated)")

    from sklearn.datasets import load_digits
    digits = load_digits()
    batch = 16 * len(devices)
    keep = len(digits.target) // batch * batch  # whole batches only: each must split evenly over the devices
    x, y = (digits.images[:keep] / 16).astype("float32")[..., None], digits.target[:keep]
    history = model.fit(x, y, batch_size=batch, epochs=int(sys.argv[1]), verbose=0)
    print("Keras", keras.__version__, "on", keras.backend.backend(), "| loss per epoch:",
          [round(v, 3) for v in history.history["loss"]])
    print("TensorFlow imported in this process:", "tensorflow" in sys.modules)
    keras.distribution.set_distribution(None)  # leave no global distribution behind
""")
script = WORKDIR / "data_parallel.py"
script.write_text(DATA_PARALLEL)
EPOCHS = "2" if SMOKE else "10"

if not HAS_JAX:
    print("skipped: needs JAX (installed on Colab's TPU runtime)")
elif ON_JAX:
    saved_argv, sys.argv = sys.argv, [str(script), EPOCHS]
    try:
        runpy.run_path(str(script), run_name="__main__")  # in this kernel, on its devices
    finally:
        sys.argv = saved_argv
else:
    child = subprocess.run([sys.executable, str(script), EPOCHS], capture_output=True, text=True, timeout=600,
                           env={**os.environ, "KERAS_BACKEND": "jax", "CUDA_VISIBLE_DEVICES": ""})
    print(child.stdout or child.stderr[-3000:])
    assert child.returncode == 0, child.stderr[-3000:]

# %% [markdown]
# **What you should see:** the kernel's `PartitionSpec(None, None)` splits no dimension, so every device holds all
# of it (replicated);
# the loss falls epoch by epoch; and `TensorFlow imported in this process: False` on Colab's TPU runtime (here,
# where TensorFlow is installed, Keras may import it for its data adapters).
#
# `tpukit.connect()` does the same on the JAX backend: its `Runtime.strategy` is this `DataParallel` (on one
# device `OneDevice`, no distribution: `DataParallel` over one device compiled the train step three times), and
# `tpukit.train` enters it, so a `RunConfig` trains the same way on JAX as on TensorFlow.

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
# ### Exercise 2: predict the run, then launch it
#
# Read the command below: 2 processes, 4 devices each, a per-replica batch of 4. **Predict `GLOBAL_BATCH`**,
# the examples in one training step across all processes. The self-check launches the run (about 20 s on a CPU)
# and reads the chief's result.

# %% tags=["exercise"]
LAUNCH = ["launch", "--workers", "2", "--", "train", "--backend", "jax", "--accelerator", "cpu", "--model", "mlp",
          "--dataset", "digits", "--replicas", "4", "--batch-size", "4", "--epochs", "1",
          "--steps-per-epoch", "5" if SMOKE else "40", "--logdir", str(LOGDIR), "--json"]
print("python -m tpukit", " ".join(LAUNCH))

GLOBAL_BATCH = ...  # YOUR PREDICTION: examples per step, all processes together

# %% tags=["solution"] jupyter={"source_hidden": true}
if SOLUTIONS:
    GLOBAL_BATCH = 2 * 4 * 4  # workers x replicas per worker x per-replica batch

# %% tags=["self-check"]
# Self-check: launch the run and read what it measured
answered(GLOBAL_BATCH, "multiply the processes, the devices of each, and the per-replica batch")
if HAS_JAX:
    launched = launch(LAUNCH)
    print(f"{launched['status']}: {launched['replicas']} replicas on {len(launched['devices'])} devices "
          f"{launched['devices']}, global batch {launched['global_batch_size']}, fingerprint {launched['fingerprint']}")
    measured = launched["global_batch_size"]
else:
    measured = 2 * 4 * 4
    print("launch skipped (needs JAX); checked against the rule instead")
assert GLOBAL_BATCH == measured, f"predicted {GLOBAL_BATCH}, the run used {measured}: --batch-size is per replica"
print("Exercise 2: correct.")

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
# - **Colab's free TPU** is one v5e chip: `jax.devices()` lists one `TpuDevice`, and tpukit trains on it with no
#   distribution (`OneDevice`): plain single-device training. The old "8 replicas" of the 2020 notebooks holds
#   on Kaggle's v5e-8 (8 chips) or
#   a v2-8/v3-8 board, and here with simulated devices.
# - **A pod slice** has several hosts. Every host runs the same command; JAX finds the coordinator and each host's
#   id from the TPU's metadata, so only the number of processes is needed:
#
# ```bash
# gcloud compute tpus tpu-vm ssh NAME --zone ZONE --worker=all --command \
#   "KERAS_DISTRIBUTION_NUM_PROCESSES=4 python -m tpukit train --backend jax --dataset mnist5k --model cnn \
#    --batch-size 128 --logdir gs://BUCKET/runs"
# ```
#
# - `--batch-size` stays per replica (per chip), and the global batch is that times every chip of the slice: keep
#   it a multiple of 128 per chip (notebook 05). The logdir must be one every host can reach (a bucket).
# - **GPUs**: one process per machine (or per GPU) with the three `KERAS_DISTRIBUTION_*` variables; the all-reduce
#   uses NCCL.

# %% [markdown]
# ## What you should see
#
# - 8 simulated devices on a CPU (1 on Colab's free TPU), and a batch of 16 split into 2 rows per device.
# - The Keras model's variables replicated (`PartitionSpec(None, None)`) and its loss falling.
# - A two-process launch that completes with 8 replicas and a global batch of 32.
#
# ## What changes between TPU, GPU and CPU runtimes
#
# | | TPU (Colab's TPU runtime) | GPU | CPU |
# |---|---|---|---|
# | Keras backend from the first cell | `jax` (no TensorFlow there) | `tensorflow` (set `KERAS_BACKEND=jax` to use this notebook's route) | `tensorflow`; the JAX cells run in subprocesses |
# | Devices | 1 v5e chip free; 8 on Kaggle's v5e-8 | the GPUs | simulated with `--xla_force_host_platform_device_count` |
# | All-reduce | over the chips' interconnect (ICI), across hosts over DCN | NCCL | gloo across processes |
# | Several processes | every host of a pod slice runs the command | `KERAS_DISTRIBUTION_*` on each machine | `python -m tpukit launch` |
