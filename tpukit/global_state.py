"""tpukit's module-level state, behind one reset (as Keras keeps its own in `keras.src.backend.common.global_state`).

A module that keeps state between calls (the last connection, the CPU probe's figures, the compile counts, the
models and datasets registered by name, the runs of this kernel) registers it here by name, with how to read it,
put it back and start it fresh. Tests and notebooks then `reset` it or hold it `fresh` for a block, instead of
reaching into a module's private names. Only modules already imported have registered: state of a module not yet
loaded is fresh anyway.

What a process cannot undo is not here: TensorFlow's op determinism, its logical devices, JAX's started backends
and the XLA flags they read. Only a restart resets those.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Dict, Iterator, Tuple


@dataclasses.dataclass(frozen=True)
class _Owner:
    save: Callable[[], Any]  # the state now, as a value
    load: Callable[[Any], None]  # put a saved value back
    empty: Callable[[], Any]  # the value of a fresh process


_owners: Dict[str, _Owner] = {}


def register(name: str, save: Callable[[], Any], load: Callable[[Any], None], empty: Callable[[], Any]) -> None:
    """Put a module's state under `name` (the module calls this when it is imported)."""
    _owners[name] = _Owner(save, load, empty)


def names() -> Tuple[str, ...]:
    """The state registered so far."""
    return tuple(sorted(_owners))


def _owned(names_: Tuple[str, ...]) -> Tuple[str, ...]:
    unknown = [n for n in names_ if n not in _owners]
    if unknown:
        raise ValueError(
            f"global_state: no state named {unknown[0]!r} is registered in this process. "
            f"Choices: {', '.join(names()) or 'none yet'}."
        )
    return names_ or names()


def reset(*names_: str) -> None:
    """Start the state of `names_` fresh (every registered one when none is named)."""
    for name in _owned(names_):
        _owners[name].load(_owners[name].empty())


@contextlib.contextmanager
def fresh(*names_: str) -> Iterator[None]:
    """The state of `names_` (all, when none) starts fresh inside the block and is put back as it was after."""
    names_ = _owned(names_)
    saved = {name: _owners[name].save() for name in names_}
    reset(*names_)
    try:
        yield
    finally:
        for name, value in saved.items():
            _owners[name].load(value)
