# ---
# jupyter:
#   accelerator: GPU
#   colab:
#     gpuType: T4
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
# # Scaling out on TensorFlow: many workers, failures, on-demand profiles
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/27<br>
# **Description:** MultiWorkerMirroredStrategy on two local workers from `TF_CONFIG`, then the same through
# `python -m tpukit launch`; a profiler server traced on demand; `BackupAndRestore` and a killed job resumed from its
# backup; TF32, tf.experimental.numpy, minimize vs apply, and ParameterServerStrategy.<br>
# **Accelerator:** CPU is enough (every cluster here runs on this machine); needs TensorFlow (Colab's CPU or GPU
# runtime). On Colab's TPU runtime (no TensorFlow) open notebook 07 instead.
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/06_scaling_out.ipynb)

# %% [markdown]
# ## Introduction
#
# TensorFlow's `tf.distribute` has two strategies that span machines: MultiWorkerMirroredStrategy (synchronous)
# and ParameterServerStrategy (asynchronous). Both exist only in TensorFlow, so this notebook needs it: run it on
# Colab's CPU or GPU runtime. On Colab's TPU runtime (JAX and Keras 3, no TensorFlow) it still runs top to bottom,
# but each TensorFlow cell prints that it is skipped; notebook 07 teaches the JAX route there (`keras.distribution`
# and `python -m tpukit launch`).
#
# **You will learn to:**
#
# - train one model synchronously across two processes with MultiWorkerMirroredStrategy and `TF_CONFIG`, in a
#   custom loop over `strategy.run`, with the loss divided by the global batch; then the same with
#   `python -m tpukit launch`;
# - start a profiler server in a running job and capture a trace from it on demand;
# - resume a `fit` with `keras.callbacks.BackupAndRestore`, and a killed job from its last backed-up epoch, with
#   bitwise the same weights;
# - know TF32, `tf.experimental.numpy` with `GradientTape`, and what replaced `optimizer.minimize(..., tape=tape)`;
# - after class (the extra at the end): train asynchronously with ParameterServerStrategy and a ClusterCoordinator.
#
# Every process here runs on this machine, is addressed on 127.0.0.1, and ends on its own, with a timeout.
# The subprocesses use the CPU on every runtime: two processes cannot share one GPU in an all-reduce, nor one TPU.

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

# %%
import importlib.util
import json
import os
import signal
import socket
import tempfile
import textwrap
import time
from pathlib import Path

import keras
import numpy as np
import pandas as pd
from IPython.display import display

import tpukit
from tpukit import data
from tpukit import models
from tpukit.observe import profiling
from tpukit.runs import backups
from tpukit.runs import records
from tpukit.teaching import SOLUTIONS, answered, check  # the exercises' answers and self-checks

HAS_TF = importlib.util.find_spec("tensorflow") is not None
if HAS_TF:
    import tensorflow as tf

    # Two logical CPU devices in this kernel, for Exercise 1's two replicas (TensorFlow takes this only before it
    # runs its first op; the workers below are processes of their own).
    tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                               [tf.config.LogicalDeviceConfiguration()] * 2)
else:
    print("This notebook teaches TensorFlow's multi-worker APIs, and this runtime has no TensorFlow (Colab's TPU\n"
          "runtime). Its TensorFlow cells print that they are skipped; the exercises still run. For scaling out\n"
          "on JAX and TPUs, open notebook 07 (07_jax_and_tpu_scale_out).")

SCRIPTS = tempfile.TemporaryDirectory(prefix="tpukit-06-")  # the worker and job scripts; removed at exit
WORKDIR = Path(SCRIPTS.name)
LOGDIR = Path("runs") / "06-scaling-out"  # runs and captures of this notebook
CHILD_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": "tensorflow",
             "CUDA_VISIBLE_DEVICES": ""}  # subprocesses: TensorFlow on the CPU, whatever the runtime
CHILD_ENV.pop("TF_CONFIG", None)


