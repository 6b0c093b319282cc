"""How many times a run compiled its training step on JAX, and for how long.

A recompilation is a stall a learner sees (seconds on a TPU) and it hides in
an epoch's first step, so the run records the count (`RunResult.compiles`,
which should be 1) and the seconds apart from its examples/s. JAX reports
every XLA compilation through `jax.monitoring` with the jitted function's
name, and Keras 3 names its jitted training step `train_step` (checked with
jax 0.7.2 and 0.10, keras 3.13.2 and 3.15). On TensorFlow nothing is counted:
Keras' train function is a closure over its `tf.function`s, with no public
tracing count.

A listener cannot be removed through a public API, so one is added per
process, on first use, and runs keep their own totals by difference.
"""

from __future__ import annotations

import collections
import threading
from typing import Dict, Optional, Tuple

from tpukit import global_state

# jax._src.dispatch.BACKEND_COMPILE_EVENT (the same string in jax 0.7.2 and 0.10).
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TRAIN_STEP = "train_step"

_lock = threading.Lock()
_counts: Dict[str, int] = collections.Counter()
_seconds: Dict[str, float] = collections.Counter()
_listening = False


def _set_counts(value) -> None:
    with _lock:
        for table, saved in zip((_counts, _seconds), value):
            table.clear()
            table.update(saved)


global_state.register("compiles", lambda: (dict(_counts), dict(_seconds)), _set_counts, lambda: ({}, {}))


def _heard(event: str, duration: float, **kwargs) -> None:
    if event != BACKEND_COMPILE_EVENT:
        return
    name = str(kwargs.get("fun_name", "")).split("(")[-1].rstrip(")")  # "jit(train_step)" -> "train_step"
    with _lock:
        _counts[name] += 1
        _seconds[name] += duration


def listen() -> None:
    """Start counting this process's JAX compilations (once; JAX must be importable)."""
    global _listening
    with _lock:
        if _listening:
            return
        _listening = True
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_heard)


def totals(name: str = TRAIN_STEP) -> Tuple[int, float]:
    """(compilations, seconds) of functions jitted under `name` in this process since `listen()`."""
    with _lock:
        return _counts[name], _seconds[name]


class Watch:
    """The compilations of `name` between `start()` and `stop()`: a run's own, on JAX; None elsewhere."""

    def __init__(self, on: bool, name: str = TRAIN_STEP):
        """`on`: the backend reports its compiles (`Runtime.counts_compiles`: JAX's monitoring events)."""
        self.name = name
        self.on = on
        self._start: Optional[Tuple[int, float]] = None
        self.count: Optional[int] = None
        self.seconds: Optional[float] = None

    def start(self) -> None:
        if self.on:
            listen()
            self._start = totals(self.name)

    def stop(self) -> None:
        if self._start is not None:
            count, seconds = totals(self.name)
            self.count, self.seconds = count - self._start[0], seconds - self._start[1]

    def fields(self) -> dict:
        """The `RunResult` fields this watch fills: `compiles` and `compile_s` (None until it stopped, and on
        TensorFlow)."""
        return {"compiles": self.count, "compile_s": self.seconds}
