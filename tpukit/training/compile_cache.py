"""JAX's persistent compilation cache, on for every JAX run: a program compiled once is read back, not compiled again.

XLA's compile of a training step takes seconds to minutes on a TPU and comes back after every runtime restart, the
same program each time (keras-io#2407: it "dominates everything"). JAX can keep each compiled executable on disk and
read it back in a later process (`jax_compilation_cache_dir`); it is off unless a directory is set, and by default
keeps only programs that took a second to compile. A run sets it for its own compiles, with no threshold, so a small
model's step is served too, and puts JAX's settings back after: the user's own JAX code sees them as it set them.

Where (`RunConfig.compilation_cache`): "auto" is the directory the user gave JAX already (`JAX_COMPILATION_CACHE_DIR`,
JAX's own variable, or `jax.config`), else `<logdir>/.jax-cache`: the cache sits with the runs it served, so a logdir kept on Google Drive keeps
it across Colab's runtime restarts with no second setting, and a test's temporary logdir keeps its own (no writes to
the home directory). A path puts it there; None or "off" turns it off. Only JAX runs use it; TensorFlow has no such
cache. The run's notes say whether the cache served the step (`compiles.Watch`).

JAX trusts its cache: whoever can write the directory can run code in the process (JAX's `set_cache_dir` docs), so
keep it in a directory only you write.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Optional

AUTO = "auto"
OFF = "off"
FOLDER = ".jax-cache"  # under the logdir, for "auto"
ENVIRONMENT = "JAX_COMPILATION_CACHE_DIR"  # JAX's own variable: where the user set it, "auto" takes it
# JAX's settings a run sets (names checked in jax 0.7.2, Colab's, and 0.10.2): the directory, and no thresholds.
SETTINGS = {"jax_persistent_cache_min_compile_time_secs": 0.0, "jax_persistent_cache_min_entry_size_bytes": -1}
DIRECTORY = "jax_compilation_cache_dir"


def directory_for(setting: Optional[str], logdir: str, configured: Optional[str] = None) -> Optional[str]:
    """The cache directory a run of `setting` (`RunConfig.compilation_cache`) in `logdir` uses, or None (off);
    `configured` is the directory JAX is set to already (`jax_configured()`), which "auto" keeps."""
    if setting is None or setting == OFF:
        return None
    if setting == AUTO:
        return configured or os.environ.get(ENVIRONMENT) or os.path.join(logdir, FOLDER)
    return os.path.expanduser(setting)


def jax_configured() -> Optional[str]:
    """The directory the user set JAX's cache to (`jax.config` or JAX_COMPILATION_CACHE_DIR), or None."""
    import jax

    return getattr(jax.config, DIRECTORY) or None


@contextlib.contextmanager
def used(directory: Optional[str]) -> Iterator[None]:
    """JAX compiles into and reads from `directory` inside the block (None: nothing changes); JAX's settings are put
    back after, and its cache reopened where the directory changed (JAX opens its cache once, at the first compile)."""
    if directory is None:
        yield
        return
    import jax

    wanted = {DIRECTORY: os.path.abspath(directory), **SETTINGS}
    before = {name: getattr(jax.config, name) for name in wanted}
    _apply(wanted, before)
    try:
        yield
    finally:
        _apply(before, wanted)


def _apply(values: dict, current: dict) -> None:
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    for name, value in values.items():
        if current[name] != value:
            jax.config.update(name, value)
    if values[DIRECTORY] != current[DIRECTORY]:
        compilation_cache.reset_cache()  # the next compile opens the cache at the directory now set
