#!/usr/bin/env python3
"""Turn Colab's `pip freeze` files (.ci/colab/freeze/) into the package sets CI installs (.ci/colab/NAME.txt).

    $(pyenv root)/versions/3.13.0/bin/python3 .ci/colab/build-sets.py --date 2026-08-19 --tpukit-closure cpu \
        .ci/colab/freeze/{tpu,cpu,gpu}-a724079.txt

(CPython 3.13, as Colab runs; about 10 minutes, nothing installed: pip's dry runs, and a few pure-Python sdists
built in a temporary folder.)

For each freeze file NAME-COMMIT.txt this writes .ci/colab/NAME.txt: every package at Colab's exact version that
pip can install here as a wheel for CPython 3.13 on manylinux x86_64, one `name==version` a line, and a header that
names the source (googlecolab/backend-info at COMMIT, of DATE) and each package left out, with why:
  - `name @ URL` lines and local versions (torch==2.11.0+cu128): Colab's own builds (torch, torch-xla,
    google-colab, ...), not on the package index;
  - Ubuntu's own copies (python-apt, dbus-python, PyGObject), which only Debian packages provide;
  - libtpu, which drives TPU chips that CI has not;
  - anything else with no such wheel on the index (pip says which: a dry run, nothing installed), unless its sdist
    builds here into a pure-Python wheel: such a pin stays, marked `# sdist`, and colab-env.sh builds it
    (promise 2.3, which tensorflow-datasets imports, has no wheel).

With --tpukit-closure NAME, it also writes .ci/colab/NAME-tpukit.txt: tpukit's dependencies and the packages it
imports (ROOTS), with everything they need, at the freeze's versions (pip resolves `.` and ROOTS under the
freeze as constraints). CI installs that smaller set where the whole one costs too much time.

To move to a newer Colab: copy the new freeze files (unchanged) into .ci/colab/freeze/, delete the old ones, and
run this again with the date of the backend-info commit.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PYTHON = "3.13"
# Colab's images are Ubuntu 22.04 (glibc 2.35): any manylinux wheel up to that glibc installs there.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
DEBIAN = {  # Ubuntu's python3-* packages that show up in the image's pip freeze
    "python-apt": "Ubuntu's python3-apt, not on the package index",
    "dbus-python": "Ubuntu's python3-dbus (no wheel on the index)",
    "pygobject": "Ubuntu's python3-gi (no wheel on the index)",
}
NOT_HERE = {  # installable, but only meaningful on Colab's hardware
    "libtpu": "drives TPU chips, which CI has not: JAX runs its CPU build (the TPU is faked in tests that say so)",
}
# What tpukit imports or its tests drive on a Colab runtime, beyond its own dependencies (pyproject.toml):
# Colab's frameworks and the notebook stack. Versions come from the freeze; names only here.
# keras-hub with what it tokenizes and exports with (the `hub` extra, and tensorflow-text, which 0.26 imports);
# the last three: the tests colab-env.sh runs there.
ROOTS = ["tensorflow", "tensorboard", "jax", "jaxlib", "keras", "keras-hub", "tensorflow-text", "sentencepiece",
         "tokenizers", "safetensors", "tensorflow-datasets", "ipykernel", "ipython", "ipywidgets", "notebook",
         "jupyter-server", "absl-py", "psutil", "protobuf", "numpy", "scipy", "pandas", "pytest", "nbclient", "nbformat"]


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_freeze(path):
    """[(line, name, version or None)] of a pip freeze file, comments dropped."""
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if " @ " in line:
            out.append((line, line.split(" @ ", 1)[0].strip(), None))
        else:
            name, version = line.split("==", 1)
            out.append((line, name, version))
    return out


def pip_dry_run(pins, report=None, extra=()):
    """pip's dry run of `pins` as CPython 3.13 manylinux x86_64 wheels; returns (returncode, stderr)."""
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "pins.txt"
        req.write_text("".join(p + "\n" for p in pins))
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed", "--no-deps",
               "--only-binary=:all:", "--target", str(Path(tmp) / "t"), "--python-version", PYTHON,
               "--implementation", "cp", "--abi", "cp313", "--abi", "abi3", "--abi", "none", "-r", str(req), *extra]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        if report:
            cmd += ["--report", str(report)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        return proc.returncode, proc.stderr


def _errors(stderr):
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("WARNING: Location"))[-3000:]


def installable(pins, chunk=40):
    """Split `pins` into (those with a wheel, {pin: why not}) by pip dry runs of a few dozen pins at a time."""
    with ThreadPoolExecutor(2) as pool:
        parts = list(pool.map(_installable, [pins[i:i + chunk] for i in range(0, len(pins), chunk)]))
    return [p for kept, _ in parts for p in kept], {k: v for _, missing in parts for k, v in missing.items()}


def _installable(pins):
    """pip stops at the first pin it cannot find: drop it, say why, and try the rest again."""
    pins, missing = list(pins), {}
    while True:
        code, err = pip_dry_run(pins)
        if code == 0:
            return pins, missing
        found = re.search(r"No matching distribution found for (\S+)", err)
        if not found or found.group(1) not in pins:
            sys.exit(f"build-sets: pip failed without naming a package:\n{_errors(err)}")
        pin = found.group(1)
        versions = re.search(r"\(from versions: ([^)]*)\)", err)
        seen = versions.group(1) if versions else "none"
        newest = ", ".join(seen.split(", ")[-3:]) if seen != "none" else "none"
        missing[pin] = f"no CPython {PYTHON} manylinux x86_64 wheel of this version (wheels of: {newest})"
        pins.remove(pin)


