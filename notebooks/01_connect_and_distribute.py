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
# # Connecting and distributing: devices, strategies and replicas
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/27<br>
# **Description:** Place ops on one device, run a function on every replica and split a batch between 8 of them
# (simulated CPU devices anywhere), in TensorFlow and in JAX; then connect to a TPU, GPUs or the CPU with tpukit.<br>
# **Accelerator:** TPU, GPU or CPU (the 8-device lessons run on 8 simulated CPU devices where there are fewer)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/01_connect_and_distribute.ipynb)

# %% [markdown]
# ## Introduction
#
# A TPU v2-8 or v3-8 board has 4 chips with 2 cores each: TensorFlow sees 8 devices, and a
# `tf.distribute.TPUStrategy` runs one *replica* of your step on each. Those boards are what the 2020 material
# used; Colab's TPU runtime today is a single chip, a v5e or a v6e (one device; googlecolab/backend-info,
# 2026-08-19), and 8 devices remain on Kaggle's v5e-8. A GPU runtime has one GPU, a CPU runtime has the CPU.
# One device cannot show how a batch is split, so the lessons below run on **8 simulated CPU devices** on every
# runtime: TensorFlow splits the CPU into 8 logical devices, and JAX is asked for 8 CPU devices with an XLA flag.
# They share the same cores, so they teach the semantics, not the speed.
#
# Colab's TPU runtime has no TensorFlow: Keras 3 runs on **JAX** there. `tf.distribute` (strategies,
# `strategy.run`, `PerReplica`) exists only in TensorFlow, so each section teaches the TensorFlow API where
# TensorFlow is installed (Colab's CPU and GPU runtimes) and its JAX counterpart where it is not: a device list,
# a *sharded array* split over a device mesh, `jax.shard_map`, `jax.grad`, and `keras.distribution.DataParallel`.
# The real APIs come first; tpukit's `connect()`, which picks the TPU, the GPUs or the CPU for a training run,
# comes last.
#
# **You will learn to:**
#
# - list the devices and run an op on one of them;
# - run a function on every replica with `strategy.run` and read the `PerReplica` value it returns (JAX: a
#   sharded array and `jax.shard_map`);
# - distribute a batch (`experimental_distribute_dataset`; JAX: `NamedSharding` and `jax.device_put`), and
#   tell the per-replica batch from the global batch;
# - train Keras models under `strategy.scope()` (JAX: `keras.distribution.DataParallel`), and know why on JAX
#   `fit` must run inside the scope too;
# - write gradient descent by hand with `tf.GradientTape` (JAX: `jax.grad`) on a single device;
# - connect to a TPU, GPUs or the CPU with `tpukit.connect()`, and know how a TPU was found on Colab's old
#   TPU-node runtime (`COLAB_TPU_ADDR`) and how it is found on today's TPU VMs (`tpu="local"`).

# %% [markdown]
# ## Setup
#
# Simulated devices are logical CPU devices, and both frameworks fix their devices once: TensorFlow the first
# time it runs an op, JAX when it starts its backends (its first device list or array; importing Keras or JAX
# does not start them). So this cell asks for them before any other TensorFlow or JAX work:
#
# - **JAX**: `XLA_FLAGS=--xla_force_host_platform_device_count=8`, set before JAX starts, gives 8 CPU devices
#   (the way JAX's own tests get them). It splits only the CPU: on Colab's one-chip TPU runtime `jax.devices()`
#   still lists the one TPU, so the lessons take their 8 devices from `jax.devices("cpu")` there.
# - **TensorFlow**: `tf.config.set_logical_device_configuration` splits the CPU into 8 logical devices, and a
#   `tf.distribute.MirroredStrategy` over them runs one replica on each.
#
# Run twice, or after other TensorFlow or JAX work, the flags come too late: restart the runtime and run this cell
# first. Listing the *physical* GPUs does not start TensorFlow's devices, so it may come first; on JAX the cell
# looks for a TPU or a GPU without asking JAX.

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
import os
import shutil

