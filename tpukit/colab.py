"""Set up a Colab TPU runtime for tpukit: install what its TPU VM image lacks, and nothing else.

Colab's TPU runtimes ship JAX, libtpu and Keras 3, but no TensorFlow or
TensorBoard. tpukit needs a CPU TensorFlow there for tf.data and summaries,
and TensorBoard with its profile plugin. `setup()` installs only what is
missing, pins what is already there (JAX, libtpu, NumPy, ...) with a pip
constraints file so the install cannot move them, and returns at once when
nothing is missing.

    import tpukit.colab; tpukit.colab.setup()
"""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
from typing import Callable, Dict, Optional, Tuple

# import name -> what pip installs when it is missing
NEEDED = {"tensorflow": "tensorflow-cpu", "tensorboard": "tensorboard", "xprof": "xprof"}
# distributions the runtime brings that an install must not change
PROTECTED = ("jax", "jaxlib", "libtpu", "libtpu-nightly", "ml-dtypes", "numpy", "keras", "protobuf")


@dataclasses.dataclass(frozen=True)
class SetupPlan:
    """What `setup()` will do: the packages to install and the versions it pins."""

    missing: Tuple[str, ...]
    pins: Dict[str, str]

    @property
    def needed(self) -> bool:
        return bool(self.missing)

    def command(self, constraints_path: str) -> Tuple[str, ...]:
        return (sys.executable, "-m", "pip", "install", "-q", "-c", constraints_path, *self.missing)


def _installed(dist: str) -> Optional[str]:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def plan(importable: Callable[[str], bool] = lambda m: importlib.util.find_spec(m) is not None,
         installed: Callable[[str], Optional[str]] = _installed) -> SetupPlan:
    """Work out what is missing and what to pin, without installing anything."""
    missing = tuple(pip for module, pip in NEEDED.items() if not importable(module))
    pins = {d: v for d in PROTECTED if (v := installed(d))}
    return SetupPlan(missing, pins)


def setup(*, run=subprocess.run, importable=None, installed=None) -> SetupPlan:
    """Install what is missing (idempotent: a second call does nothing); returns the plan it followed.

    Raises:
        RuntimeError: pip could not install without changing a pinned package.
    """
    the_plan = plan(**{k: v for k, v in (("importable", importable), ("installed", installed)) if v})
    if not the_plan.needed:
        return the_plan
    with tempfile.NamedTemporaryFile("w", suffix="-constraints.txt", delete=False) as f:
        f.write("".join(f"{d}=={v}\n" for d, v in sorted(the_plan.pins.items())))
    proc = run(list(the_plan.command(f.name)), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(
            f"pip could not install {', '.join(the_plan.missing)} while keeping "
            f"{', '.join(f'{d}=={v}' for d, v in sorted(the_plan.pins.items()))}: {tail[0]}"
        )
    importlib.invalidate_caches()
    return the_plan
