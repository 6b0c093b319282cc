"""Input pipelines: the batches of every epoch, in an order that depends on (seed, epoch) alone.

Two feeders share one definition of the order (`epoch_order`, NumPy):

- `tf.data` (runs on TensorFlow, and the datasets handed to the user wherever
  TensorFlow is installed): the examples are held as tensors, each batch is a
  gather of its indices, prefetched;
- `numpy` (runs on JAX, so that they never load TensorFlow, as on Colab's TPU
  runtime): a `keras.utils.PyDataset` that gathers the same batches.

So epoch e's batches are the same in every run, on both feeders, and a run
resumed at epoch k sees exactly what an uninterrupted run saw from epoch k
on. Streams too large for memory (`Stream`) are shuffled per epoch
by tf.data with a seeded buffer; already batched data is fed as it is.
"""

from __future__ import annotations

import os
from typing import Optional, Tuple

from tpukit.config import ConfigError
from tpukit.data.types import Arrays, Batched, Stream
from tpukit.backend import installed

FEEDERS = ("tf.data", "numpy")


def steps_per_epoch(num_train: int, global_batch: int) -> int:
    """Full batches in one pass over `num_train` examples (the remainder is dropped, so shapes are static).

    The one place this is computed: the trainer, the panel and the CLI all call it.
    """
    _check_positive("global_batch", global_batch)
    if num_train < global_batch:
        raise ValueError(
            f"Expected global_batch <= the {num_train} training examples. Received: global_batch={global_batch}."
        )
    return num_train // global_batch


def eval_batch_size(num_examples: int, global_batch: int, replicas: int = 1) -> int:
    """The evaluation batch: the global batch, or the whole split rounded down to a multiple of the replicas."""
    return max(min(global_batch, num_examples - num_examples % replicas), min(num_examples, 1))


def choose(preferred: str, fixed: bool = False) -> str:
    """The feeder for a run: the runtime's `preferred` one (`Runtime.feeder`: tf.data on TensorFlow, NumPy on
    JAX), unless TPUKIT_FEEDER forces another and the runtime's is not `fixed`.

    A JAX run fed by NumPy never loads TensorFlow, as on Colab's TPU runtime, which has
    none: the process skips TensorFlow's import (4-5 s on a 2-core CPU) and runs no
    tf.data threads beside XLA's. Measured (the mlp on digits, 4 epochs, 3 processes
    each): 54-63k examples/s in 10 s against tf.data's 21-29k in 14 s.
    `TPUKIT_FEEDER=numpy` (or `tf.data`) forces one, for tests and comparisons; several
    JAX processes always take NumPy: each cuts its own share out of every batch.
    """
    return preferred if fixed else (_forced() or preferred)


def dataset_feeder() -> str:
    """The feeder for datasets handed to the user (`data.train_dataset`): a tf.data.Dataset wherever
    TensorFlow is installed, whatever the backend, else the NumPy feeder's PyDataset. `TPUKIT_FEEDER` forces one."""
    return _forced() or ("tf.data" if installed("tensorflow") else "numpy")


def _forced() -> Optional[str]:
    forced = os.environ.get("TPUKIT_FEEDER")
    if forced and forced not in FEEDERS:
        raise ValueError(f"TPUKIT_FEEDER: expected one of {', '.join(FEEDERS)}. Received: {forced!r}.")
    return forced or None


def epoch_order(num_train: int, global_batch: int, steps: int, seed: int, epoch: int):
    """Example indices for each step of epoch `epoch`: an int64 array of shape (steps, global_batch).

    One seeded permutation per epoch, cut into full batches. An epoch longer than
    one pass repeats that permutation's batches; a shorter one takes the first.
    """
    import numpy as np

    per_pass = steps_per_epoch(num_train, global_batch)
    permutation = np.random.default_rng([int(seed), int(epoch)]).permutation(num_train)
    batches = permutation[: per_pass * global_batch].reshape(per_pass, global_batch)
    return batches[np.arange(steps) % per_pass].astype(np.int64)


