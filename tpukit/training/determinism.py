"""Seeds, op determinism and a weights fingerprint.

A deterministic run seeds Python, NumPy, TensorFlow and Keras with one number,
turns on TensorFlow's op determinism and shuffles with seeds derived from it.
Then two runs of one config give bitwise-equal weights, which `fingerprint`
shows as one short hash.

TensorFlow has no public way to turn op determinism off again in a running
process. "Deterministic off" in tpukit therefore means: seeds are still set
(so runs start from the same weights), but op determinism stays on once
enabled until the runtime restarts. `op_determinism_enabled()` tells which.
"""

from __future__ import annotations

import hashlib

from tpukit.config import ConfigError

_enabled = False


def set_seed(seed: int) -> None:
    """Seed Python's random, NumPy, TensorFlow (wherever installed) and Keras' global seed generator."""
    import keras

    keras.utils.set_random_seed(int(seed))


def _seed_run(seed: int, tensorflow: bool) -> None:
    """`set_seed` for a run, which on JAX leaves TensorFlow alone while the process has not loaded it.

    `keras.utils.set_random_seed` imports TensorFlow wherever it is installed, to seed
    tf.data's shuffles. A JAX run needs no such seed (its feeder is NumPy and its order
    `pipeline.epoch_order`'s; a user's tf.data dataset means TensorFlow is already
    loaded, and then it is seeded), so there Keras' seeding runs with TensorFlow hidden
    from it, and the run never pays TensorFlow's import (4-5 s on a 2-core CPU). A
    TensorFlow imported later in that process starts unseeded: `set_seed` seeds it.
    """
    import sys

    lazy = _keras_lazy_tensorflow()
    if tensorflow or "tensorflow" in sys.modules or lazy is None:
        set_seed(seed)
        return
    lazy._available = False  # read by set_random_seed's `if tf.available`
    try:
        set_seed(seed)
    finally:
        lazy._available = None  # asked again (and imported) the next time Keras needs TensorFlow


def _keras_lazy_tensorflow():
    """Keras' lazy handle on TensorFlow while it has not imported it, else None (then seeding imports it)."""
    try:
        from keras.src.utils import module_utils
    except ImportError:
        return None
    lazy = getattr(module_utils, "tensorflow", None)
    if getattr(lazy, "module", True) is not None or getattr(lazy, "_available", True) is not None:
        return None
    return lazy


def enable_op_determinism() -> None:
    """Make TensorFlow ops deterministic (the TF 2.x successor of TF_DETERMINISTIC_OPS=1).

    Costs speed on GPUs (some kernels fall back to slower deterministic ones).
    """
    global _enabled
    import tensorflow as tf

    tf.config.experimental.enable_op_determinism()
    _enabled = True


def op_determinism_enabled() -> bool:
    """Whether op determinism is on in this process (it cannot be turned off again): by tpukit, or by the user's own
    `tf.config.experimental.enable_op_determinism()` (TensorFlow's flag, read only where TensorFlow is imported)."""
    import sys

    if _enabled or "tensorflow" not in sys.modules:
        return _enabled
    try:
        from tensorflow.python.framework.config import is_op_determinism_enabled
    except ImportError:  # a TensorFlow without it: what tpukit did is all that is known
        return _enabled
    return bool(is_op_determinism_enabled())


def setup(seed: int, deterministic: bool, runtime=None) -> str:
    """Apply a run's seed and determinism on `runtime` (None: Keras on TensorFlow); returns a sentence on what now
    holds.

    Where the runtime's determinism is XLA's (`Runtime.determinism_by_xla`: JAX) there is no TensorFlow op
    determinism to turn on: XLA's CPU and TPU kernels are deterministic, and on GPUs `connect()` sets XLA's
    deterministic-ops flag before JAX starts.
    """
    by_xla = bool(runtime is not None and runtime.determinism_by_xla)
    _seed_run(seed, tensorflow=not by_xla)
    if deterministic and by_xla:
        return f"seed {seed} set; XLA ops are deterministic here (GPU: set at connect): same config, same weights."
    if deterministic:
        enable_op_determinism()
        return f"seed {seed} set and op determinism on: same config, same weights."
    if by_xla:
        return (
            f"seed {seed} set; XLA's CPU and TPU kernels are deterministic anyway, GPU kernels may differ in "
            "the last bits between runs (deterministic=True sets XLA's flag at connect)."
        )
    if _enabled:
        return (
            f"seed {seed} set; op determinism stays on in this process (TensorFlow cannot turn it off): "
            "restart the runtime for the faster nondeterministic kernels."
        )
    return f"seed {seed} set; ops may be nondeterministic, so weights can differ in the last bits between runs."


def check_runtime(deterministic: bool, runtime) -> None:
    """ConfigError when a deterministic run cannot be deterministic on `runtime` (`Runtime.determinism_refusal`: JAX's
    GPU without XLA's deterministic ops, a flag XLA reads once, when JAX starts)."""
    refusal = runtime.determinism_refusal() if deterministic else None
    if refusal:
        raise ConfigError(
            f"RunConfig.deterministic: {refusal}. Received: deterministic=True.",
            field="deterministic",
            value=True,
            expected="a runtime connected with deterministic=True",
            choices=(False,),
        )


def fingerprint(model_or_weights, length: int = 16) -> str:
    """A short hash of every weight, bit for bit: equal fingerprints mean equal weights.

    Accepts a Keras model (or layer) or a list of arrays.
    """
    import numpy as np

    weights = model_or_weights.get_weights() if hasattr(model_or_weights, "get_weights") else model_or_weights
    digest = hashlib.sha256()
    for w in weights:
        a = np.ascontiguousarray(np.asarray(w))
        digest.update(str(a.dtype).encode())
        digest.update(str(a.shape).encode())
        digest.update(a.tobytes())
    return digest.hexdigest()[:length]
