"""Writing a capture: which steps to profile, the profiler of each backend, and the Keras callback that runs it.

This is the one side of profiling that touches a framework while training, so
it is kept apart from reading captures back (`xprof`), which needs neither
TensorFlow nor Keras. `check_window` is the one rule for a profile window
here. Importing this module does not import TensorFlow or Keras: the callback
class is built on first use of `ProfileCallback`.
"""

from __future__ import annotations

from tpukit.errors import TpukitWarning

import os
import warnings
from typing import Any, Dict, List, Sequence

from tpukit.config import window_problem
from tpukit.observe.profiling.xprof import find_captures

__all__ = ["ProfileCallback", "ProfilerBusyWarning", "check_window"]


class ProfilerBusyWarning(TpukitWarning, RuntimeWarning):
    """Another profiler session was running, so ProfileCallback did not profile."""


# --- which steps ---------------------------------------------------------------


def check_window(start, stop) -> None:
    """Raise ValueError unless `start`-`stop` is an inclusive window of 0-based steps (`config.window_problem`)."""
    problem = window_problem(start, stop)
    if problem:
        raise ValueError(problem)


def _check_logdir(logdir) -> None:
    path = os.fspath(logdir) if isinstance(logdir, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path:
        raise ValueError(f"Expected logdir to be a non-empty path. Received: logdir={logdir!r}")


# --- the profiler of each backend ------------------------------------------------


class _JaxProfiler:
    """jax.profiler, with JAX's step marker (what the profile plugin reads as a step)."""

    def __init__(self):
        import jax

        self.jax = jax
        self.busy = (RuntimeError,)
        self.failed = (RuntimeError, OSError)

    def start(self, logdir):
        self.jax.profiler.start_trace(logdir)

    def stop(self):
        self.jax.profiler.stop_trace()

    def step(self, n):
        return self.jax.profiler.StepTraceAnnotation("train", step_num=n)


class _TfProfiler:
    """TensorFlow's profiler, with `Trace(step_num=n)` step markers."""

    def __init__(self):
        import tensorflow as tf

        self.tf = tf
        self.busy = (tf.errors.AlreadyExistsError, RuntimeError)
        self.failed = (tf.errors.OpError,)

    def start(self, logdir):
        self.tf.profiler.experimental.start(logdir)

    def stop(self):
        self.tf.profiler.experimental.stop()

    def step(self, n):
        return self.tf.profiler.experimental.Trace("train", step_num=n, _r=1)


def _on_jax() -> bool:
    """Keras runs on JAX: capture with jax.profiler (Keras' TensorBoard callback cannot profile there)."""
    import keras

    return keras.backend.backend() == "jax"


# --- the callback ------------------------------------------------------------


class _Window:
    """What `ProfileCallback` does, framework-free: counts the steps, starts and stops the profiler around its window,
    and marks each profiled step. The callback's hooks call it; only `backend` imports a framework."""

    def __init__(self, logdir, start: int, stop: int):
        _check_logdir(logdir)
        check_window(start, stop)
        self.logdir = os.path.abspath(os.fspath(logdir))  # immune to later chdir
        self.start = start
        self.stop = stop
        self.files: List[str] = []
        self.step = 0
        self.profiling = False
        self._trace = None
        self._before: Dict[str, int] = {}
        self._warned = False
        self._backend = None

    @property
    def backend(self):
        if self._backend is None:
            self._backend = _JaxProfiler() if _on_jax() else _TfProfiler()
        return self._backend

    def batch_begin(self) -> None:
        if self.step == self.start:
            self._start_profiler()
        if self.profiling:
            self._enter_trace()

    def batch_end(self) -> bool:
        """End the step's trace and count it; whether the window is over (the callback then closes)."""
        self._exit_trace()
        over = self.profiling and self.step >= self.stop
        self.step += 1
        return over

    def close(self) -> None:
        self._exit_trace()
        if self.profiling:
            self.profiling = False
            self._stop_profiler()

    def _start_profiler(self):
        self._before = _mtimes(find_captures(self.logdir))
        try:
            self.backend.start(self.logdir)
        except self.backend.busy:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"Another profiler is already running, so steps {self.start}-{self.stop} "
                    f"are not profiled into {self.logdir}. Stop the other session "
                    "(e.g. TensorBoard(profile_batch=...)) to profile here.",
                    ProfilerBusyWarning,
                    stacklevel=3,  # the callback's on_train_batch_begin (which calls batch_begin)
                )
            return
        self.profiling = True

    def _stop_profiler(self):
        try:
            self.backend.stop()
        except self.backend.failed as e:  # e.g. the logdir is not writable
            message = f"The profile of {self.logdir} could not be saved: {getattr(e, 'message', e)}"
            warnings.warn(message, RuntimeWarning, stacklevel=4)  # at whoever called ProfileCallback.close
        after = _mtimes(find_captures(self.logdir))
        new = [p for p, t in after.items() if self._before.get(p) != t]
        self.files.extend(sorted(p for p in new if p not in self.files))

    def _enter_trace(self):
        self._trace = self.backend.step(self.step)
        self._trace.__enter__()

    def _exit_trace(self):
        trace, self._trace = self._trace, None
        if trace is not None:
            trace.__exit__(None, None, None)


