"""Which Keras backend runs the model: TensorFlow (tf.distribute) or JAX (keras.distribution).

Keras reads its backend once, when it is first imported. So the choice must be
made before that, and this module is the one place that makes it: `select()`
sets KERAS_BACKEND, or explains what to do when Keras already loaded another.

"auto" takes a KERAS_BACKEND the user set (before Python started, or in the notebook
before connecting), as every Keras 3 guide switches backends that way; a backend asked
for by name that differs from it fails in one line. Without one, "auto" picks the
backend of a Keras already loaded, else TensorFlow, unless a TPU is there that
TensorFlow cannot drive (Colab's TPU runtimes are TPU VMs with JAX and no TensorFlow
TPU support); then it picks JAX, which drives those TPUs natively. Whether such a TPU
is there is the hardware's question: the caller passes the answer in (`connect.backend_for`
in `tpukit.hardware` asks `hardware.tpu`), so this module knows nothing of the hardware.

tpukit's own writes to KERAS_BACKEND are marked (`WROTE`), in this process and the ones
it starts, so they are never taken for the user's.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Callable, Optional, Tuple

from tpukit.config import BACKENDS  # noqa: F401  (the one definition; callers read it here too)
from tpukit.errors import TpukitError


ENV = "KERAS_BACKEND"
# The value tpukit's `select` last wrote to KERAS_BACKEND. Kept in the environment, not in this module, so a process
# started from one where tpukit chose (`!python -m tpukit ...` in a notebook, a test's subprocess) inherits the mark
# with the value and does not take tpukit's choice for the user's.
WROTE = "TPUKIT_WROTE_KERAS_BACKEND"
KERAS_BACKENDS = ("tensorflow", "jax")  # the backends tpukit runs Keras on


class BackendError(TpukitError, RuntimeError):
    """Keras is already loaded with another backend, the asked-for one is not installed, or it is not the one
    KERAS_BACKEND in the environment names."""

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


def from_environment() -> Optional[str]:
    """KERAS_BACKEND as the user set it, or None: unset, empty (Keras ignores an empty one), or tpukit's own write."""
    value = os.environ.get(ENV, "")
    if not value or value == os.environ.get(WROTE):
        return None
    return value


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def choose(requested: str, tpu_needs_jax: Callable[[], Optional[str]]) -> Tuple[str, str]:
    """Resolve a requested backend to (backend, reason), without importing Keras.

    A KERAS_BACKEND the user set wins over "auto"; a backend asked for by name must agree with it.

    Args:
        requested: "auto", "tensorflow" or "jax".
        tpu_needs_jax: returns a reason when a TPU is present that TensorFlow
            cannot drive, else None (`tpukit.hardware.tpu.tpu_needs_jax`).

    Raises:
        ValueError: `requested` is not one of BACKENDS.
        BackendError: KERAS_BACKEND in the environment names a backend tpukit does not run, or another one
            than `requested` or than the Keras already loaded here.
    """
    if requested not in BACKENDS:
        raise ValueError(f"Unknown backend {requested!r}. Choices: {', '.join(BACKENDS)}.")
    current = loaded()
    env = from_environment()
    if env is not None:
        if env not in KERAS_BACKENDS:
            raise BackendError(
                f"KERAS_BACKEND={env} in the environment is not a backend tpukit runs Keras on. Choices: "
                f"{', '.join(KERAS_BACKENDS)}: set KERAS_BACKEND to one of them, or unset it to let tpukit choose."
            )
        if requested not in ("auto", env):
            raise BackendError(
                f"backend {requested!r} was asked for, but KERAS_BACKEND={env} in the environment: ask for "
                f"{env!r} or 'auto', or set KERAS_BACKEND={requested} (or unset it) and restart."
            )
        if current is not None and current != env:
            raise BackendError(
                f"Keras is already loaded with the {current} backend in this process, but KERAS_BACKEND={env} in "
                f"the environment: Keras reads it only on its first import. Restart the runtime with "
                f"KERAS_BACKEND={env} set before anything imports keras, or set KERAS_BACKEND={current}."
            )
        return env, f"KERAS_BACKEND={env} in the environment"
    if requested != "auto":
        return requested, "set by the config"
    if current in KERAS_BACKENDS:
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
    if name not in KERAS_BACKENDS:
        raise ValueError(f"Unknown backend {name!r}. Choices: {', '.join(KERAS_BACKENDS)}.")
    current = loaded()
    if current is not None and current != name:
        raise BackendError(
            f"Keras is already loaded with the {current} backend, so this process cannot switch to {name}. "
            f"Restart the runtime and connect with backend={name!r} first, or set KERAS_BACKEND={name} "
            "before anything imports keras or tensorflow (importing tensorflow imports keras)."
        )
    if not installed(name):
        hint = "pip install 'tpukit[cpu]'" if name == "tensorflow" else "pip install jax"
        if from_environment() == name:
            hint += f", or unset KERAS_BACKEND={name} (set in the environment) to let tpukit choose"
        raise BackendError(f"the {name} backend is not installed here: {hint}")
    if os.environ.get(ENV) != name:  # a user's KERAS_BACKEND that agrees stays theirs, unmarked
        os.environ[ENV] = name
        os.environ[WROTE] = name
    # TensorFlow's C++ INFO lines (CPU feature and oneDNN banners) land in a notebook as red stderr on every
    # first import; warnings and errors still show, and the user's own setting wins (the CLI goes further).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    if name == "tensorflow" and not _nvidia_gpus():
        pool_cpu_memory()
    if name == "tensorflow":
        import_tensorflow_quietly()
    return name


def import_tensorflow_quietly() -> None:
    """Import TensorFlow now, its native banners dropped (`tpukit.native_lines`): what Abseil prints before its
    logging starts ignores TF_CPP_MIN_LOG_LEVEL and would show in red in the notebook's first tpukit cell. Keras
    on TensorFlow imports it anyway, and so does KerasHub before 0.32 on any backend; an import error is left for
    that import to raise as it always has. Nothing where TensorFlow is loaded already, or TF_CPP_MIN_LOG_LEVEL=0
    asks for every line (the CLI's --verbose)."""
    from tpukit.native_lines import dropped_from_stderr

    if "tensorflow" in sys.modules or os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

    with dropped_from_stderr():
        try:
            import tensorflow  # noqa: F401
        except Exception:  # noqa: BLE001 - said by Keras' own import, with its traceback, where it matters
            pass


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
