"""The one MirroredStrategy per device set of this process: GPUs (2 or more), or simulated CPU replicas.

It holds tpukit's one use of MirroredStrategy's private `_collective_key_base` (`_group_keys_from`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Tuple

from tpukit.hardware.runtime import ConnectError

_mirrored: Dict[Tuple[str, ...], Any] = {}


def strategy(devices) -> Any:
    """The one MirroredStrategy of this process over `devices` (made on first use, then reused).

    Reusing it is not only cheaper: a second MirroredStrategy over the same devices
    starts its collective instance keys where the first did, and TensorFlow then
    matches its all-reduces with ones the first left pending (seen with a sparse
    Embedding gradient: "Shape mismatch in the collective instance 100"), which
    cancels the next run. One strategy per device set never reuses a key.

    Strategies over different device sets (replicas=8, then replicas=4) would
    still both number their all-reduce groups from 1, and TensorFlow refuses the
    second ("joining a group with size 4, but that group has size 8"). So each
    set gets its own range of group keys (`_group_keys_from`).
    """
    import tensorflow as tf

    key = tuple(devices)
    if key not in _mirrored:
        with _group_keys_from(_GROUP_KEYS_PER_STRATEGY * len(_mirrored)):
            _mirrored[key] = tf.distribute.MirroredStrategy(devices=list(key))
    return _mirrored[key]


_GROUP_KEYS_PER_STRATEGY = 10_000  # a strategy uses a few group keys (one per device group); far fewer than this


@contextlib.contextmanager
def _group_keys_from(offset: int):
    """While a MirroredStrategy is made, its all-reduce group keys start `offset` further on.

    tpukit's one use of a private TensorFlow API: the class attribute
    `MirroredStrategy._collective_key_base`, which a strategy reads once, when it is
    made. The first strategy (offset 0) needs nothing; a later device set without
    the attribute is refused in one line rather than left to fail in its first all-reduce.
    """
    if not offset:
        yield
        return
    import tensorflow as tf

    cls = tf.distribute.MirroredStrategy
    base = getattr(cls, "_collective_key_base", None)
    if base is None:
        raise ConnectError(
            f"TensorFlow {tf.__version__} no longer has MirroredStrategy._collective_key_base; tpukit needs it to give "
            "a second device set its own all-reduce group keys: restart the runtime and connect with one device set."
        )
    cls._collective_key_base = base + offset
    try:
        yield
    finally:
        cls._collective_key_base = base
