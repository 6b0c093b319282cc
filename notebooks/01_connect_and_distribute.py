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
# # Connecting and distributing: devices, strategies and replicas
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/22<br>
# **Last modified:** 2026/11/22<br>
# **Description:** Connect to a TPU, GPUs or the CPU (or simulate 8 replicas), place ops on one device, run a
# function on every replica and split a dataset between them.<br>
# **Accelerator:** TPU, GPU or CPU (on a CPU, 8 simulated replicas)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/01_connect_and_distribute.ipynb)

# %% [markdown]
# ## Introduction
#
# A TPU v2-8 or v3-8 board has 4 chips with 2 cores each: TensorFlow sees 8 devices, and a
# `tf.distribute.TPUStrategy` runs one *replica* of your step on each. Those boards are what the 2020 material
# used; Colab's free TPU today is a single v5e chip (one device), and 8 devices remain on Kaggle's v5e-8. A GPU
# runtime has one GPU (`MirroredStrategy` over it), a CPU runtime has the CPU. tpukit's `connect()` tries them in
# that order and tells you why it skipped the others. On a CPU it can also split the processor into 8 logical
# devices, so everything below about 8 replicas runs anywhere.
#
# **You will learn to:**
#
# - connect to a TPU, GPUs or the CPU, and read what was found and why the rest was skipped;
# - know how a TPU was found on Colab's old TPU-node runtime (`COLAB_TPU_ADDR`) and how it is found on today's
#   TPU VMs (`tpu="local"`);
# - list the devices and run an op on one of them;
# - run a function on every replica with `strategy.run` and read the `PerReplica` value it returns;
# - distribute a dataset, and tell the per-replica batch from the global batch;
# - build Keras models inside `strategy.scope()`;
# - write gradient descent by hand with `tf.GradientTape` on a single device.

# %% [markdown]
# ## Setup
#
# Simulated replicas are logical CPU devices, and TensorFlow fixes its devices the first time it runs an op.
# So `tpukit.connect(replicas=8)` must be the **first TensorFlow work in the kernel**; asked later, it raises
# `RestartRequired` (restart the runtime, then run this cell first). Listing the *physical* GPUs, as below, does
# not start TensorFlow's devices, so it may come first.

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

import tensorflow as tf

import tpukit
from tpukit import runtime as rt

tf.get_logger().setLevel("WARNING")  # MirroredStrategy logs every reduction at INFO level

# A TPU or a GPU is used as it is; a CPU-only runtime simulates the 8 cores of a v2-8/v3-8 TPU board.
has_accelerator = rt.tpu_address() is not None or bool(tf.config.list_physical_devices("GPU"))
runtime = tpukit.connect(replicas=None if has_accelerator else 8)
strategy = runtime.strategy
print(runtime.describe())

# %% [markdown]
# ## Connecting: TPU, then GPUs, then the CPU
#
# `connect()` is the `detect_strategy()` helper of the early Colab TPU examples, grown up: a `TPUStrategy` when a
# TPU answers, a `MirroredStrategy` over the GPUs when there are any, else the default strategy (or a
# `MirroredStrategy` over simulated replicas). The `Runtime` it returns keeps what it found, the strategy and the
# reason each other kind was skipped.
#
# One `tensorflow` pip package serves both CPU and GPU (since TF 2.1); `tensorflow-cpu` is the smaller build
# without CUDA, which is what tpukit's `[cpu]` extra installs on laptops and in CI.

# %%
print("TensorFlow", tf.__version__, "built with CUDA:", tf.test.is_built_with_cuda())
print("kind:", runtime.kind, "| replicas:", runtime.replicas, "| simulated:", runtime.simulated)
print("strategy:", type(strategy).__name__)
for kind, why in runtime.skipped_reasons.items():
    print(f"skipped {kind}: {why}")

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
# cluster to connect to, and the resolver needs `tpu="local"`. tpukit picks the address like this:

# %%
import inspect

print(inspect.getsource(rt.tpu_address))

# %% [markdown]
# Nothing here needs a TPU to try: set the old variable for a moment and see which address tpukit would resolve.

# %%
from unittest import mock

with mock.patch.dict(os.environ, {"COLAB_TPU_ADDR": "10.0.0.2:8470"}):
    print("old TPU node:", rt.tpu_address())
print("this runtime:", rt.tpu_address(), "| explicit:", rt.tpu_address("local"))