SIMULATED = 8  # devices for the lessons: the 8 cores of a v2-8/v3-8 board, or Kaggle's v5e-8
# JAX: 8 CPU devices. XLA reads this flag when JAX starts its backends, so it is set before anything uses JAX.
COUNT_FLAG = "--xla_force_host_platform_device_count"
flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(COUNT_FLAG)]
os.environ["XLA_FLAGS"] = " ".join(flags + [f"{COUNT_FLAG}={SIMULATED}"])

import jax
import jax.numpy as jnp
import keras
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import tpukit
from tpukit.hardware import tpu
from tpukit.teaching import SOLUTIONS, answered, check  # the exercises' self-checks

# tpukit's connect() (last section): the TPU or GPU as it is; a CPU-only runtime gets the 8 simulated devices.
has_accelerator = tpu.tpu_vm_present() or shutil.which("nvidia-smi") is not None
runtime = tpukit.connect(replicas=None if has_accelerator else SIMULATED)

# The lessons' 8 devices: the runtime's own where it has 8 (a v5e-8), else JAX's 8 CPU devices (Colab's TPU has one
# chip). One replica per device.
DEVICES = (jax.devices() if len(jax.devices()) >= SIMULATED else jax.devices("cpu"))[:SIMULATED]
strategy = keras.distribution.DataParallel(devices=DEVICES)  # Keras' data parallelism over them
REPLICAS = len(DEVICES)
print(f"lessons: {type(strategy).__name__} over {REPLICAS} devices"
      + ("" if REPLICAS == SIMULATED else " (fewer than 8: restart the runtime and run this cell first)"))

# %% tags=["tf"]
import contextlib

SIMULATED = 8  # devices for the lessons: the 8 cores of a v2-8/v3-8 board, or Kaggle's v5e-8

import keras
import numpy as np
import tensorflow as tf

import tpukit
from tpukit.hardware import tpu
from tpukit.teaching import SOLUTIONS, answered, check  # the exercises' self-checks

tf.get_logger().setLevel("WARNING")  # MirroredStrategy logs every reduction at INFO level
# Split the CPU into 8 logical devices, before TensorFlow's first op
cpu = tf.config.list_physical_devices("CPU")[0]
with contextlib.suppress(RuntimeError):  # TensorFlow already started: it keeps the devices it has
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * SIMULATED)

# tpukit's connect() (last section): the TPU or GPU as it is; a CPU-only runtime gets the 8 simulated devices.
has_accelerator = tpu.tpu_address() is not None or bool(tf.config.list_physical_devices("GPU"))
runtime = tpukit.connect(replicas=None if has_accelerator else SIMULATED)

# The lessons' 8 devices, one replica per device
strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")][:SIMULATED])
REPLICAS = strategy.num_replicas_in_sync
print(f"lessons: {type(strategy).__name__} over {REPLICAS} devices"
      + ("" if REPLICAS == SIMULATED else " (fewer than 8: restart the runtime and run this cell first)"))

# %% [markdown]
# ## Devices, and one op on one device
#
# A TPU v2-8 lists 8 logical `TPU` devices (`/device:TPU:0` to `TPU:7`), as does Kaggle's v5e-8; Colab's TPU
# runtime (one v5e or v6e chip) lists one. Here the list is this runtime's devices, the 8 simulated CPU devices
# among them. In TensorFlow, `tf.device` pins the ops created inside it to one device, such as one TPU core. In
# JAX, `jax.device_put` puts an array on a device, and the ops on it run there. Both use the runtime's first
# device: the TPU or GPU where there is one.

# %% tags=["jax"]
print("default:", jax.devices(), "| cpu:", jax.devices("cpu"))
a = jax.device_put(jax.random.normal(jax.random.key(1), (256, 256)), jax.devices()[0])
product = a @ a
print("the matmul ran on", product.devices())

# %% tags=["tf"]
for device in tf.config.list_logical_devices():
    print(device.name, device.device_type)
with tf.device(runtime.devices[0]):
    a = tf.random.stateless_normal((256, 256), seed=(1, 2))
    product = tf.matmul(a, a)
print("the matmul ran on", product.device)