def free_port():
    """A free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def finish(procs, timeout):
    """Wait for subprocesses, killing any still running after `timeout` s; returns (code, stdout, stderr) each."""
    deadline = time.monotonic() + timeout
    outputs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        outputs.append((proc.returncode, out, err))
    return outputs


def skip(what):
    """What a TensorFlow cell prints where TensorFlow is missing."""
    print(f"skipped: {what} needs TensorFlow (Colab's CPU or GPU runtime). The JAX route: notebook 07.")

# %% [markdown]
# ## MultiWorkerMirroredStrategy with two local workers
#
# MultiWorkerMirroredStrategy (stable since TF 2.4) is MirroredStrategy across machines: every worker
# holds a copy of every variable, each step every replica computes gradients on its share of the **global
# batch**, and an all-reduce (collective ops; the runtime picks ring or NCCL) sums them, so all copies stay
# equal. Each process learns the cluster and its own place in it from the `TF_CONFIG` environment variable:
#
# ```json
# {"cluster": {"worker": ["127.0.0.1:PORT0", "127.0.0.1:PORT1"]}, "task": {"type": "worker", "index": 0}}
# ```
#
# and `tf.distribute.MultiWorkerMirroredStrategy()` reads it. Datasets are *sharded*: with
# `AutoShardPolicy.DATA` each worker keeps its part of every global batch; with `FILE`, each worker reads its
# own files.
#
# Saving under this strategy: every worker must call save (saving runs collective ops too), but only the chief
# (worker 0) writes to the real path; the others write to a temporary directory and delete it. To load, build
# the model in the scope and restore; `BackupAndRestore` does both for you.
#
# **Keras 3's `fit` does not run under this strategy** (keras-team/keras#20585, open since TF 2.16), so the
# worker below uses tf.distribute's own engine: a custom loop over `strategy.run`, in plain TensorFlow and Keras.
# Two details make it correct: each replica divides its loss by the *global* batch
# (`tf.nn.compute_average_loss`), and the Keras optimizer all-reduces (sums) the gradients across replicas
# before applying them. Summing the per-replica losses gives the global mean loss.

# %%
WORKER = '''
import json, os, sys
import keras, tensorflow as tf
from tpukit import data
from tpukit.training import determinism

STEPS, PER_REPLICA = int(sys.argv[1]), 32
strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG: the cluster and this worker's place
GLOBAL = PER_REPLICA * strategy.num_replicas_in_sync

keras.utils.set_random_seed(0)  # the same initial weights and the same shuffle on every worker
digits = data.load("digits")  # NumPy arrays: 8x8 uint8 images, int labels
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
batches = (tf.data.Dataset.from_tensor_slices((digits.x_train, digits.y_train)).shuffle(2048, seed=0).repeat()
           .batch(GLOBAL, drop_remainder=True).take(STEPS).with_options(options))
with strategy.scope():  # variables are mirrored on every worker
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Rescaling(1 / 255), keras.layers.Flatten(),
                              keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10, activation="softmax")])
    optimizer = keras.optimizers.SGD(0.1)
loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)  # one loss per example

@tf.function
def train_step(images, labels):
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)), global_batch_size=GLOBAL)
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss
    per_replica = strategy.run(replica_step, args=(images, labels))
    return strategy.reduce("SUM", per_replica, axis=None)  # all-reduced: the global mean loss

losses = [float(train_step(x, y)) for x, y in strategy.experimental_distribute_dataset(batches)]
print(json.dumps({"task": json.loads(os.environ["TF_CONFIG"])["task"]["index"], "replicas": GLOBAL // PER_REPLICA,
                  "global_batch": GLOBAL, "losses": losses, "fingerprint": determinism.fingerprint(model)}))
'''
worker_script = WORKDIR / "worker.py"
worker_script.write_text(textwrap.dedent(WORKER))
print("wrote", worker_script)

# %% [markdown]
# Launch two workers on free ports of 127.0.0.1, each with its own `TF_CONFIG`, and wait for both
# (they block on each other at every all-reduce, so they finish together).

# %%
if HAS_TF:
    STEPS = 10 if SMOKE else 200
    workers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        procs.append(subprocess.Popen([sys.executable, str(worker_script), str(STEPS)],
                                      env={**CHILD_ENV, "TF_CONFIG": json.dumps(tf_config)},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = finish(procs, timeout=300)
    for code, out, err in outputs:
        assert code == 0, f"a worker failed (exit {code}):\n{err[-3000:]}"
    reports = [json.loads(out.strip().splitlines()[-1]) for _, out, _ in outputs]
    print(f"{reports[0]['replicas']} replicas in sync, global batch {reports[0]['global_batch']}; final weights: "
          + ", ".join(f"worker {r['task']} {r['fingerprint']}" for r in reports))
    display(pd.DataFrame({f"worker {r['task']}": r["losses"] for r in reports}).rename_axis("step")
            .iloc[::max(1, STEPS // 10)])
else:
    skip("MultiWorkerMirroredStrategy")

# %% [markdown]
# **What you should see:** 2 replicas in sync (one per worker), a global batch of 64, the same final weights on
# both workers, and the same all-reduced loss on both at every step, falling as training goes.
#
# ### Exercise 1: what do the replicas add up to?
#
# Two replicas of a `MirroredStrategy` (over this kernel's two logical CPU devices) each take 32 of the 64
# examples of a global batch, and the optimizer applies the **sum** of their gradients (the all-reduce). Each
# replica divides its summed loss by the *global* batch, as `tf.nn.compute_average_loss(...,
# global_batch_size=64)` does. **Compute `ALLREDUCED`**: run one replica step on each half with `strategy.run`
# (the gradient of that replica's loss with respect to `w`, for the linear model below), and sum the replicas'
# gradients with `strategy.reduce("SUM", ..., axis=None)`, as a NumPy array of shape (3, 1). The self-check
# compares it with the gradient of the mean loss over all 64 examples, taken on one device, and with one replica's.
# (Where there is no TensorFlow, sum the two halves' gradients taken with `jax.grad`: the all-reduce's arithmetic,
# without the replicas.)

# %% tags=["exercise"]
rng = np.random.default_rng(0)
x_batch, y_batch = rng.normal(size=(64, 3)).astype("float32"), rng.normal(size=(64, 1)).astype("float32")
w_start = rng.normal(size=(3, 1)).astype("float32")
halves = [(x_batch[:32], y_batch[:32]), (x_batch[32:], y_batch[32:])]  # each replica's share of the batch
if HAS_TF:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])  # 2 replicas in this kernel
    replica_inputs = strategy.experimental_distribute_values_from_function(
        lambda context: halves[context.replica_id_in_sync_group])  # replica i gets halves[i]

ALLREDUCED = ...  # YOUR COMPUTATION: the sum of the 2 replicas' gradients, a (3, 1) NumPy array

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["ALLREDUCED = np.zeros((3, 1))", "ALLREDUCED = 2 * np.ones((3, 1))"]
# @title Solution
if SOLUTIONS:
    if HAS_TF:
        def replica_gradient(half):
            x, y = half
            w = tf.constant(w_start)
            with tf.GradientTape() as tape:
                tape.watch(w)
                per_example = tf.reduce_mean(tf.square(y - tf.matmul(x, w)), axis=-1)  # squared errors, TF ops
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=64)  # over the global batch
            return tape.gradient(loss, w)

        per_replica = strategy.run(replica_gradient, args=(replica_inputs,))
        ALLREDUCED = strategy.reduce("SUM", per_replica, axis=None).numpy()  # the all-reduce: a sum
    else:
        import jax

        def half_loss(w, x, y):
            return keras.ops.sum(keras.losses.mean_squared_error(y, keras.ops.matmul(x, w))) / 64

        ALLREDUCED = sum(np.asarray(jax.grad(half_loss)(w_start, x, y)) for x, y in halves)

# %% tags=["self-check"]
# Self-check: the gradient of the mean loss over the whole batch, on one device, against the replicas' sum
answered(ALLREDUCED, "strategy.run(a function of one half, args=(replica_inputs,)), then strategy.reduce('SUM', ...)")
check(np.shape(ALLREDUCED) == (3, 1), f"a (3, 1) array, the shape of w; received shape {np.shape(ALLREDUCED)}")


def full_batch_gradient(x, y, divide_by):
    """The gradient of the squared errors over (x, y), summed and divided by `divide_by`, on one device."""
    if HAS_TF:
        w = tf.Variable(w_start)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.reduce_mean(tf.square(y - tf.matmul(x, w)), axis=-1)) / divide_by
        return tape.gradient(loss, w).numpy()
    import jax

    return np.asarray(jax.grad(lambda w: keras.ops.sum(keras.losses.mean_squared_error(
        y, keras.ops.matmul(x, w))) / divide_by)(w_start))


whole = full_batch_gradient(x_batch, y_batch, 64)  # one device, the whole batch's mean loss
one = full_batch_gradient(*halves[0], 64)  # one replica's share of it
print("replicas' sum:", np.round(np.ravel(ALLREDUCED), 4))
print("whole batch  :", np.round(np.ravel(whole), 4))
print("one replica  :", np.round(np.ravel(one), 4))
check(np.allclose(ALLREDUCED, whole, rtol=1e-4, atol=1e-5),
      f"the replicas' sum should be the whole batch's gradient; it is {np.linalg.norm(ALLREDUCED) / np.linalg.norm(whole):.2f}x "
      "its size: did each replica divide by the global batch (64), and did you sum both replicas?")
print("Exercise 1: correct. Each replica's gradient is its share of the whole batch's; the all-reduce adds the "
      "shares, so 2 replicas of 32 take the same step as one device on 64, when each divides by the global batch.")

# %% [markdown]
# ### The same with tpukit: `python -m tpukit launch`
#
# `tpukit.train` trains under MultiWorkerMirroredStrategy with a loop of its own in place of `fit`
# (`tpukit.hardware.tf_multiworker_loop`): the model's own `train_step` runs in `strategy.run` over a distributed
# dataset, each step's metrics are averaged over every replica, Keras' callbacks are called as `fit` calls them,
# and every worker agrees after each step whether to stop. `python -m tpukit launch --workers 2 -- train --backend
# tensorflow ...` starts the workers on 127.0.0.1, each with its own `TF_CONFIG`, and prints the chief's result;
# the run is recorded like any other, with epoch backups and resume. (With `--backend jax` the same command
# starts JAX processes: notebook 07.)

# %%
if HAS_TF:
    LAUNCH = ["launch", "--workers", "2", "--", "train", "--backend", "tensorflow", "--accelerator", "cpu",
              "--dataset", "digits", "--model", "mlp", "--batch-size", "32", "--epochs", "2",
              "--steps-per-epoch", "10" if SMOKE else "100", "--logdir", str(LOGDIR / "launched"), "--json"]
    print("python -m tpukit", " ".join(LAUNCH))
    done = subprocess.run([sys.executable, "-m", "tpukit", *LAUNCH], env=CHILD_ENV, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    launched = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{launched['status']}: {launched['replicas']} replicas, global batch {launched['global_batch_size']}, "
          f"{launched['epochs_done']} epochs, val_accuracy {launched['validation_metrics']['accuracy']:.3f}, "
          f"{launched['examples_per_sec']:,.0f} examples/s")
    print("run directory:", launched["run_dir"])
else:
    skip("python -m tpukit launch with TensorFlow")

# %% [markdown]
# **What you should see:** `completed` with 2 replicas and a global batch of 64, validation metrics after each
# epoch, and the run's directory under `runs/06-scaling-out/launched`.
#
# A note on addresses: the host in `TF_CONFIG` tells the *peers* where to connect. TensorFlow's gRPC
# servers themselves listen on every interface of the machine, whatever host you write. The processes here
# live for seconds; on a shared machine, firewall the ports (Colab VMs accept no inbound connections).

# %% [markdown]
# ## A profiler server and an on-demand trace
#
# `RunConfig(profile=...)` decides before training which steps to capture. For a job that is already
# running, maybe on another machine, TF 2.4 added on-demand profiling: the job starts a profiler server,
#
# ```python
# tf.profiler.experimental.server.start(PORT)
# ```
#
# and anyone who can reach the port captures a trace whenever they like, with
# `tf.profiler.experimental.client.trace("grpc://HOST:PORT", logdir, duration_ms)` or TensorBoard's
# **Capture Profile** button. Several comma-separated addresses capture every worker of a job at once.
#
# Our job is a tpukit run in a subprocess: deterministic, so that the next section can kill it and compare.
# Keras 3's `fit` marks steps only inside `TensorBoard(profile_batch=...)`, and names them "Profiled batch", which
# XProf does not count as steps (it counts `train` and `test` steps). So the job adds a callback that wraps each step
# in a profiler `Trace("train", step_num=...)`, as tpukit's ProfileCallback does inside its window: the on-demand
# capture then has step times too.

# %%
JOB = '''
import os, sys, time
import keras, tensorflow as tf
import tpukit

class StepMarkers(keras.callbacks.Callback):
    """Wrap every training step in a profiler Trace, so any capture shows step times."""
    step = 0
    def on_train_batch_begin(self, batch, logs=None):
        self.trace = tf.profiler.experimental.Trace("train", step_num=self.step, _r=1)
        self.trace.__enter__()
    def on_train_batch_end(self, batch, logs=None):
        self.trace.__exit__(None, None, None)
        self.step += 1

class HoldBeforeLastEpoch(keras.callbacks.Callback):
    """Wait before the last epoch while the file `hold` exists: still running when the notebook kills it."""
    def __init__(self, hold, epochs):
        super().__init__()
        self.hold, self.epochs = hold, epochs
    def on_epoch_begin(self, epoch, logs=None):
        while epoch == self.epochs - 1 and self.hold and os.path.exists(self.hold):
            time.sleep(0.1)

config_json, port = sys.argv[1], int(sys.argv[2])
hold = sys.argv[3] if len(sys.argv) > 3 else None
if port:
    tf.profiler.experimental.server.start(port)
config = tpukit.RunConfig.from_json(config_json)
print(tpukit.train(config, callbacks=[StepMarkers(), HoldBeforeLastEpoch(hold, config.epochs)]).summary())
'''
job_script = WORKDIR / "job.py"
job_script.write_text(textwrap.dedent(JOB))

# One step per call: the markers wrap each call of the train function (auto would run this mlp's short steps
# 30 per call on the CPU). A step takes about 3 ms here, so even the smoke size runs for about ten seconds. So that
# it is still running when the next section kills it, however fast or busy this machine is, the job waits before
# its last epoch while the file `hold` exists (a real job would simply still be training).
job_config = tpukit.RunConfig(accelerator="cpu", dataset="shapes", dataset_size=512, model="mlp", batch_size=16,
                              epochs=10 if SMOKE else 12, steps_per_epoch=300 if SMOKE else 600,
                              steps_per_execution=1, deterministic=True, logdir=str(LOGDIR / "job"), name="killed")

if HAS_TF:
    profiler_port = free_port()
    job_log = WORKDIR / "job.log"
    job_started = time.time()
    with open(job_log, "w") as log:
        hold = WORKDIR / "hold"
        hold.touch()
        job = subprocess.Popen([sys.executable, str(job_script), job_config.to_json(indent=None),
                                str(profiler_port), str(hold)], env=CHILD_ENV, stdout=log, stderr=subprocess.STDOUT)
else:
    skip("the profiled job")

# %% [markdown]
# Wait until the job has backed up its first whole epoch (so it is surely in the middle of training), then
# capture one second of it from this notebook.

# %%
if HAS_TF:
    def job_run():
        """The job's run, read from its run directory (None until it has one)."""
        runs = [r for r in records.list_runs(job_config.logdir) if (r.started or 0) >= job_started]
        return runs[-1] if runs else None

    def backed_up_epochs():
        """Whole epochs the job has backed up so far (0 before the first), as `backup/latest.json` says."""
        run = job_run()
        backup = backups.latest(Path(run.run_dir, "backup"), verify=False) if run else None
        return backup.epochs_done if backup else 0

    deadline = time.monotonic() + 300
    while backed_up_epochs() < 1:
        assert job.poll() is None and time.monotonic() < deadline, f"job stopped or stalled:\n{job_log.read_text()[-2000:]}"
        time.sleep(0.1)

    trace_dir = str(LOGDIR / "on-demand")
    tf.profiler.experimental.client.trace(f"grpc://127.0.0.1:{profiler_port}", trace_dir, duration_ms=1000)
    on_demand = profiling.summarize(trace_dir)
    print(on_demand)
