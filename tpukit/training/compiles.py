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

With JAX's persistent compilation cache (`compile_cache`), a compile the
cache serves still reports its event (its seconds are the read), just after
JAX's `cache_hits` event and the compile time it saved, in the same thread:
so each compile is known as served or compiled (`Watch.served`).
"""

from __future__ import annotations

import collections
import threading
from typing import Dict, Optional, Tuple

from tpukit import global_state

# jax._src.dispatch.BACKEND_COMPILE_EVENT (the same string in jax 0.7.2 and 0.10).
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
# jax._src.compiler's events for a compile the persistent cache served (the same strings in jax 0.7.2 and 0.10.2).
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
TIME_SAVED_EVENT = "/jax/compilation_cache/compile_time_saved_sec"
TRAIN_STEP = "train_step"

_lock = threading.Lock()
_counts: Dict[str, int] = collections.Counter()
_seconds: Dict[str, float] = collections.Counter()
_served: Dict[str, int] = collections.Counter()  # of _counts, those the persistent cache served
_saved: Dict[str, float] = collections.Counter()  # the compile seconds it saved them
_pending = threading.local()  # a cache hit heard in this thread, for the compile event that follows it
_listening = False
_TABLES = (_counts, _seconds, _served, _saved)


def _set_counts(value) -> None:
    with _lock:
        for table, saved in zip(_TABLES, tuple(value) + ({},) * (len(_TABLES) - len(value))):
            table.clear()
            table.update(saved)


global_state.register(
    "compiles", lambda: tuple(dict(t) for t in _TABLES), _set_counts, lambda: tuple({} for _ in _TABLES)
)


def _heard_hit(event: str, **kwargs) -> None:
    if event == CACHE_HIT_EVENT:
        _pending.saved = 0.0  # the seconds saved follow, then the compile event they belong to


def _heard(event: str, duration: float, **kwargs) -> None:
    if event == TIME_SAVED_EVENT:
        _pending.saved = max(0.0, float(duration))
        return
    if event != BACKEND_COMPILE_EVENT:
        return
    name = str(kwargs.get("fun_name", "")).split("(")[-1].rstrip(")")  # "jit(train_step)" -> "train_step"
    saved = getattr(_pending, "saved", None)
    _pending.saved = None
    with _lock:
        _counts[name] += 1
        _seconds[name] += duration
        if saved is not None:
            _served[name] += 1
            _saved[name] += saved


def listen() -> None:
    """Start counting this process's JAX compilations (once; JAX must be importable)."""
    global _listening
    with _lock:
        if _listening:
            return
        _listening = True
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_heard)
    jax.monitoring.register_event_listener(_heard_hit)


def totals(name: str = TRAIN_STEP) -> Tuple[int, float, int, float]:
    """(compilations, seconds, of them served by the persistent cache, compile seconds it saved) of functions jitted
    under `name` in this process since `listen()`."""
    with _lock:
        return _counts[name], _seconds[name], _served[name], _saved[name]


class Watch:
    """The compilations of `name` between `start()` and `stop()`: a run's own, on JAX; None elsewhere."""

    def __init__(self, on: bool, name: str = TRAIN_STEP):
        """`on`: the backend reports its compiles (`Runtime.counts_compiles`: JAX's monitoring events)."""
        self.name = name
        self.on = on
        self._start: Optional[Tuple[int, float, int, float]] = None
        self.count: Optional[int] = None
        self.seconds: Optional[float] = None
        self.served: Optional[int] = None  # of `count`, those JAX's persistent cache served
        self.saved: Optional[float] = None  # the compile seconds it saved them, as JAX recorded them

    def start(self) -> None:
        if self.on:
            listen()
            self._start = totals(self.name)

    def stop(self) -> None:
        if self._start is not None:
            now = totals(self.name)
            self.count, self.seconds, self.served, self.saved = (b - a for a, b in zip(self._start, now))

    def note(self, cache: Optional[str]) -> Optional[str]:
        """What the run's notes say of its compiles and JAX's persistent cache at `cache` (None: off), once stopped;
        None on TensorFlow, or where nothing compiled."""
        if not self.count:
            return None
        times = "once" if self.count == 1 else f"{self.count} times"
        said = f"compile: {self.name} compiled {times}, {self.seconds:.2f} s"
        if cache is None:
            return f"{said}; JAX's persistent compilation cache is off"
        if self.served == self.count:
            return (
                f"{said}: served by JAX's persistent compilation cache at {cache} (it saved "
                f"{self.saved:.2f} s of compiling)"
            )
        if self.served:
            return f"{said}: {self.served} of them served by JAX's persistent compilation cache at {cache}"
        return f"{said}: not in JAX's persistent compilation cache at {cache} yet, kept there for the next run"

    def fields(self) -> dict:
        """The `RunResult` fields this watch fills: `compiles` and `compile_s` (None until it stopped, and on
        TensorFlow)."""
        return {"compiles": self.count, "compile_s": self.seconds}
