"""The package as a whole: environment.yml (conda, local Jupyter) and pyproject.toml (pip) install the same
packages, Colab's sets fit, README's links hold, and the code keeps one format and small modules."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from conftest import REPO


def _names(requirements):
    return {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].lower(): r.replace(" ", "") for r in requirements}


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = _names(project["dependencies"] + extras["cpu"] + extras["jax"] + extras["profile"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    have = _names([p for p in pip if not p.startswith("-e")])
    assert have == wanted
    assert "-e ." in pip


def test_makefile_installs_the_cpu_extra_and_ci_calls_make_test():
    assert '".[cpu,jax,profile,test]"' in (REPO / "Makefile").read_text()
    assert "make test" in (REPO / ".ci" / "run").read_text()
    assert "make test" in (REPO / "README.md").read_text() and "make demo" in (REPO / "README.md").read_text()


def test_readme_colab_links_point_at_notebooks_on_main():
    links = re.findall(
        r"colab\.research\.google\.com/github/tpukit/tpukit/blob/main/(notebooks/[\w.]+\.ipynb)",
        (REPO / "README.md").read_text(),
    )
    notebooks = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "notebooks").glob("[0-9]*.ipynb"))
    assert sorted(links) == notebooks and notebooks


# ---- Colab's package sets (.ci/colab/): generated from Colab's own pip freeze files, which the floors must admit ----

COLAB = REPO / ".ci" / "colab"
SETS = ("tpu", "cpu", "gpu")


def _canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _freeze(name):
    """{package: version} of Colab's freeze file NAME-COMMIT.txt (the one in .ci/colab/freeze/), and its path."""
    (path,) = (COLAB / "freeze").glob(f"{name}-*.txt")
    pins = [line.split("==", 1) for line in path.read_text().splitlines() if "==" in line and line[0] != "#"]
    return {_canon(n): v for n, v in pins}, path


def _set_lines(path):
    text = path.read_text().splitlines()
    pins = [line.split("  #")[0] for line in text if line and line[0] != "#"]  # `  # sdist`: built from source
    return [line for line in text if line.startswith("#")], pins


def test_colab_sets_name_their_source_commit_and_date_and_come_from_its_freeze():
    sources = set()
    for path in sorted(COLAB.glob("*.txt")):
        name = path.stem.split("-")[0]
        freeze, freeze_path = _freeze(name)
        commit = freeze_path.stem.rsplit("-", 1)[1]
        header, pins = _set_lines(path)
        source = next(line for line in header if line.startswith("# source: "))
        assert re.fullmatch(rf"# source: {commit} \d{{4}}-\d{{2}}-\d{{2}}", source), (path.name, source)
        assert f"googlecolab/backend-info commit {commit} ({source.split()[-1]})" in header[0], path.name
        sources.add(source)
        # every pin is the freeze's own line (never typed by hand); the full sets account for every freeze line
        assert {_canon(p.split("==")[0]): p.split("==")[1] for p in pins}.items() <= freeze.items(), path.name
        if path.stem == name:
            lines = [l for l in freeze_path.read_text().splitlines() if l.strip() and not l.startswith("#")]
            left_out = [l for l in header if l.startswith("#   ")]
            assert len(pins) + len(left_out) == len(lines), path.name
    assert {p.stem for p in COLAB.glob("*.txt")} >= set(SETS)
    assert len(sources) == 1, sources  # all sets from one backend-info commit
    assert "# source: a724079 2026-08-19" in sources


def _requirements():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda = [d for d in env["dependencies"] if isinstance(d, str) and d.split("=")[0] not in ("python", "pip")]
    everything = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    return [("pyproject.toml", r) for r in everything] + [
        ("environment.yml", r) for r in pip + conda if not r.startswith("-e")
    ]


def test_floors_admit_every_version_colab_ships():
    """No requirement of pyproject.toml or environment.yml would move a package Colab ships, on any runtime."""
    from packaging.requirements import Requirement

    freezes = {name: _freeze(name)[0] for name in SETS}
    checked, refused = 0, []
    for where, line in _requirements():
        req = Requirement(line)
        for name, freeze in freezes.items():
            version = freeze.get(_canon(req.name))
            if version is not None:
                checked += 1
                if not req.specifier.contains(version, prereleases=True):
                    refused.append(f"{where}: {line} refuses Colab's {name} {req.name}=={version}")
    assert not refused, refused
    assert checked >= 30  # keras, ipywidgets, jax, tensorflow, tensorboard, psutil, ... on each runtime
    python = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    from packaging.specifiers import SpecifierSet

    assert SpecifierSet(python).contains("3.13.15")  # Colab's Python (the freeze files' README)


def test_the_code_is_formatted_by_ruff():
    """One formatter, one width (pyproject.toml's [tool.ruff]): `ruff format` changes nothing."""
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [str(ruff), "format", "--check", "tpukit", "tests", "benchmarks"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:] + "\nrun: ruff format tpukit tests benchmarks"


def test_no_module_over_500_lines_and_no_function_over_80():
    """Small, named modules: the sizes a reader holds in mind (a class defined inside a function counts whole)."""
    import ast

    big, long = [], []
    for path in sorted((REPO / "tpukit").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 500:
            big.append(f"{path.relative_to(REPO)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1}")
    assert not big and not long, "\n".join(big + long)
