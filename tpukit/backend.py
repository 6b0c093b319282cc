"""Which Keras backend runs the model: TensorFlow (tf.distribute) or JAX (keras.distribution).

Keras reads its backend once, when it is first imported. So the choice must be
made before that, and this module is the one place that makes it: `select()`
sets KERAS_BACKEND, or explains what to do when Keras already loaded another.

"auto" picks TensorFlow, unless a TPU is there that TensorFlow cannot drive
(Colab's TPU runtimes are TPU VMs with JAX and no TensorFlow TPU support);
then it picks JAX, which drives those TPUs natively. Whether such a TPU is there is
the hardware's question: the caller passes the answer in (`connect.backend_for` in
`tpukit.hardware` asks `hardware.tpu`), so this module knows nothing of the hardware.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Callable, Optional, Tuple

from tpukit.config import BACKENDS  # noqa: F401  (the one definition; callers read it here too)
from tpukit.errors import TpukitError


class BackendError(TpukitError, RuntimeError):
    """Keras is already loaded with another backend, or the asked-for one is not installed."""

    topic = "cannot connect"


def loaded() -> Optional[str]:
    """The backend of the Keras already imported in this process, or None."""
    if "keras" not in sys.modules:
        return None
    import keras

    return keras.backend.backend()


def selected() -> Optional[str]:
    """The backend this process runs or will run: Keras' loaded one, else the one `select` (or the user) set in
    KERAS_BACKEND, else None (not decided yet: `choose` decides)."""
    env = os.environ.get("KERAS_BACKEND")
    return loaded() or (env if env in ("tensorflow", "jax") else None)


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def choose(requested: str, tpu_needs_jax: Callable[[], Optional[str]]) -> Tuple[str, str]:
    """Resolve a requested backend to (backend, reason), without importing Keras.

    Args:
        requested: "auto", "tensorflow" or "jax".
        tpu_needs_jax: returns a reason when a TPU is present that TensorFlow
            cannot drive, else None (`tpukit.hardware.tpu.tpu_needs_jax`).
    """
    if requested not in BACKENDS:
        raise ValueError(f"Unknown backend {requested!r}. Choices: {', '.join(BACKENDS)}.")
    if requested != "auto":
        return requested, "set by the config"
    current = loaded()
    if current in ("tensorflow", "jax"):
        return current, f"Keras is already loaded with the {current} backend in this process"
    why = tpu_needs_jax()
    if why:
        return "jax", why
    if not installed("tensorflow") and installed("jax"):
        return "jax", "TensorFlow is not installed here (as on Colab's TPU runtime): Keras on JAX"
    return "tensorflow", "no TPU that only JAX can drive: TensorFlow with tf.distribute"


def select(name: str) -> str:
    """Make `name` the Keras backend of this process (before Keras is imported); returns it.

    Raises:
        BackendError: Keras already runs another backend here, or `name` is not installed.
    """
    if name not in ("tensorflow", "jax"):
        raise ValueError(f"Unknown backend {name!r}. Choices: tensorflow, jax.")
    current = loaded()
    if current is not None and current != name:
        raise BackendError(
            f"Keras is already loaded with the {current} backend, so this process cannot switch to {name}. "
            f"Restart the runtime and connect with backend={name!r} first, or set KERAS_BACKEND={name} "
            "before anything imports keras or tensorflow (importing tensorflow imports keras)."
        )
    if not installed(name):
        hint = "pip install 'tpukit[cpu]'" if name == "tensorflow" else "pip install jax"
        raise BackendError(f"the {name} backend is not installed here: {hint}")
    os.environ["KERAS_BACKEND"] = name
    # TensorFlow's C++ INFO lines (CPU feature and oneDNN banners) land in a notebook as red stderr on every
    # first import; warnings and errors still show, and the user's own setting wins (the CLI goes further).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if name == "tensorflow" and not _nvidia_gpus():
        pool_cpu_memory()
    return name


def pool_cpu_memory() -> None:
    """Have TensorFlow keep its CPU memory in its own pool (its BFC allocator) instead of glibc's malloc.

    A CNN step on the CPU frees and allocates the same large buffers every step. Under malloc they may come back
    as fresh pages from the kernel, as the process's malloc state falls: 8k to 1.6 million page faults an epoch
    for the zoo CNN on mnist5k here, up to 6 s of system time an epoch on 2 cores, in plain Keras' processes as in
    tpukit's. TF's pool reuses them: 2-3k faults and ~0.5 s in every process measured (docs/decisions.md, issue
    18). The pool keeps its peak until the process ends. TensorFlow reads `TF_CPU_ALLOCATOR_USE_BFC` when it
    first allocates (its first op), so this works while TensorFlow has run nothing yet, imported or not; the
    user's own setting wins (`TF_CPU_ALLOCATOR_USE_BFC=false` keeps malloc). Not set where an NVIDIA GPU is
    present: unmeasured there.
    """
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


def _nvidia_gpus() -> bool:
    """Whether the NVIDIA driver sees a GPU, read without importing TensorFlow."""
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return False