# %% [markdown]
# ## `strategy.run` and `PerReplica`
#
# `strategy.run(fn, args)` calls `fn` once per replica, each on its own device. The result is a `PerReplica`
# value: one tensor per replica, not one tensor. `experimental_local_results` unpacks it, and `strategy.reduce`
# combines it (sum or mean) into one tensor. Inside `fn`, the replica context says which replica is running.
# Wrap the call in a `tf.function`: run eagerly, a `MirroredStrategy` pays a large overhead on every call. Here
# `strategy` is the setup's `MirroredStrategy` over the 8 simulated devices.
#
# JAX has no strategies. Its counterpart is a **mesh** of devices with named axes, and `jax.shard_map(fn, ...)`,
# which runs `fn` once per device on that device's slice. `jax.lax.axis_index("batch")` is the replica id, and
# the result is one global array whose *shards* are the per-replica values: `addressable_shards` unpacks it,
# and an ordinary `sum` reduces it. The mesh here spans the setup's 8 `DEVICES`.

# %% tags=["jax"]
mesh = Mesh(np.array(DEVICES), ("batch",))  # one axis named "batch", one device per replica
whoami = jax.shard_map(lambda: jax.lax.axis_index("batch")[None] * 10, mesh=mesh, in_specs=(),
                       out_specs=PartitionSpec("batch"))
per_replica = whoami()
print(type(per_replica).__name__, "with", len(per_replica.addressable_shards), "shard(s)")
print([int(shard.data[0]) for shard in per_replica.addressable_shards])
print("sum:", int(per_replica.sum()))

# %% tags=["tf"]
@tf.function
def replica_ids():
    def whoami():
        return tf.distribute.get_replica_context().replica_id_in_sync_group * 10

    return strategy.run(whoami)


per_replica = replica_ids()
print(type(per_replica).__name__ if REPLICAS > 1 else "one replica: a plain tensor")
print([int(t) for t in strategy.experimental_local_results(per_replica)])
print("sum:", int(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)))

# %% [markdown]
# On a real TPU under TensorFlow, the TPU system keeps its state (variables, compiled programs) between cells.
# Before unrelated new work, the old blog posts initialized it again, which clears it (every variable on the TPU
# is gone):
#
# ```python
# tf.tpu.experimental.initialize_tpu_system(strategy.cluster_resolver)
# ```
#
# tpukit leaves that to you: `connect()` with the same arguments returns the runtime it already has, without
# touching the TPU. JAX has no such step: arrays are freed when Python drops them (or with `array.delete()`).

# %% [markdown]
# ## Distributing a dataset: per-replica and global batch
#
# `strategy.experimental_distribute_dataset(ds)` splits every batch of `ds` between the replicas, so each replica
# gets a different slice. Batch the dataset with the **global** batch:
# global batch = per-replica batch x `num_replicas_in_sync`. In JAX, a `NamedSharding` that splits axis 0 over
# the mesh's `"batch"` axis does the same to an array, and `jax.device_put` sends each slice to its device;
# that is what Keras' `DataParallel` does to every batch `fit` feeds it (next section). Each device then holds a
# shard of shape (per-replica batch, ...). tpukit's `RunConfig.batch_size` is per replica and
# `global_batch_size` is derived from it, so changing the hardware never silently changes what a replica sees.

# %% tags=["jax"]
PER_REPLICA_BATCH = 4
GLOBAL_BATCH = PER_REPLICA_BATCH * REPLICAS  # what you batch the dataset with
config = tpukit.RunConfig(dataset="digits", batch_size=PER_REPLICA_BATCH, replicas=REPLICAS)
print(f"{PER_REPLICA_BATCH} per replica x {REPLICAS} replicas = {GLOBAL_BATCH} per step "
      f"(tpukit's RunConfig derives the same: {config.global_batch_size})")

by_rows = NamedSharding(mesh, PartitionSpec("batch"))  # axis 0 split over the mesh's "batch" axis
first = jax.device_put(np.arange(GLOBAL_BATCH), by_rows)  # the first global batch of range(...)
shards = sorted(first.addressable_shards, key=lambda shard: shard.index[0].start or 0)
for i, shard in enumerate(shards):
    print(f"replica {i}: {shard.data.tolist()}")
print("per-device shapes:", [s.data.shape for s in first.addressable_shards], "of", first.shape)