else:
    skip("the on-demand trace")

# %% [markdown]
# **What you should see:** a capture of the running job with its step times (the few milliseconds a step of this
# small MLP takes, as above, a little more while the trace records) and its top ops. The profiler server too
# listens on every interface: start it only in jobs on machines you control, and pick the port yourself.

# %% [markdown]
# ## BackupAndRestore surviving a killed worker
#
# In a real cluster a worker dies: preemption, an out-of-memory kill, a lost VM. Under
# MultiWorkerMirroredStrategy the other workers then fail at the next all-reduce, the cluster manager
# restarts them all, and each calls the same `fit` again. Keras' API for this is one callback:
#
# ```python
# backup = keras.callbacks.BackupAndRestore(backup_dir)  # on storage every worker reaches
# model.fit(x, y, epochs=10, callbacks=[backup])          # after a restart, the same call resumes from the backup
# ```
#
# It backs up the model, the optimizer and the epoch at the end of every epoch (its default `save_freq="epoch"`),
# and deletes the backup when `fit` completes. Exercise 2 (an extra at the end) measures it with a plain `fit`.
# tpukit's engine backs up the same way on every backend (`EpochBackup`: like `BackupAndRestore`, but each epoch
# goes to a new file that `latest.json` names only once it is whole, so a kill cannot tear it), and the run's
# directory says how far it got. Here it meets a real kill: the profiled job above gets SIGKILL, which no code can catch.