def _window_attribute(name: str, doc: str) -> property:
    """A `ProfileCallback` attribute that is its `_Window`'s (read and written there)."""

    def get(callback):
        return getattr(callback._window, name)

    def set_(callback, value):
        setattr(callback._window, name, value)

    return property(get, set_, doc=doc)


def _build_callback_class():
    import keras

    class ProfileCallback(keras.callbacks.Callback):
        """Profile an inclusive window of global training steps, with step markers.

        Steps are counted from 0 across epochs: the n-th call of the train
        function in a `fit` is step n. The profiler starts before step `start`
        and stops after step `stop`, or when training ends, or on `close()`.
        Each profiled step runs inside `tf.profiler.experimental.Trace("train",
        step_num=n)`, which is what gives TensorBoard its step-time graph.

        If another profiler session is running, the callback warns once
        (`ProfilerBusyWarning`) and profiles nothing: it only ever stops the
        profiler it started.

        Args:
            logdir: Directory the capture goes to, under
                `logdir/plugins/profile/<time>/<host>.xplane.pb`.
            start: First step to profile (0-based).
            stop: Last step to profile, inclusive.

        Attributes:
            files: The `.xplane.pb` files written, filled once a capture stopped.
        """

        logdir = _window_attribute("logdir", "The capture's directory, absolute.")
        start = _window_attribute("start", "First step to profile (0-based).")
        stop = _window_attribute("stop", "Last step to profile, inclusive.")
        files = _window_attribute("files", "The `.xplane.pb` files written, filled once a capture stopped.")

        def __init__(self, logdir, start: int, stop: int):
            super().__init__()
            self._window = _Window(logdir, start, stop)

        @property
        def backend(self):
            """The profiler of the Keras backend (JAX or TensorFlow), made on first use."""
            return self._window.backend

        @property
        def profiling(self) -> bool:
            """Whether this callback's profiler session is running now."""
            return self._window.profiling

        def on_train_begin(self, logs=None):
            self._window.step = 0

        def on_train_batch_begin(self, batch, logs=None):
            self._window.batch_begin()

        def on_train_batch_end(self, batch, logs=None):
            if self._window.batch_end():
                self.close()

        def on_train_end(self, logs=None):
            self.close()

        def close(self):
            """End the open step trace and stop the profiler if this callback started it.

            Safe to call more than once, and from a `finally` after an interrupt.
            """
            self._window.close()

    ProfileCallback.__module__ = __name__
    ProfileCallback.__qualname__ = "ProfileCallback"
    return ProfileCallback


def _mtimes(paths: Sequence[str]) -> Dict[str, int]:
    out = {}
    for p in paths:
        try:
            out[p] = os.stat(p).st_mtime_ns
        except OSError:
            pass
    return out


def __getattr__(name: str) -> Any:
    # ProfileCallback subclasses keras.callbacks.Callback; build it on first use
    # so that importing this module stays free of TensorFlow.
    if name == "ProfileCallback":
        cls = _build_callback_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | {"ProfileCallback"})