# %% tags=["tf"]
PER_REPLICA_BATCH = 4
GLOBAL_BATCH = PER_REPLICA_BATCH * REPLICAS  # what you batch the dataset with
config = tpukit.RunConfig(dataset="digits", batch_size=PER_REPLICA_BATCH, replicas=REPLICAS)
print(f"{PER_REPLICA_BATCH} per replica x {REPLICAS} replicas = {GLOBAL_BATCH} per step "
      f"(tpukit's RunConfig derives the same: {config.global_batch_size})")

dataset = tf.data.Dataset.range(10 * GLOBAL_BATCH).batch(GLOBAL_BATCH)
first = next(iter(strategy.experimental_distribute_dataset(dataset)))
for i, rows in enumerate(strategy.experimental_local_results(first)):
    print(f"replica {i}: {rows.numpy().tolist()}")
print("per-replica shapes:", [tuple(t.shape) for t in strategy.experimental_local_results(first)])

# %% [markdown]
# The loss must follow the same rule. Each replica averages its per-example losses over the **global** batch
# (`tf.nn.compute_average_loss` does this), and the gradients are then summed across replicas: the result is
# the mean over the global batch, whatever the number of replicas. In JAX you write the mean over the whole
# sharded array, and XLA adds the cross-device sum for you.

# %% tags=["jax"]
distributed = float(jax.jit(lambda x: jnp.mean(x.astype(jnp.float32) ** 2))(first))
one_device = float(np.mean(np.arange(GLOBAL_BATCH, dtype=np.float32) ** 2))
print("distributed:", distributed, "| one device:", one_device)

# %% tags=["tf"]
@tf.function
def mean_loss(batch):
    def per_replica(x):
        per_example = tf.cast(x, tf.float32) ** 2
        return tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)

    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(per_replica, args=(batch,)), axis=None)


distributed = float(mean_loss(first))
one_device = float(np.mean(np.arange(GLOBAL_BATCH, dtype=np.float32) ** 2))
print("distributed:", distributed, "| one device:", one_device)

# %% [markdown]
# ### Exercise 1: the slices of a batch
#
# Now take a per-replica batch of **16** on the lessons' 8 replicas. **Predict** two things before you measure:
# `GLOBAL_16`, the examples per step, and `LAST_ROWS`, the first and the last row of `range(...)` that the
# **last** replica gets in the **second** batch, as a pair `(first, last)`. The self-check distributes that batch
# over the setup's 8 devices (`strategy` on TensorFlow, `DEVICES` on JAX) and compares with what each one holds.

# %% tags=["exercise"]
GLOBAL_16 = ...  # YOUR PREDICTION: examples per step
LAST_ROWS = ...  # YOUR PREDICTION: (first row, last row) of the last replica's slice of the second batch

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["GLOBAL_16, LAST_ROWS = 16, (240, 255)", "GLOBAL_16, LAST_ROWS = 128, (112, 127)", "GLOBAL_16, LAST_ROWS = 128, (128, 143)", "GLOBAL_16, LAST_ROWS = 128, 255"]
# @title Solution
if SOLUTIONS:
    GLOBAL_16 = 16 * 8  # 16 per replica x 8 replicas
    LAST_ROWS = (128 + 7 * 16, 2 * 128 - 1)  # the second batch is rows 128..255; replicas 0-6 take 16 rows each first

# %% tags=["self-check", "jax"]
# Self-check: distribute the second batch of range(...), 16 per replica, over the 8 devices; read the slices
answered(GLOBAL_16, "global batch = per-replica batch x replicas")
answered(LAST_ROWS, "the second batch holds rows GLOBAL_16 .. 2*GLOBAL_16-1; each replica takes 16 in a row")
per = 16
split = NamedSharding(Mesh(np.array(DEVICES), ("batch",)), PartitionSpec("batch"))
second = jax.device_put(np.arange(per * len(DEVICES), 2 * per * len(DEVICES)), split)
slices = [shard.data for shard in sorted(second.addressable_shards, key=lambda shard: shard.index[0].start or 0)]
measured = (int(slices[-1][0]), int(slices[-1][-1]))
per_step = sum(len(rows) for rows in slices)
print(f"{len(slices)} replicas of {[len(rows) for rows in slices][0]} rows: {per_step} per step, "
      f"the last replica got rows {measured}")