# %%
if HAS_TF:
    os.kill(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    killed = job_run()
    print(f"exit code {job.returncode}; status: {killed.status}; epochs done: {killed.epochs_done} "
          f"of {job_config.epochs}; resumable: {killed.resumable}")
    print(killed.message)
    assert killed.status == "stopped" and killed.resumable, f"the job ended before the kill:\n{job_log.read_text()[-2000:]}"
else:
    skip("killing the job")

# %% [markdown]
# ### Resume the killed job
#
# The killed job could not write `completed` or `stopped` itself: its `result.json` still says `running`. tpukit
# reads that together with the run's lock file, which only a living process holds, and so reports the run as
# stopped (killed?) with the epochs its last whole backup kept. Resume it with
# `python -m tpukit train --resume RUN_DIR`, and meanwhile run the same config once more without interruption, for
# reference (the same script, no profiler server, in a process like the first, so that only the kill differs).

# %%
if HAS_TF:
    resumed_proc = subprocess.Popen([sys.executable, "-m", "tpukit", "train", "--resume", killed.run_dir, "--json"],
                                     env=CHILD_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reference_config = job_config.replace(logdir=str(LOGDIR / "reference"), name="uninterrupted")
    reference_proc = subprocess.Popen([sys.executable, str(job_script), reference_config.to_json(indent=None), "0"],
                                      env=CHILD_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (code, out, err), (reference_code, _, reference_err) = finish([resumed_proc, reference_proc], timeout=300)
    assert code == 0 and reference_code == 0, (err + reference_err)[-3000:]
    resumed = json.loads(out.strip().splitlines()[-1])
    reference = records.list_runs(reference_config.logdir)[-1]
    print(f"resumed:       {resumed['status']}, {resumed['epochs_done']} epochs, fingerprint {resumed['fingerprint']}")
    print(f"uninterrupted: {reference.status}, {reference.epochs_done} epochs, fingerprint {reference.fingerprint}")
else:
    skip("resuming the job")

# %% [markdown]
# **What you should see:** both runs `completed` with all their epochs, and the same fingerprint: kill, resume, and
# the weights are bit for bit those of the uninterrupted run (seeds, op determinism, and batches that depend only on
# seed and epoch, resumed from the start of a whole epoch).

# %% [markdown]
# ## `tf.experimental.numpy`
#
# TF 2.4 added a NumPy API on top of TensorFlow. Its functions take and return tensors, so they run on the
# accelerator, inside `tf.function`, in `tf.data` maps, and under `GradientTape`. Here it fits a line.
# (One surprise: `tnp.linspace` returns float64 whatever `dtype` says; we convert a NumPy array instead.) Without
# TensorFlow, `jax.numpy` is the same idea on JAX, and the cell shows it instead.

# %%
if HAS_TF:
    import tensorflow.experimental.numpy as tnp

    xs = tnp.asarray(np.linspace(-1, 1, 256), dtype=tnp.float32)
    ys = 3 * xs + 0.5 + 0.1 * tf.random.stateless_normal([256], seed=(1, 2))
    w, b = tf.Variable(0.0), tf.Variable(0.0)
    sgd = keras.optimizers.SGD(learning_rate=0.5)

    @tf.function
    def fit_step():
        with tf.GradientTape() as tape:
            loss = tnp.mean(tnp.square(w * xs + b - ys))
        grads = tape.gradient(loss, [w, b])
        sgd.apply(grads, [w, b])  # Keras 3: compute the gradients, then apply them
        return loss


    for _ in range(100):
        loss = fit_step()
    print(f"w = {float(w):.3f}, b = {float(b):.3f} (true 3 and 0.5), loss {float(loss):.4f}")
    print("in tf.data:", [round(float(v), 3) for v in tf.data.Dataset.from_tensor_slices(xs[:3]).map(tnp.abs)])
elif importlib.util.find_spec("jax") is not None:  # no TensorFlow: the same fit with jax.numpy and jax.grad
    import jax
    import jax.numpy as jnp

    xs = jnp.linspace(-1, 1, 256)
    ys = 3 * xs + 0.5 + 0.1 * jax.random.normal(jax.random.key(2), (256,))
    line_loss = lambda p: jnp.mean(jnp.square(p[0] * xs + p[1] - ys))  # noqa: E731
    descend = jax.jit(lambda p: p - 0.5 * jax.grad(line_loss)(p))
    params = jnp.zeros(2)
    for _ in range(100):
        params = descend(params)
    print(f"tf.experimental.numpy needs TensorFlow; its JAX counterpart, jax.numpy with jax.grad: "
          f"w = {float(params[0]):.3f}, b = {float(params[1]):.3f} (true 3 and 0.5), loss {float(line_loss(params)):.4f}")
else:
    skip("tf.experimental.numpy")

# %% [markdown]
# ## `optimizer.minimize` with a tape
#
# TF 2.4's optimizer refactor let a custom loop hand its tape to the optimizer:
#
# ```python
# with tf.GradientTape() as tape:
#     loss = loss_fn()
# optimizer.minimize(loss, var_list, tape=tape)       # TF 2.4 / Keras 2
# ```
#
# Keras 3 optimizers have no `minimize`: take the gradients from the tape and call
# `optimizer.apply(grads, variables)` (or `apply_gradients(zip(grads, variables))`), as above. The 2.4-era
# gradient *transformers* and *aggregators* became `clipnorm`, `clipvalue` and `global_clipnorm`
# arguments, and the cross-replica sum happens inside `apply` under a strategy, as the MWMS worker relied on. The
# same holds on the JAX backend: Keras 3's optimizers are one API over every backend.

# %%
# The API you will meet today
sgd_api = keras.optimizers.SGD()
print(f"Keras {keras.__version__} SGD: apply {hasattr(sgd_api, 'apply')}, apply_gradients "
      f"{hasattr(sgd_api, 'apply_gradients')}, minimize {hasattr(sgd_api, 'minimize')}")

# %% [markdown]
# ## What changes between TPU, GPU and CPU runtimes
#
# - **Multi-worker** needs several machines (or processes) that reach each other. On Colab that means this
#   local demonstration. With GPUs, each worker's MirroredStrategy covers its own GPUs and the collectives use NCCL.
#   On Cloud TPU pods, TPUStrategy spans the pod by itself, without `TF_CONFIG`.
# - **Colab's TPU runtime has no TensorFlow**: there Keras 3 runs on JAX and scales out with `keras.distribution`
#   and `python -m tpukit launch` (notebook 07). With TensorFlow, `launch --backend tensorflow` runs tpukit's own
#   loop under MultiWorkerMirroredStrategy, since Keras 3's `fit` does not run there (keras-team/keras#20585).
# - **Profiling**: the on-demand trace of a TPU job includes the TPU's device timeline and MXU figures;
#   of a GPU job, the kernels.
# - **TF32** matters only on Ampere and newer GPUs; **bfloat16** is the TPU's counterpart (notebook 02).
#
# The subprocesses have all ended; the servers of the extra's in-process cluster (below) end with this kernel.
#
# Next: [notebook 08](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/gpu/08_fine_tuning_a_pretrained_model.ipynb)
# fine-tunes a pretrained Gemma with LoRA.

# %% [markdown]
# ## Extra: how much a restarted `fit` redoes
#
# For after class: it practises "BackupAndRestore surviving a killed worker".

# %% [markdown]
# ### Exercise 2: how much does a restarted `fit` redo?
#
# A `fit` of 10 epochs with `BackupAndRestore` loses its worker at the start of the fifth epoch (index 4), after
# epochs 0-3 were backed up. The cluster manager restarts the job, which builds the model again and calls the same
# `fit` with the same callback. **Predict `EPOCHS_AFTER_RESTART`**, how many epochs the second `fit` runs. The
# self-check does exactly this with a tiny model, interrupting the first `fit` with an exception.

# %% tags=["exercise"]
EPOCHS_AFTER_RESTART = ...  # YOUR PREDICTION: epochs the restarted fit runs

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["EPOCHS_AFTER_RESTART = 10", "EPOCHS_AFTER_RESTART = 5", "EPOCHS_AFTER_RESTART = 4"]
# @title Solution
if SOLUTIONS:
    EPOCHS_AFTER_RESTART = 10 - 4  # epochs 0-3 are restored from the backup; 4 to 9 run again

# %% tags=["self-check"]
# Self-check: interrupt a fit, restart it, count the epochs
answered(EPOCHS_AFTER_RESTART, "epochs 0-3 were backed up; fit resumes at the epoch after the last backup")


class LoseWorkerAtEpoch4(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 4:
            raise RuntimeError("worker lost at the start of epoch 4")


def tiny_model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


backup_dir = tempfile.mkdtemp(prefix="tpukit-backup-")
x_tiny, y_tiny = np.ones((32, 4), np.float32), np.ones((32, 1), np.float32)
try:
    tiny_model().fit(x_tiny, y_tiny, epochs=10, verbose=0,
                     callbacks=[keras.callbacks.BackupAndRestore(backup_dir), LoseWorkerAtEpoch4()])
except RuntimeError as e:
    print("first fit:", e)
restarted = tiny_model().fit(x_tiny, y_tiny, epochs=10, verbose=0,
                             callbacks=[keras.callbacks.BackupAndRestore(backup_dir)])
print(f"predicted {EPOCHS_AFTER_RESTART}, the restarted fit ran epochs {restarted.epoch}")
check(EPOCHS_AFTER_RESTART == len(restarted.epoch), "only the epochs after the last backup run again")
print("Exercise 2: correct. A backup per epoch bounds the lost work to one epoch.")

# %% [markdown]
# ## Extra: TF32
#
# *Not part of the workshop day: notebook 02 shows TF32 in class; this is the TensorFlow switch alone.*
#
# Since the A100, NVIDIA GPUs run float32 matrix products in **TensorFloat-32** by default: float32 range,
# but only 10 mantissa bits (like float16), on the Tensor Cores. It is much faster and usually harmless for
# training, and it is why mixed precision gains less on these GPUs. For bit-exact float32 math turn it off
# with `tpukit.set_tf32(False)` (it wraps `tf.config.experimental.enable_tensor_float_32_execution`). On a
# TPU or CPU the setting changes nothing.

# %%
if HAS_TF:
    previous = tpukit.set_tf32(False)
    now = tf.config.experimental.tensor_float_32_execution_enabled()
    tpukit.set_tf32(previous)  # put it back
    print(f"TF32 was {'on' if previous else 'off'}; after set_tf32(False) it was {'on' if now else 'off'}")
else:
    skip("TF32")

# %% [markdown]
# ## Extra: ParameterServerStrategy on a local cluster
#
# *Not part of the workshop day: for after class. It comes last because it connects this kernel to the cluster.*
#
# ParameterServerStrategy (TF 2.4) trains **asynchronously**: variables live on parameter servers (`ps`),
# a *coordinator* (this notebook, the `chief`) schedules step functions, and each worker runs them as soon
# as it is free, reading and updating the variables on the servers. There is no all-reduce to wait for, so
# a slow or failed worker does not stop the others: the `ClusterCoordinator` reschedules a failed worker's
# functions on the rest and resumes using it when it comes back. Keras 3's `fit` does not support this
# strategy either; the loop below is TensorFlow's own recipe.
#
# The cluster runs in this process (TensorFlow's in-process recipe for trying it out): two workers and one
# parameter server. Its servers share this process's threads, so each gets enough inter-op threads to avoid
# a deadlock on small machines.

# %%
if HAS_TF:
    tf.get_logger().setLevel("WARNING")  # the coordinator logs every step at INFO level
    cluster = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)],
                                    "ps": [f"127.0.0.1:{free_port()}"], "chief": [f"127.0.0.1:{free_port()}"]})
    server_config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=4)
    servers = [tf.distribute.Server(cluster, job_name=job_name, task_index=i, config=server_config, start=True)
               for job_name in ("worker", "ps") for i in range(cluster.num_tasks(job_name))]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster, task_type="chief", task_id=0,
                                                                    rpc_layer="grpc")
    ps_strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(ps_strategy)
