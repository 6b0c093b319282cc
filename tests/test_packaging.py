"""environment.yml (conda, local Jupyter) and pyproject.toml (pip) install the same packages."""

import re
import tomllib

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
    links = re.findall(r"colab\.research\.google\.com/github/tpukit/tpukit/blob/main/(notebooks/[\w.]+\.ipynb)",
                       (REPO / "README.md").read_text())
    notebooks = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "notebooks").glob("[0-9]*.ipynb"))
    assert sorted(links) == notebooks and notebooks