# %% [markdown]
# Then it connects only for a remote address, initializes the TPU system and builds the strategy. A failure
# becomes one line in `runtime.skipped_reasons["tpu"]` (for example a TensorFlow build without TPU support),
# instead of a page of gRPC errors:

# %%
source = inspect.getsource(rt._connect_tpu)
print(source[source.index("    make ="): source.index("    devices =")])

# %% [markdown]
# ## Devices, and one op on one device
#
# A TPU v2-8 lists 8 logical `TPU` devices (`/device:TPU:0` to `TPU:7`), as does Kaggle's v5e-8; Colab's free
# v5e TPU lists one. Here the list is whatever this runtime has. `tf.device` pins the ops created inside it to one device, such as one TPU core.

# %%
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
# Wrap the call in a `tf.function`: run eagerly, a `MirroredStrategy` pays a large overhead on every call.

# %%
@tf.function
def replica_ids():
    def whoami():
        return tf.distribute.get_replica_context().replica_id_in_sync_group * 10

    return strategy.run(whoami)


per_replica = replica_ids()
print(type(per_replica).__name__ if runtime.replicas > 1 else "one replica: a plain tensor")
print([int(t) for t in strategy.experimental_local_results(per_replica)])
print("sum:", int(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)))

# %% [markdown]
# On a real TPU, the TPU system keeps its state (variables, compiled programs) between cells. Before unrelated
# new work, the old blog posts initialized it again, which clears it (every variable on the TPU is gone):
#
# ```python
# tf.tpu.experimental.initialize_tpu_system(strategy.cluster_resolver)
# ```
#
# tpukit leaves that to you: `connect()` with the same arguments returns the runtime it already has, without
# touching the TPU.

# %% [markdown]
# ## Distributing a dataset: per-replica and global batch
#
# `strategy.experimental_distribute_dataset(ds)` splits every batch of `ds` between the replicas, so each replica
# gets a different slice. Batch the dataset with the **global** batch:
# global batch = per-replica batch x `num_replicas_in_sync`. tpukit's `RunConfig.batch_size` is per replica and
# `global_batch_size` is derived from it, so changing the hardware never silently changes what a replica sees.

# %%
PER_REPLICA_BATCH = 4
config = tpukit.RunConfig(dataset="digits", batch_size=PER_REPLICA_BATCH, replicas=strategy.num_replicas_in_sync)
GLOBAL_BATCH = config.global_batch_size
print(f"{PER_REPLICA_BATCH} per replica x {strategy.num_replicas_in_sync} replicas = {GLOBAL_BATCH} per step")

dataset = tf.data.Dataset.range(10 * GLOBAL_BATCH).batch(GLOBAL_BATCH)
first = next(iter(strategy.experimental_distribute_dataset(dataset)))
slices = [t.numpy().tolist() for t in strategy.experimental_local_results(first)]
for i, rows in enumerate(slices):
    print(f"replica {i}: {rows}")

# %% [markdown]
# The loss must follow the same rule. Each replica averages its per-example losses over the **global** batch
# (`tf.nn.compute_average_loss` does this), and the gradients are then summed across replicas: the result is
# the mean over the global batch, whatever the number of replicas.

# %%
@tf.function
def mean_loss(batch):
    def per_replica(x):
        per_example = tf.cast(x, tf.float32) ** 2
        return tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)

    return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(per_replica, args=(batch,)), axis=None)


one_device = tf.reduce_mean(tf.cast(tf.range(GLOBAL_BATCH), tf.float32) ** 2)
print("distributed:", float(mean_loss(first)), "| one device:", float(one_device))

# %% [markdown]
# ### Exercise 1: the slices of a batch
#
# **Try changing `PER_REPLICA_BATCH`** above (for example to 16) and re-run from there. The self-check holds for
# any value: each replica gets exactly `PER_REPLICA_BATCH` rows, the slices never overlap, and together they are
# the global batch.

# %%
# Self-check
assert all(len(rows) == PER_REPLICA_BATCH for rows in slices), [len(r) for r in slices]
assert sorted(sum(slices, [])) == list(range(GLOBAL_BATCH)), "the slices should tile the first global batch"
assert GLOBAL_BATCH == PER_REPLICA_BATCH * runtime.replicas
print("Exercise 1: correct.")