def train_feed(
    part,
    *,
    feeder: str,
    global_batch: int,
    seed: int,
    epochs: int,
    initial_epoch: int = 0,
    steps: Optional[int] = None,
    shard: Tuple[int, int] = (0, 1),
):
    """Batches for epochs `initial_epoch .. epochs - 1` of a training part, as one stream.

    Pass the same `steps` to `fit(steps_per_epoch=...)`, so Keras epochs and data epochs stay aligned.
    `shard=(i, n)`: this is process i of n, and it feeds the i-th n-th of every global batch (the
    examples one process would feed, so n processes train on the same batches as one).
    """
    _check_shard(part, feeder, global_batch, shard)
    if isinstance(part, Batched):
        return part.dataset
    _check_epochs(epochs, initial_epoch)
    steps = steps or steps_per_epoch(len(part), global_batch)
    if isinstance(part, Stream):
        return _tf_stream(part, global_batch, seed, epochs, initial_epoch, steps)
    if feeder == "numpy":
        return EpochBatches(
            part,
            global_batch=global_batch,
            seed=seed,
            epochs=epochs,
            initial_epoch=initial_epoch,
            steps=steps,
            shard=shard,
        )
    return _tf_arrays(part, global_batch, seed, epochs, initial_epoch, steps)


def eval_feed(part, *, feeder: str, global_batch: int, replicas: int = 1, shard: Tuple[int, int] = (0, 1)):
    """A validation or test part in a fixed order, in static batches (the tail that fills no batch is left out)."""
    if part is None:
        return None
    _check_shard(part, feeder, global_batch, shard)
    if isinstance(part, Batched):
        return part.dataset
    batch = eval_batch_size(len(part), global_batch, replicas)
    if isinstance(part, Stream):
        import tensorflow as tf

        return _with_options(part.dataset.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
    if feeder == "numpy":
        return InOrder(part, batch, shard=shard)
    import tensorflow as tf

    examples = tf.data.Dataset.from_tensor_slices((part.x, part.y))
    return _with_options(examples.batch(batch, drop_remainder=True).cache().prefetch(tf.data.AUTOTUNE), autotune=False)


# ---- tf.data -----------------------------------------------------------------------


def _tf_arrays(part, global_batch, seed, epochs, initial_epoch, steps):
    import tensorflow as tf

    n = len(part)
    with tf.device("/CPU:0"):
        x = tf.nest.map_structure(tf.convert_to_tensor, part.x)
        y = tf.convert_to_tensor(part.y)

    def order(epoch):
        return epoch_order(n, global_batch, steps, seed, int(epoch))

    @tf.autograph.experimental.do_not_convert
    def one_epoch(epoch):
        indices = tf.numpy_function(order, [epoch], tf.int64, stateful=False)
        return tf.data.Dataset.from_tensor_slices(tf.reshape(indices, (steps, global_batch)))

    @tf.autograph.experimental.do_not_convert
    def gather(indices):
        return tf.nest.map_structure(lambda a: tf.gather(a, indices), x), tf.gather(y, indices)

    stream = tf.data.Dataset.range(initial_epoch, epochs).flat_map(one_epoch)
    stream = stream.map(gather, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return _with_options(stream.prefetch(tf.data.AUTOTUNE), autotune=False)


def _tf_stream(part, global_batch, seed, epochs, initial_epoch, steps):
    """A stream too large for memory: each epoch shuffles with a buffer seeded by (seed, epoch)."""
    import tensorflow as tf

    buffer = min(part.count, 10_000)

    @tf.autograph.experimental.do_not_convert
    def one_epoch(epoch):
        _pin_graph_seed()
        order = part.dataset.shuffle(buffer, seed=_epoch_seed(seed, epoch), reshuffle_each_iteration=False)
        return order.batch(global_batch, drop_remainder=True).repeat().take(steps)

    stream = tf.data.Dataset.range(initial_epoch, epochs).flat_map(one_epoch)
    return _with_options(stream.prefetch(tf.data.AUTOTUNE))


def _epoch_seed(seed, epoch):
    return seed * 1_000_003 + epoch


def _pin_graph_seed():
    """Fix the graph-level seed of the epoch function being traced.

    tf.data mixes TensorFlow's global seed into every op seed, so without this
    the order would change with `tf.random.set_seed`, and a global seed of 0
    even fails with a tensor op seed. The pin touches only the traced function.
    """
    import tensorflow as tf

    tf.compat.v1.get_default_graph().seed = 1


def _with_options(dataset, autotune: bool = True):
    """Shard by data across workers and keep element order fixed.

    `autotune=False` for the pipelines over arrays in memory: tf.data's autotuning thread
    makes the destruction of every iterator wait for its current sleep to end (TensorFlow
    2.20-2.21: 0 to 1.6 s, at random, measured at the end of `fit`, of each validation
    and of the test evaluation), and a gather from memory has nothing to tune. Without it
    AUTOTUNE still means something: a map runs on as many threads as there are cores and
    a prefetch grows its own buffer. A user's stream keeps tf.data's default.
    """
    import tensorflow as tf

    options = tf.data.Options()
    if not autotune:
        options.autotune.enabled = False
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.deterministic = True
    return dataset.with_options(options)


# ---- NumPy (no TensorFlow) -----------------------------------------------------------


def _make_classes():
    """The PyDataset classes, made when the NumPy feeder is first used (so importing this module skips Keras)."""
    import keras

    class EpochBatchesImpl(keras.utils.PyDataset):
        """Training batches of epochs `initial_epoch .. epochs - 1` as one random-access sequence."""

        def __init__(self, part, *, global_batch, seed, epochs, initial_epoch, steps, shard=(0, 1)):
            super().__init__(workers=1, use_multiprocessing=False)
            self.part, self.global_batch, self.seed = part, global_batch, seed
            self.initial_epoch, self.epochs, self.steps = initial_epoch, epochs, steps
            self.share = _share(global_batch, shard)
            self._cached = (None, None)

        def __len__(self):
            return (self.epochs - self.initial_epoch) * self.steps

        def __getitem__(self, index):
            epoch, step = divmod(int(index), self.steps)
            epoch += self.initial_epoch
            if self._cached[0] != epoch:
                self._cached = (epoch, epoch_order(len(self.part), self.global_batch, self.steps, self.seed, epoch))
            batch = self.part.take(self._cached[1][step][self.share])
            return batch.x, batch.y

    class InOrderImpl(keras.utils.PyDataset):
        """Validation or test batches in their stored order."""

        def __init__(self, part, batch, shard=(0, 1)):
            super().__init__(workers=1, use_multiprocessing=False)
            self.part, self.batch = part, batch
            self.share = _share(batch, shard)

        def __len__(self):
            return len(self.part) // self.batch

        def __getitem__(self, index):
            start = index * self.batch
            piece = self.part.take(slice(start + self.share.start, start + self.share.stop))
            return piece.x, piece.y

    return EpochBatchesImpl, InOrderImpl


_classes = None


def _feeder_classes():
    global _classes
    if _classes is None:
        _classes = _make_classes()
    return _classes


def EpochBatches(part, **kwargs):
    """A `keras.utils.PyDataset` of training batches in `epoch_order` (the NumPy feeder)."""
    return _feeder_classes()[0](part, **kwargs)


def InOrder(part, batch: int, shard: Tuple[int, int] = (0, 1)):
    """A `keras.utils.PyDataset` of evaluation batches in stored order (the NumPy feeder)."""
    return _feeder_classes()[1](part, batch, shard=shard)


# ---- checks ------------------------------------------------------------------------


def _share(batch: int, shard: Tuple[int, int]) -> slice:
    """The rows of a batch that process `shard[0]` of `shard[1]` feeds."""
    index, count = shard
    size = batch // count
    return slice(index * size, (index + 1) * size)


def _check_shard(part, feeder: str, batch: int, shard: Tuple[int, int]) -> None:
    index, count = shard
    if count == 1:
        return
    if feeder != "numpy" or not isinstance(part, Arrays):
        raise ConfigError(
            f"training across {count} processes cuts each process's share out of every batch, "
            "which needs arrays (or a dataset tpukit can read into arrays), not a stream or a batched "
            "dataset; pass arrays."
        )
    if batch % count or not 0 <= index < count:
        raise ConfigError(
            f"a batch of {batch} cannot be shared by {count} processes; use a global batch that "
            f"is a multiple of {count}."
        )


def _check_positive(field, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Expected {field} to be an integer >= 1. Received: {field}={value!r}.")


def _check_epochs(epochs, initial_epoch) -> None:
    for field, value in (("epochs", epochs), ("initial_epoch", initial_epoch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"Expected {field} to be an integer >= 0. Received: {field}={value!r}.")
    if initial_epoch > epochs:
        raise ValueError(f"Expected initial_epoch <= epochs ({epochs}). Received: initial_epoch={initial_epoch}.")
