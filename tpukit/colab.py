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


def plan(
    importable: Callable[[str], bool] = lambda m: importlib.util.find_spec(m) is not None,
    installed: Callable[[], Dict[str, str]] = _installed,
) -> SetupPlan:
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
    proc = run(
        _pip("install", "--dry-run", "-q", "--only-binary", "xprof", "-c", constraints, "--report", "-", "xprof"),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None, f"no xprof wheel installs here without moving an installed package ({_last_line(proc)})"
    try:
        report = json.loads(proc.stdout)
        version = next(
            item["metadata"]["version"] for item in report["install"] if item["metadata"]["name"].lower() == "xprof"
        )
    except (ValueError, KeyError, StopIteration):
        return None, "pip's report names no xprof release"
    proc = run(
        _pip("download", "-q", "--no-deps", "--only-binary", ":all:", "-d", wheels, f"xprof=={version}"),
        capture_output=True,
        text=True,
    )
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
    check = (
        f"from google.protobuf import runtime_version as r; r.ValidateProtobufRuntimeVersion("
        f"r.Domain.PUBLIC, {major}, {minor}, {patch}, {suffix!r}, 'xprof')"
    )
    proc = run([sys.executable, "-W", "ignore", "-c", check], capture_output=True, text=True)
    if proc.returncode != 0:
        return None, (
            f"xprof {version}, the newest that installs here, is generated for protobuf >= {needs}; "
            f"this runtime has protobuf {pins.get('protobuf', '(none)')}, which setup() leaves as it is"
        )
    return version, ""


def setup(
    *,
    hub: bool = False,
    run=subprocess.run,
    importable=None,
    installed=None,
    say: Callable[[str], None] = print,
    keras_loaded: Optional[Callable[[], bool]] = None,
) -> SetupPlan:
    """Install what is missing (idempotent: a second call installs nothing and asks pip nothing new); returns the
    plan it followed for the viewing tools. `hub=True` also makes KerasHub importable here (`setup_hub`).
    """
    the_plan = _viewing_tools(run=run, importable=importable, installed=installed, say=say)
    if hub:
        setup_hub(run=run, importable=importable, installed=installed, say=say, keras_loaded=keras_loaded)
    return the_plan


# keras-hub 0.22-0.31 import TensorFlow when they load, so they fail on Colab's TPU runtime (no TensorFlow there);
# 0.32.0 is the first that does not (keras-hub#2891), and it declares keras>=3.15.
HUB_WITHOUT_TENSORFLOW = "0.32.0"
KERAS_FOR_HUB = "3.15.1"


def setup_hub(
    *,
    run=subprocess.run,
    importable=None,
    installed=None,
    say: Callable[[str], None] = print,
    keras_loaded: Optional[Callable[[], bool]] = None,
) -> str:
    """Make KerasHub importable on this runtime, moving as little as it can; returns the line it said.

    Where TensorFlow is installed (Colab's CPU and GPU runtimes ship keras-hub 0.26 with tensorflow-text), the
    keras-hub there does the job: nothing moves (one is installed under pins only where none is). Without
    TensorFlow (Colab's TPU runtime), keras-hub 0.32.0 is installed with `--no-deps` (its declared tensorflow-text
    and kagglesdk pins would bring TensorFlow and move kagglesdk; it imports neither), and keras moves to 3.15.1,
    which it needs: the one package of the runtime that moves. Keras cannot be replaced under a kernel that has
    imported it: then `RestartRequired` names the one action.
    """
    from tpukit.hardware.runtime import RestartRequired

    importable = importable or (lambda m: importlib.util.find_spec(m) is not None)
    installed = installed or _installed
    keras_loaded = keras_loaded or (lambda: "keras" in sys.modules)
    before = dict(installed())
    hub, keras = before.get("keras-hub"), before.get("keras", "")
    with_tensorflow = importable("tensorflow")
    if with_tensorflow:
        if hub:
            return _said(
                say,
                f"tpukit.colab: keras-hub {hub} is here, with TensorFlow {before.get('tensorflow', '')}"
                ": nothing to install.",
            )
        with tempfile.NamedTemporaryFile("w", suffix="-constraints.txt", delete=False) as f:  # every other pinned
            f.write("".join(f"{d}=={v}\n" for d, v in sorted(before.items()) if d not in ("keras", "keras-hub")))
        commands = [("-c", f.name, "keras-hub")]
    else:
        if hub and _version(hub) >= _version(HUB_WITHOUT_TENSORFLOW):
            return _said(
                say,
                f"tpukit.colab: keras-hub {hub} (which loads without TensorFlow) and keras {keras} "
                "are here: nothing to install.",
            )
        commands = []
        if _version(keras) < _version(KERAS_FOR_HUB):
            if keras_loaded():
                raise RestartRequired(
                    f"tpukit.colab.setup(hub=True) must move keras {keras} to {KERAS_FOR_HUB} (keras-hub "
                    f"{HUB_WITHOUT_TENSORFLOW}, the first that loads without TensorFlow, needs keras>=3.15), and "
                    "this kernel has imported keras already: restart the runtime (Runtime > Restart session), then "
                    "run tpukit.colab.setup(hub=True) first, before anything imports keras."
                )
            commands.append(("--no-deps", f"keras=={KERAS_FOR_HUB}"))
        commands.append(("--no-deps", f"keras-hub=={HUB_WITHOUT_TENSORFLOW}"))
    for args in commands:
        proc = run(_pip("install", "-q", *args), capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"pip could not install {args[-1]} here: {_last_line(proc)}")
    importlib.invalidate_caches()
    return _said(
        say,
        _after_install(before, installed())
        + (
            f" (keras-hub {HUB_WITHOUT_TENSORFLOW} loads without TensorFlow and needs keras>=3.15; its TensorFlow "
            "dependencies were left out)"
            if not with_tensorflow
            else ""
        ),
    )


def _said(say: Callable[[str], None], line: str) -> str:
    say(line)
    return line


def _version(text: str) -> Tuple[int, ...]:
    """ "3.13.2" as (3, 13, 2); what is not a number counts as 0 ("" is older than any release)."""
    return tuple(int(part) if part.isdigit() else 0 for part in re.split(r"[.+-]", text or "0")[:3])


def _viewing_tools(*, run, importable, installed, say) -> SetupPlan:
    """TensorBoard and xprof where missing (the module docstring).

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
        version, why = (
            (None, _NO_XPROF[key]) if key in _NO_XPROF else _xprof_that_fits(run, f.name, the_plan.pins, wheels)
        )
        if version is None:
            unavailable[name] = _NO_XPROF[key] = why
        else:
            to_install.append(f"xprof=={version}")
            extra = ["--only-binary", "xprof", "--find-links", wheels]
    the_plan = dataclasses.replace(the_plan, unavailable=unavailable)
    if "xprof" in unavailable:
        say(
            f"tpukit.colab: TensorBoard's profile tab is unavailable on this runtime: {unavailable['xprof']} "
            "(tpukit.summarize_profile reads step times from the trace instead)."
        )
    if to_install:
        say(
            f"tpukit.colab: pip is installing {', '.join(to_install)} with the {len(the_plan.pins)} packages "
            "installed here pinned (about a minute)..."
        )
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
    moved = sorted(
        f"{name} {version} -> {now.get(name, 'removed')}" for name, version in pins.items() if now.get(name) != version
    )
    what = f"added {', '.join(added)}" if added else "added nothing new"
    if moved:
        return (
            f"tpukit.colab: {what}; MOVED {len(moved)} of the {len(pins)} packages installed before: "
            f"{'; '.join(moved)}."
        )
    return f"tpukit.colab: {what}; none of the {len(pins)} packages installed before moved."