else:
    skip("ParameterServerStrategy")

# %% [markdown]
# Variables created in the scope are placed on the parameter server; each worker gets its own copy of the
# dataset from `create_per_worker_dataset`; `schedule` returns at once with a handle whose value is
# fetched later; `join` waits until every scheduled step has run.

# %%
if HAS_TF:
    digits = data.load("digits")
    PS_BATCH = 64

    def dataset_fn():
        return tf.data.Dataset.from_tensor_slices((digits.x_train, digits.y_train)).shuffle(2048).repeat().batch(PS_BATCH)


    with ps_strategy.scope():
        ps_model = models.build("mlp", input_shape=(8, 8, 1), num_classes=10)
        ps_optimizer = keras.optimizers.SGD(0.1)
        ps_accuracy = keras.metrics.SparseCategoricalAccuracy()
    print("variables on:", sorted({v.value.device for v in ps_model.weights}))
    ps_loss_fn = keras.losses.SparseCategoricalCrossentropy()
    per_worker_iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def ps_step(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                probabilities = ps_model(x, training=True)
                loss = ps_loss_fn(y, probabilities)
            ps_optimizer.apply(tape.gradient(loss, ps_model.trainable_variables), ps_model.trainable_variables)
            ps_accuracy.update_state(y, probabilities)
            return loss
        return ps_strategy.run(replica_fn, args=next(iterator))


    ps_history = []
    for epoch in range(2 if SMOKE else 5):
        ps_accuracy.reset_state()
        handles = [coordinator.schedule(ps_step, args=(per_worker_iterator,)) for _ in range(20 if SMOKE else 100)]
        coordinator.join()
        ps_history.append({"epoch": epoch + 1, "last loss": float(handles[-1].fetch()),
                           "accuracy": float(ps_accuracy.result())})
    display(pd.DataFrame(ps_history))
else:
    skip("ParameterServerStrategy")

# %% [markdown]
# **What you should see:** the variables on `/job:ps/...`, and the accuracy rising over the epochs: the coordinator
# only scheduled; the workers trained.
