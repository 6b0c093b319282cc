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
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from typing import Callable, Dict, Optional, Tuple

# import name -> what pip installs when it is missing (viewing tools only: never a framework)
NEEDED = {"tensorboard": "tensorboard", "xprof": "xprof"}
# "# Protobuf Python Version: 6.31.1": the protobuf a generated *_pb2.py was made with (its runtime must be as new)
# the installed packages (as pinned) -> why no xprof fits them: a second setup() asks pip nothing
_NO_XPROF: Dict[tuple, str] = {}
_GENCODE = re.compile(rb"^# Protobuf Python Version: (\d+)\.(\d+)\.(\d+)(\S*)", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class SetupPlan:
    """What `setup()` will do: the packages to install and the versions it pins.

    `unavailable`: pip name -> why it was left out (no release installs here without breaking or moving
    something); filled in by `setup()`.
    """

    missing: Tuple[str, ...]
    pins: Dict[str, str]
    unavailable: Dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def needed(self) -> bool:
        return bool(self.missing)

    def __repr__(self) -> str:
        """One short line: a notebook shows a cell's last value, and `pins` holds every installed package."""
        if not self.missing:
            return "SetupPlan(nothing missing)"
        left = f"; left out: {', '.join(self.unavailable)}" if self.unavailable else ""
        return f"SetupPlan(missing: {', '.join(self.missing)}; {len(self.pins)} installed packages pinned{left})"

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


def plan(importable: Callable[[str], bool] = lambda m: importlib.util.find_spec(m) is not None,
         installed: Callable[[], Dict[str, str]] = _installed) -> SetupPlan:
    """Work out what is missing and what to pin (everything installed), without installing anything."""
    pins = dict(installed())
    missing = tuple(pip for module, pip in NEEDED.items() if not importable(module))
    return SetupPlan(missing, pins if missing else {})


def _pip(*args: str) -> list:
    return [sys.executable, "-m", "pip", *args]


def _last_line(proc) -> str:
    return ((proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["(no output)"])[0]


def _xprof_that_fits(run, constraints: str, pins: Dict[str, str], wheels: str) -> Tuple[Optional[str], str]:
    """(version, "") of the xprof wheel pip picks under the pins whose protobuf code imports on the protobuf
    installed here (downloaded into `wheels`), or (None, why not).

    pip cannot tell: every xprof release declares `protobuf>=3.19.6`, while its generated code checks at import
    that the protobuf runtime is at least as new as the protoc that made it. So the wheel pip picks is opened,
    its `*_pb2.py` read for that version, and protobuf's own check run against the protobuf installed here.
    Only wheels: an sdist build of xprof has no converter.
    """
    proc = run(_pip("install", "--dry-run", "-q", "--only-binary", "xprof", "-c", constraints, "--report", "-",
                    "xprof"), capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"no xprof wheel installs here without moving an installed package ({_last_line(proc)})"
    try:
        report = json.loads(proc.stdout)
        version = next(item["metadata"]["version"] for item in report["install"]
                       if item["metadata"]["name"].lower() == "xprof")
    except (ValueError, KeyError, StopIteration):
        return None, "pip's report names no xprof release"
    proc = run(_pip("download", "-q", "--no-deps", "--only-binary", ":all:", "-d", wheels, f"xprof=={version}"),
               capture_output=True, text=True)
    found = [name for name in os.listdir(wheels) if name.startswith(f"xprof-{version}-") and name.endswith(".whl")]
    if proc.returncode != 0 or not found:
        return None, f"xprof {version}'s wheel could not be downloaded ({_last_line(proc)})"
    gencode = None
    with zipfile.ZipFile(os.path.join(wheels, found[0])) as wheel:
        for name in wheel.namelist():
            if name.endswith("_pb2.py"):
                gencode = _GENCODE.search(wheel.read(name))
                if gencode:
                    break
    if gencode is None:
        return version, ""
    major, minor, patch = (int(gencode.group(i)) for i in (1, 2, 3))
    suffix = gencode.group(4).decode()
    needs = f"{major}.{minor}.{patch}"
    # protobuf's own rule (runtime_version.ValidateProtobufRuntimeVersion), run by the protobuf installed here
    check = (f"from google.protobuf import runtime_version as r; r.ValidateProtobufRuntimeVersion("
             f"r.Domain.PUBLIC, {major}, {minor}, {patch}, {suffix!r}, 'xprof')")
    proc = run([sys.executable, "-W", "ignore", "-c", check], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, (f"xprof {version}, the newest that installs here, is generated for protobuf >= {needs}; "
                      f"this runtime has protobuf {pins.get('protobuf', '(none)')}, which setup() leaves as it is")
    return version, ""


def setup(*, run=subprocess.run, importable=None, installed=None, say: Callable[[str], None] = print) -> SetupPlan:
    """Install what is missing (idempotent: a second call installs nothing and asks pip nothing new); returns the plan it followed.

    xprof is installed only where a release imports on the protobuf installed here (see `_xprof_that_fits`);
    where none does, the rest is installed, `say` gets one line on why TensorBoard's profile tab is unavailable,
    and `plan.unavailable["xprof"]` holds the reason (`tpukit.summarize_profile` then reads the trace alone).

    Raises:
        RuntimeError: pip could not install without changing a pinned package.
    """
    the_plan = plan(**{k: v for k, v in (("importable", importable), ("installed", installed)) if v})
    if not the_plan.needed:
        return the_plan
    with tempfile.NamedTemporaryFile("w", suffix="-constraints.txt", delete=False) as f:
        f.write("".join(f"{d}=={v}\n" for d, v in sorted(the_plan.pins.items())))
    wheels = tempfile.mkdtemp(prefix="tpukit-xprof-")
    to_install, extra, unavailable = [], [], {}
    for name in the_plan.missing:
        if name != "xprof":
            to_install.append(name)
            continue
        key = tuple(sorted(the_plan.pins.items()))
        version, why = (None, _NO_XPROF[key]) if key in _NO_XPROF else _xprof_that_fits(run, f.name, the_plan.pins,
                                                                                          wheels)
        if version is None:
            unavailable[name] = _NO_XPROF[key] = why
        else:
            to_install.append(f"xprof=={version}")
            extra = ["--only-binary", "xprof", "--find-links", wheels]
    the_plan = dataclasses.replace(the_plan, unavailable=unavailable)
    if "xprof" in unavailable:
        say(f"tpukit.colab: TensorBoard's profile tab is unavailable on this runtime: {unavailable['xprof']} "
            "(tpukit.summarize_profile reads step times from the trace instead).")
    if to_install:
        say(f"tpukit.colab: pip is installing {', '.join(to_install)} with the {len(the_plan.pins)} packages "
            "installed here pinned (about a minute)...")
        proc = run(_pip("install", "-q", "-c", f.name, *extra, *to_install), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(
                f"pip could not install {', '.join(to_install)} without changing any of the "
                f"{len(the_plan.pins)} packages installed here: {_last_line(proc)}"
            )
        importlib.invalidate_caches()
        say(_after_install(the_plan.pins, (installed or _installed)()))
    return the_plan


def _after_install(pins: Dict[str, str], now: Dict[str, str]) -> str:
    """One line: what pip added, and that none of the packages installed before moved (or which did)."""
    added = sorted(f"{name} {version}" for name, version in now.items() if name not in pins)
    moved = sorted(f"{name} {version} -> {now.get(name, 'removed')}" for name, version in pins.items()
                   if now.get(name) != version)
    what = f"added {', '.join(added)}" if added else "added nothing new"
    if moved:
        return (f"tpukit.colab: {what}; MOVED {len(moved)} of the {len(pins)} packages installed before: "
                f"{'; '.join(moved)}.")
    return f"tpukit.colab: {what}; none of the {len(pins)} packages installed before moved."