check(GLOBAL_16 == per_step, f"one step took {per_step} examples: multiply the per-replica batch by the replicas")
check(isinstance(LAST_ROWS, (tuple, list)) and tuple(LAST_ROWS) == measured,
      f"the last replica got rows {measured}: give (first, last) of the second batch's last slice")
print("Exercise 1: correct.")

# %% tags=["self-check", "tf"]
# Self-check: distribute the second batch of range(...), 16 per replica, over the 8 devices; read the slices
answered(GLOBAL_16, "global batch = per-replica batch x replicas")
answered(LAST_ROWS, "the second batch holds rows GLOBAL_16 .. 2*GLOBAL_16-1; each replica takes 16 in a row")
per = 16
n = strategy.num_replicas_in_sync
batches = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(4 * per * n).batch(per * n)))
next(batches)
slices = [t.numpy() for t in strategy.experimental_local_results(next(batches))]
measured = (int(slices[-1][0]), int(slices[-1][-1]))
per_step = sum(len(rows) for rows in slices)
print(f"{len(slices)} replicas of {[len(rows) for rows in slices][0]} rows: {per_step} per step, "
      f"the last replica got rows {measured}")
check(GLOBAL_16 == per_step, f"one step took {per_step} examples: multiply the per-replica batch by the replicas")
check(isinstance(LAST_ROWS, (tuple, list)) and tuple(LAST_ROWS) == measured,
      f"the last replica got rows {measured}: give (first, last) of the second batch's last slice")
print("Exercise 1: correct.")

# %% [markdown]
# ## Keras models inside `strategy.scope()`
#
# `compile`, `fit`, `evaluate` and `predict` work the same under every strategy, for Sequential, functional and
# subclassed models, fed the global batch. Where each part must run differs between the frameworks:
#
# - **TensorFlow**: build and compile inside `strategy.scope()` (that is where the variables get created, one
#   copy per replica); `fit` may run inside or outside it, since the model remembers its strategy.
# - **JAX**: Keras looks the distribution up **when `fit` runs** (its JAX trainer splits each batch only if a
#   distribution is active then). A `fit` outside `DataParallel.scope()` feeds every device the whole batch:
#   it trains, on replicated weights, without splitting anything. So run `fit`, `evaluate` and `predict` inside
#   the scope too, or set the distribution for the whole program with
#   `keras.distribution.set_distribution(keras.distribution.DataParallel(devices=...))`.
#
# Everything inside the scope is right for both, so the cell below does that. Swapping the strategy swaps how the
# work is distributed, and nothing else. Notebook 04 trains a real CNN this way; here a tiny classifier shows the
# three kinds of model, and the cell prints how a weight is laid out and what one device got of a batch.
# (At smoke size only the Sequential one runs: each fit over 8 simulated replicas traces 8 copies of the step.
# At full size, 5 epochs of 32 small steps for each model: about 80 s on a CPU, most of it TensorFlow's
# per-step cost over 8 replicas; about 5 s on JAX.)
#
# The data are NumPy arrays, which `fit` reshuffles before every epoch (`shuffle=True` is the default). It does
# not shuffle a `tf.data.Dataset`: one comes in its own order, so shuffle it yourself, before batching.

# %%
rng = np.random.default_rng(0)
x = rng.random(((4 if SMOKE else 32) * GLOBAL_BATCH, 8), dtype=np.float32)
y = (x.sum(axis=1) > 4).astype("int32")


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.classify = keras.layers.Dense(2, activation="softmax")

    def call(self, inputs):
        return self.classify(self.hidden(inputs))


def sequential():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(2, activation="softmax")])


def functional():
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(hidden))


for make in [sequential] if SMOKE else [sequential, functional, Subclassed]:
    with strategy.scope():  # TensorFlow: the variables are mirrored. JAX: also where fit splits each batch
        model = make()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1 if SMOKE else 5, shuffle=True, verbose=0)
        loss, accuracy = model.evaluate(x, y, batch_size=GLOBAL_BATCH, verbose=0)
        probabilities = model.predict(x[:GLOBAL_BATCH], batch_size=GLOBAL_BATCH, verbose=0)
    print(f"{make.__name__:>10}: loss {loss:.3f}, accuracy {accuracy:.3f}, predictions {probabilities.shape}")

