"""Add the viewing tools a Colab runtime lacks (TensorBoard and its profile tab), and change nothing it has.

tpukit trains without them: on Colab's TPU runtime (JAX, Keras 3, no
TensorFlow, no TensorBoard) it feeds data with NumPy, writes TensorBoard
scalars with tensorboardX (a dependency that fits Colab's protobuf) and
captures profiles with jax.profiler. To *look* at runs, TensorBoard and xprof (its profile tab, and
`tpukit.summarize_profile`) are needed. `setup()` installs only those that are
missing, under a pip constraints file that pins every package already
installed, so pip picks releases that fit the runtime or fails without
changing anything. It never installs TensorFlow: a second framework would
fight JAX for the TPU. It returns at once when nothing is missing.

    import tpukit.colab; tpukit.colab.setup()
"""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Tuple

# import name -> what pip installs when it is missing (viewing tools only: never a framework)
NEEDED = {"tensorboard": "tensorboard", "xprof": "xprof"}


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


def _installed() -> Dict[str, str]:
    """Every distribution installed here, name -> version."""
    from importlib.metadata import distributions

    found = {}
    for dist in distributions():
        name = (dist.metadata["Name"] or "").strip()
        if name and dist.version:
            found.setdefault(name.lower().replace("_", "-"), dist.version)
    return found


def _requirement(pip_name: str, pins: Dict[str, str]) -> str:
    """What to ask pip for: xprof releases from 2.20.6 on are generated for protobuf 6 and fail to import on 5."""
    protobuf = pins.get("protobuf", "")
    if pip_name == "xprof" and protobuf.split(".")[0].isdigit() and int(protobuf.split(".")[0]) < 6:
        return "xprof<2.20.6"
    return pip_name


def plan(importable: Callable[[str], bool] = lambda m: importlib.util.find_spec(m) is not None,
         installed: Callable[[], Dict[str, str]] = _installed) -> SetupPlan:
    """Work out what is missing and what to pin (everything installed), without installing anything."""
    pins = dict(installed())
    missing = tuple(_requirement(pip, pins) for module, pip in NEEDED.items() if not importable(module))
    return SetupPlan(missing, pins if missing else {})


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
            f"pip could not install {', '.join(the_plan.missing)} without changing any of the "
            f"{len(the_plan.pins)} packages installed here: {tail[0]}"
        )
    importlib.invalidate_caches()
    return the_plan