SDIST = "  # sdist: no wheel on the index; pure Python, built here from its source"


def builds_pure(pin):
    """Whether pip builds `pin` from its sdist here into a pure-Python wheel (promise 2.3: tensorflow-datasets needs it)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            # no compilers: a package that needs one (dlib, GDAL, rpy2) fails at once instead of building for minutes
            proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-binary", ":all:",
                                   "-w", tmp, pin], capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "CC": "false", "CXX": "false", "CARGO": "false"})
        except subprocess.TimeoutExpired:
            return False
        wheels = list(Path(tmp).glob("*.whl"))
        return proc.returncode == 0 and len(wheels) == 1 and wheels[0].name.endswith("-none-any.whl")


def header(kind, freeze, commit, date, total, kept, left_out, note):
    lines = [
        f"# Colab's {kind} runtime as it ships: googlecolab/backend-info commit {commit} ({date}),",
        f"# its pip freeze copied unchanged to .ci/colab/freeze/{freeze.name}.",
        "# Generated by .ci/colab/build-sets.py: do not edit by hand; rerun it on newer freeze files.",
        f"# source: {commit} {date}",
        note,
        f"# {kept} of the freeze's {total} packages; the {len(left_out)} left out, and why:",
    ]
    lines += [f"#   {pin}: {why}" for pin, why in left_out.items()]
    return [line for line in lines if line]


def closure(pins, freeze_pins):
    """tpukit's dependencies and ROOTS, with all they need, at the freeze's versions (pip resolves them)."""
    names = {canon(p.split("==")[0]) for p in pins}
    freeze_pins = [p.split("  #")[0] for p in freeze_pins]
    roots = [r for r in ROOTS if canon(r) in names]
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "freeze.txt"
        constraints.write_text("".join(p + "\n" for p in freeze_pins))
        report = Path(tmp) / "report.json"
        # Wheels or not: a dependency with no wheel (tensorflow-datasets' promise) is resolved, then left out below.
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
               "--report", str(report), "-c", str(constraints), str(REPO), *roots]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"build-sets: pip could not resolve tpukit within the freeze:\n{_errors(proc.stderr)}")
        got = {canon(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    got.pop("tpukit", None)
    by_name = {canon(p.split("==")[0]): p for p in pins}
    outside = sorted(f"{n}=={v}" for n, v in got.items() if n not in by_name)
    if outside:  # tpukit's own additions (not in Colab's set): installed by `pip install .` later, not here
        print(f"build-sets: tpukit adds, beyond the freeze: {', '.join(outside)}")
    return roots, sorted((by_name[n] for n in got if n in by_name), key=str.lower)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("freeze", nargs="+", type=Path, help="NAME-COMMIT.txt, as copied from googlecolab/backend-info")
    parser.add_argument("--date", required=True, help="the backend-info commit's date, YYYY-MM-DD")
    parser.add_argument("--tpukit-closure", action="append", default=[], metavar="NAME",
                        help="also write NAME-tpukit.txt, the packages tpukit needs at the freeze's versions")
    args = parser.parse_args()
    if sys.version_info[:2] != (3, 13):
        sys.exit(f"build-sets: run me with CPython 3.13 (this is {sys.version.split()[0]}), "
                 "e.g. $(pyenv root)/versions/3.13.0/bin/python3")
    kinds = {"tpu": "TPU (v5e-1, v6e-1)", "cpu": "CPU", "gpu": "GPU"}
    for freeze in args.freeze:
        name, commit = freeze.stem.rsplit("-", 1)
        entries = read_freeze(freeze)
        left_out, candidates = {}, []
        for line, pkg, version in entries:
            if version is None:
                left_out[line.split("#")[0]] = "Colab's own build from a URL, not on the package index"
            elif "+" in version:
                left_out[line] = "a local build (PyTorch's own CUDA index), not on the package index"
            elif canon(pkg) in DEBIAN:
                left_out[line] = DEBIAN[canon(pkg)]
            elif canon(pkg) in NOT_HERE:
                left_out[line] = NOT_HERE[canon(pkg)]
            else:
                candidates.append(line)
        kept, missing = installable(candidates)
        for pin in list(missing):
            if builds_pure(pin):
                kept.append(pin + SDIST)
                del missing[pin]
        kept.sort(key=lambda line: candidates.index(line.split("  #")[0]))
        left_out.update(missing)
        out = HERE / f"{name}.txt"
        text = header(kinds[name], freeze, commit, args.date, len(entries), len(kept), left_out, "")
        out.write_text("\n".join(text + kept) + "\n")
        print(f"build-sets: {out.relative_to(REPO)}: {len(kept)} of {len(entries)} packages; left out "
              f"{len(left_out)}: " + "; ".join(f"{p} ({w})" for p, w in left_out.items()))
        if name in args.tpukit_closure:
            roots, subset = closure(kept, [line for line, _, version in entries if version is not None])
            note = ("# Only what tpukit needs here: its dependencies (pyproject.toml) and what it imports or its tests "
                    f"drive ({', '.join(roots)}), with all they need, at this freeze's versions "
                    f"(pip resolved them with the freeze as constraints); {len(subset)} packages.")
            out = HERE / f"{name}-tpukit.txt"
            text = header(kinds[name], freeze, commit, args.date, len(entries), len(kept), left_out, note)
            out.write_text("\n".join(text + subset) + "\n")
            print(f"build-sets: {out.relative_to(REPO)}: {len(subset)} packages ({', '.join(roots)} and tpukit's "
                  "dependencies, with what they need)")


if __name__ == "__main__":
    main()