# %% tags=["jax"]
kernel = model.weights[0]
print(f"{kernel.path}: laid out as {kernel.value.sharding.spec} (nothing split: replicated) "
      f"on {len(kernel.value.sharding.device_set)} devices")
# What fit does to each batch under the distribution: split axis 0 over the mesh's "batch" axis
fed = keras.distribution.distribute_tensor(x[:GLOBAL_BATCH], strategy.get_data_layout(x[:GLOBAL_BATCH].shape))
print("a batch of", fed.shape, "-> per device", [s.data.shape for s in fed.addressable_shards])

# %% tags=["tf"]
kernel = model.weights[0]
print(f"{kernel.path}: a {type(kernel.value).__name__} with {len(kernel.value.values)} copies, one per replica")

# %% [markdown]
# ## Gradient descent by hand, on one device
#
# Before strategies, the plain loop: fit `y = 3x + 2` with two parameters. TensorFlow records the forward pass
# on a `tf.GradientTape` and an optimizer applies the gradients; JAX turns the loss function into its gradient
# function with `jax.grad` (here `jax.value_and_grad`, which returns the loss too), and the update is one line.
# Everything sits on one device (`tf.device`, or `jax.default_device`), the way the first Colab TPU posts ran it
# on a single TPU core.

# %% tags=["jax"]
LEARNING_RATE = 0.1  # try changing this
STEPS = 100

xs = np.random.default_rng(3).uniform(-1.0, 1.0, (256, 1)).astype(np.float32)
ys = 3.0 * xs + 2.0
params = {"w": jnp.float32(0.0), "b": jnp.float32(0.0)}
loss_and_gradients = jax.jit(jax.value_and_grad(lambda p: jnp.mean((p["w"] * xs + p["b"] - ys) ** 2)))

with jax.default_device(jax.devices()[0]):
    for i in range(STEPS):
        loss, gradients = loss_and_gradients(params)
        params = {k: params[k] - LEARNING_RATE * gradients[k] for k in params}
        if i % 25 == 0 or i == STEPS - 1:
            print(f"step {i:3d}: loss {float(loss):.6f}, w {float(params['w']):.3f}, b {float(params['b']):.3f}")
print("w lives on", params["w"].devices())

# %% tags=["tf"]
LEARNING_RATE = 0.1  # try changing this
STEPS = 100

xs = np.random.default_rng(3).uniform(-1.0, 1.0, (256, 1)).astype(np.float32)
ys = 3.0 * xs + 2.0
w, b = tf.Variable(0.0), tf.Variable(0.0)
optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE)

with tf.device(runtime.devices[0]):
    for i in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((w * xs + b - ys) ** 2)
        gradients = tape.gradient(loss, [w, b])
        optimizer.apply_gradients(zip(gradients, [w, b]))
        if i % 25 == 0 or i == STEPS - 1:
            print(f"step {i:3d}: loss {float(loss):.6f}, w {float(w):.3f}, b {float(b):.3f}")
print("w lives on", w.device)

# %% [markdown]
# ## Connecting: TPU, then GPUs, then the CPU
#
# The lessons built their 8 devices and their strategy by hand. A training run wants the runtime's real
# accelerator instead, and `tpukit.connect()` (called in the setup cell) finds it. It is the `detect_strategy()`
# helper of the early Colab TPU examples, grown up: a `TPUStrategy` when a TPU answers, a `MirroredStrategy` over
# two or more GPUs, TensorFlow's default strategy on one GPU (as plain `model.fit` runs there, with the XLA that
# Keras' `jit_compile="auto"` gives it), else the default strategy (or, with `replicas=8` as the setup asks on a
# CPU-only runtime, a `MirroredStrategy` over 8 simulated devices, like the lessons'). On JAX it returns a
# `keras.distribution.DataParallel` over JAX's devices, and on one device, such as Colab's one-chip TPU, a
# `OneDevice` with no distribution at all (`DataParallel` over one device only added compilations). What it adds
# to the lines above: the order TPU, GPUs, CPU with the reason each other kind was skipped, time limits on reaching
# a TPU, the precision to train in (`runtime.precision`), and a `Runtime` that `tpukit.train` enters for you:
# inside its scope for the whole run, `fit` included.
#
# One `tensorflow` pip package serves both CPU and GPU (since TF 2.1); `tensorflow-cpu` is the smaller build
# without CUDA, which is what tpukit's `[cpu]` extra installs on laptops and in CI. JAX comes as one package
# too, with the TPU (`libtpu`) or CUDA support as extras.