# %% [markdown]
# ## Keras models inside `strategy.scope()`
#
# `compile`, `fit`, `evaluate` and `predict` work the same under every strategy, for Sequential, functional and
# subclassed models: build and compile inside `strategy.scope()` (that is where the variables get created, one
# copy per replica) and feed the global batch. Swapping the strategy swaps how the work is distributed, and
# nothing else. Notebook 04 trains a real CNN this way; here a tiny classifier shows the three kinds of model.
# (At smoke size only the Sequential one runs: each fit over 8 simulated replicas traces 8 copies of the step.)

# %%
import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.random(((4 if SMOKE else 64) * GLOBAL_BATCH, 8), dtype=np.float32)
y = (x.sum(axis=1) > 4).astype("int32")
# fit(shuffle=True) shuffles arrays only: a tf.data input comes in its own order, so shuffle it here, before
# batching (reshuffled every epoch, the order fixed by the seed).
examples = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0)
            .batch(GLOBAL_BATCH, drop_remainder=True))


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
    with strategy.scope():
        model = make()
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(examples, epochs=1 if SMOKE else 5, verbose=0)  # the dataset shuffles: it has .shuffle() above
    loss, accuracy = model.evaluate(examples, verbose=0)
    probabilities = model.predict(examples.take(1), verbose=0)
    print(f"{make.__name__:>10}: loss {loss:.3f}, accuracy {accuracy:.3f}, predictions {probabilities.shape}")

# %% [markdown]
# ## Gradient descent by hand, on one device
#
# Before strategies, the plain loop: fit `y = 3x + 2` with two variables, a `tf.GradientTape` that records the
# forward pass, and an optimizer that applies the gradients. Everything sits on one device, the way the first
# Colab TPU posts ran it on a single TPU core.

# %%
LEARNING_RATE = 0.1  # try changing this
STEPS = 100

with tf.device(runtime.devices[0]):
    xs = tf.random.stateless_uniform((256, 1), seed=(3, 4), minval=-1.0, maxval=1.0)
    ys = 3.0 * xs + 2.0
    w, b = tf.Variable(0.0), tf.Variable(0.0)
    optimizer = keras.optimizers.SGD(learning_rate=LEARNING_RATE)
    for step in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((w * xs + b - ys) ** 2)
        gradients = tape.gradient(loss, [w, b])
        optimizer.apply_gradients(zip(gradients, [w, b]))
        if step % 25 == 0 or step == STEPS - 1:
            print(f"step {step:3d}: loss {float(loss):.6f}, w {float(w):.3f}, b {float(b):.3f}")
print("w lives on", w.device)

# %% [markdown]
# ### Exercise 2: a learning rate that converges
#
# **Try changing `LEARNING_RATE`** in the cell above: 0.001 is too slow for 100 steps, 1.5 diverges. The
# self-check passes when the loss ends below 1e-4 and the fit recovers `w = 3`, `b = 2`.

# %%
# Self-check
assert float(loss) < 1e-4, f"loss {float(loss):.4g} after {STEPS} steps: the learning rate is too small or too large"
assert abs(float(w) - 3.0) < 0.05 and abs(float(b) - 2.0) < 0.05
print("Exercise 2: correct.")

# %% [markdown]
# ## What you should see
#
# - `describe()` names the runtime: here `CPU with 8 simulated replicas`; on Colab's free TPU one replica (one
#   v5e chip; 8 on Kaggle's v5e-8 or a v2-8/v3-8 board) or `GPU, 1 replica`, with one line per skipped kind.
# - The matmul ran on the first device; `strategy.run` returned one value per replica (`0, 10, 20, ...`).
# - Each replica's slice of the first batch holds different, consecutive examples, and the distributed mean loss
#   equals the one-device mean.
# - The tape loop drives the loss from about 4 to below 1e-4, with `w` near 3 and `b` near 2.
#
# ## On a TPU, a GPU or the CPU
#
# - **TPU**: one replica per TPU device: 1 on Colab's free v5e chip, 8 on Kaggle's v5e-8 or on a v2-8/v3-8
#   (4 chips x 2 cores), `TPUStrategy`; ops placed with
#   `tf.device("/device:TPU:0")`. Steps are compiled with XLA, so keep shapes static (`drop_remainder=True`).
# - **GPU**: one replica per GPU, `MirroredStrategy` (NCCL all-reduce between GPUs). On one GPU the replica
#   machinery still runs, with a single slice per batch.
# - **CPU**: the default strategy (one replica), or `connect(replicas=N)` for N logical devices under
#   `MirroredStrategy`. They share the same cores: right for learning and testing the semantics, never faster.