# %% tags=["jax"]
print("JAX", jax.__version__, "| platform:", jax.default_backend(), "| devices:", len(jax.devices()))
print(runtime.describe())  # what was found, the precision to train in, and why each other kind was skipped
print("kind:", runtime.kind, "| replicas:", runtime.replicas, "| simulated:", runtime.simulated,
      "| strategy:", type(runtime.strategy).__name__, "| skipped:", list(runtime.skipped_reasons))

# %% tags=["tf"]
print("TensorFlow", tf.__version__, "built with CUDA:", tf.test.is_built_with_cuda())
print(runtime.describe())  # what was found, the precision to train in, and why each other kind was skipped
print("kind:", runtime.kind, "| replicas:", runtime.replicas, "| simulated:", runtime.simulated,
      "| strategy:", type(runtime.strategy).__name__, "| skipped:", list(runtime.skipped_reasons))

# %% [markdown]
# ### The TPU resolver, then and now
#
# In TensorFlow 2.1 days a Colab TPU was a separate machine (a *TPU node*). The notebook found it through the
# `COLAB_TPU_ADDR` environment variable and talked to it over gRPC:
#
# ```python
# resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="grpc://" + os.environ["COLAB_TPU_ADDR"])
# tf.config.experimental_connect_to_cluster(resolver)     # the TPU node is a remote worker
# tf.tpu.experimental.initialize_tpu_system(resolver)     # also wipes the TPU's memory
# strategy = tf.distribute.experimental.TPUStrategy(resolver)
# ```
#
# On Colab the resolver found the address by itself, so `TPUClusterResolver()` with no argument also worked.
# Today's Colab TPU runtimes are **TPU VMs**: the chips are attached to the notebook's own machine, there is no
# cluster to connect to, and the resolver needs `tpu="local"` (and a TensorFlow built with TPU support, which
# Colab no longer ships; JAX finds the chips by itself: `jax.devices()` lists them).
#
# `tpukit.hardware.tpu.tpu_address()` makes that choice: an explicit `tpu=` argument wins, else `COLAB_TPU_ADDR` (an
# old TPU node, as `grpc://...`), else `TPU_NAME` (a Cloud TPU by name), else `"local"` on a TPU VM, else None.
# Nothing here needs a TPU to try: set the old variable for a moment and see which address it resolves.

# %%
from unittest import mock

with mock.patch.dict(os.environ, {"COLAB_TPU_ADDR": "10.0.0.2:8470"}):
    print("old TPU node:", tpu.tpu_address())
print("this runtime:", tpu.tpu_address(), "| explicit:", tpu.tpu_address("local"))

# %% [markdown]
# With an address, `connect()` runs the four lines above: it connects to the cluster only for a remote
# (`grpc://`) address, initializes the TPU system and builds the `TPUStrategy`, each step with a time limit. A
# failure becomes one line in `runtime.skipped_reasons["tpu"]` (for example a TensorFlow build without TPU
# support) instead of a page of gRPC errors.

# %% [markdown]
# ## What you should see
#
# - The setup's lessons line: `MirroredStrategy over 8 devices` (TensorFlow) or `DataParallel over 8 devices`
#   (JAX), on every runtime.
# - The matmul ran on the first device; `strategy.run` (or `shard_map`) returned one value per replica
#   (`0, 10, 20, ... 70`).
# - Each replica's slice of the first batch holds 4 different, consecutive examples (shape `(4,)` on each of the
#   8 devices), and the distributed mean loss equals the one-device mean.
# - The Keras weight: 8 copies (TensorFlow) or `PartitionSpec(None, None)` on 8 devices (JAX), and a batch of
#   32 rows fed as 8 shards of 4.
# - The hand-written loop drives the loss from about 7 to below 1e-4, with `w` near 3 and `b` near 2.
# - `describe()` names the runtime: here `CPU with 8 simulated replicas`; on Colab's TPU runtime one replica
#   (one v5e or v6e chip; 8 on Kaggle's v5e-8 or a v2-8/v3-8 board) or `GPU, 1 replica`, with one line per
#   skipped kind. On JAX the strategy line says `DataParallel` (`OneDevice` with one device).
#
# ## On a TPU, a GPU or the CPU
#
# - **TPU**: one replica per TPU device: 1 on Colab's one-chip TPU runtime (v5e-1 or v6e-1), 8 on Kaggle's
#   v5e-8 or on a v2-8/v3-8 (4 chips x 2 cores). Colab's TPU runtime runs Keras on JAX: on its one chip with no
#   distribution (the lessons' 8 devices are then `jax.devices("cpu")`), on several devices `DataParallel` over
#   `jax.devices()`, with `fit` inside its scope (or `set_distribution`), arrays placed with `jax.device_put`.
#   With TensorFlow (a TPU node, or a TPU VM with `tensorflow-tpu`): `TPUStrategy`, ops placed with
#   `tf.device("/device:TPU:0")`. Steps are compiled with XLA either way, so keep shapes static
#   (`drop_remainder=True`).
# - **GPU**: one replica per GPU. Two or more: `MirroredStrategy` (NCCL all-reduce between GPUs). One, as on
#   Colab's T4: TensorFlow's default strategy, as plain `model.fit` uses (`runtime.strategy` prints
#   `_DefaultDistributionStrategy`): a mirror of one device would add nothing, and Keras would then not compile
#   the step with XLA.
# - **CPU**: the default strategy (one replica), or N logical devices (TensorFlow:
#   `tf.config.set_logical_device_configuration`, then `MirroredStrategy`; JAX:
#   `--xla_force_host_platform_device_count`; `connect(replicas=N)` does either). They share the same cores:
#   right for learning and testing the semantics, never faster.

# %% [markdown]
# ## Extra: the fastest learning rate
#
# For after class: it practises "Gradient descent by hand, on one device".

# %% [markdown]
# ### Exercise 2: the fastest learning rate that still converges
#
# 0.1 converges in 100 steps; 0.001 is far too slow; some larger rate makes the loss blow up instead.
# **Predict `MAX_RATE`**, the learning rate above which this loop diverges, and only then try a few in that
# section's loop. The self-check runs the same descent (in NumPy) at 0.9x and 1.1x your rate: the first must converge,
# the second must diverge.

# %% tags=["exercise"]
MAX_RATE = ...  # YOUR PREDICTION: a learning rate

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["MAX_RATE = 2.0", "MAX_RATE = 0.1", "MAX_RATE = 0.5"]
# @title Solution
if SOLUTIONS:
    MAX_RATE = 1.0  # the loss curves most along b (second derivative 2); descent diverges above 2 / 2 = 1

# %% tags=["self-check"]
# Self-check: gradient descent at 0.9x and at 1.1x your rate
answered(MAX_RATE, "the loss is a bowl; along b its second derivative is 2, and gradient descent on a bowl of "
                   "curvature c diverges once the rate passes 2 / c")


def final_loss(rate, steps=100):
    x1 = np.random.default_rng(3).uniform(-1.0, 1.0, 256)
    w1 = b1 = 0.0
    for _ in range(steps):
        error = w1 * x1 + b1 - (3.0 * x1 + 2.0)
        w1, b1 = w1 - rate * 2 * np.mean(error * x1), b1 - rate * 2 * np.mean(error)
    return float(np.mean((w1 * x1 + b1 - (3.0 * x1 + 2.0)) ** 2))


below, above, start = final_loss(0.9 * MAX_RATE), final_loss(1.1 * MAX_RATE), final_loss(0.0)
print(f"loss after 100 steps: {below:.3g} at {0.9 * MAX_RATE:.3g}, {above:.3g} at {1.1 * MAX_RATE:.3g} "
      f"(it starts at {start:.3g})")
check(below < 1e-3, "just below your rate the loss does not converge: the limit is lower")
check(above > start, "just above your rate the loss still shrinks: the limit is higher")
print("Exercise 2: correct.")
