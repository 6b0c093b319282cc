"""tpukit's modules import one way, as README's Layout draws them: import-linter's contracts in pyproject.toml.

The contracts: the layers (each imports only those below it), hardware/'s discovery paths (connect walks them;
tpu, gpu and cpu import none of each other), the engine without ipywidgets or tpukit.ui, and no import cycle
between siblings. import-linter counts every import, function-local ones included, so a local import
cannot hide an upward one. Each contract is shown to fail on a deliberate violation in a copy of the package.
A local import is left only where it defers a heavy framework import (see
test_every_module_imports_without_a_framework).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tpukit"
CONTRACTS = ("layers", "hardware-paths", "engine-without-widgets", "no-cycles")


def _modules():
    """{dotted name: path} of every module of tpukit (a package is named by its __init__.py)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _lint(root: Path, *contracts: str):
    """import-linter on the package under `root` (its pyproject.toml); (exit code, output)."""
    lint = Path(sys.executable).with_name("lint-imports")
    args = [str(lint), "--no-cache"] + [a for c in contracts for a in ("--contract", c)]
    done = subprocess.run(
        args,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)},
    )
    return done.returncode, done.stdout + done.stderr


def test_the_import_contracts_hold():
    code, output = _lint(REPO)
    assert code == 0, output[-3000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in output, output[-3000:]


# Each contract against a copy of the package with one deliberate violation: (module, code appended to it).
VIOLATIONS = {
    # a model module reaching up to training, from inside a function (import-linter sees local imports too)
    "layers": ("tpukit/models/zoo.py", "\n\ndef _upward():\n    from tpukit.training import run\n    return run\n"),
    # one discovery path reaching into another (each offers the same interface, and only connect walks them)
    "hardware-paths": (
        "tpukit/hardware/gpu.py",
        "\n\ndef _other_path():\n    from tpukit.hardware import cpu\n    return cpu\n",
    ),
    "engine-without-widgets": (
        "tpukit/training/api.py",
        "\n\ndef _widget():\n    import ipywidgets\n    return ipywidgets\n",
    ),
    # two siblings importing each other (files is below records in runs/)
    "no-cycles": (
        "tpukit/runs/directory.py",
        "\n\ndef _cycle():\n    from tpukit.runs import records\n    return records\n",
    ),
}


@pytest.mark.parametrize("contract", CONTRACTS)
def test_each_contract_fails_on_a_deliberate_violation(contract, tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "tpukit", ignore=shutil.ignore_patterns("__pycache__", "datasets"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    module, code = VIOLATIONS[contract]
    with open(tmp_path / module, "a") as f:
        f.write(code)
    status, output = _lint(tmp_path, contract)
    assert status != 0 and "BROKEN" in output, output[-3000:]
    assert Path(module).stem in output, output[-3000:]


# Modules that subclass keras.callbacks.Callback at import: they are the framework layer, imported where a run
# starts (function-local, to defer Keras), never at module level by a cheap module.
KERAS_MODULES = {"tpukit.observe.scalars", "tpukit.training.callbacks"}


def test_every_module_imports_without_a_framework():
    """Importing any engine module (not the widgets, not KERAS_MODULES) loads no TensorFlow, Keras or JAX."""
    names = sorted(
        name
        for name in _modules()
        if not name.startswith("tpukit.ui") and name not in KERAS_MODULES | {"tpukit.__main__"}
    )
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "heavy = sorted(m for m in ('tensorflow', 'keras', 'jax', 'ipywidgets', 'matplotlib') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", f"importing tpukit's engine modules loaded: {done.stdout.strip()}"


def test_no_module_imports_a_private_name_of_another():
    """A module's `_name` is its own: no tpukit module imports one from another or reads one through a module
    (`from tpukit.x import _y`, `x._y`). What another module needs is public, so its owner sees the use."""
    import ast

    found = []
    for name, path in sorted(_modules().items()):
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tpukit"):
                found += [
                    f"{name}:{node.lineno} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
                modules |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.startswith("tpukit")}
        found += [
            f"{name}:{node.lineno} reads {node.value.id}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ]
    assert not found, "\n".join(found)


def _layers():
    """The layers contract's layers, top first, each a set of module prefixes (pyproject.toml)."""
    import tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["id"] == "layers"]
    return [{part.strip() for part in layer.split("|")} for layer in layers]


def _layer_of(module: str, layers) -> "int | None":
    return next(
        (i for i, names in enumerate(layers) if any(module == n or module.startswith(n + ".") for n in names)), None
    )


def _string_imports(path: Path):
    """(line, module) of each tpukit module `path` imports by a string (`importlib.import_module("tpukit.x")`,
    `__import__`), which import-linter cannot see."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        target = node.args[0].value
        if called in ("import_module", "__import__") and isinstance(target, str) and target.startswith("tpukit"):
            yield node.lineno, target


def test_no_module_imports_a_higher_layer_by_a_string():
    """import-linter reads import statements; a string import (`importlib.import_module("tpukit.data.x")`) would go
    up unseen. None names a module of a higher layer than its own (the registry's providers register themselves)."""
    layers, found = _layers(), []
    for name, path in sorted(_modules().items()):
        own = _layer_of(name, layers)
        for line, target in _string_imports(path):
            theirs = _layer_of(target, layers)
            if own is not None and theirs is not None and theirs < own:
                found.append(f"{name}:{line} imports {target} by a string")
    assert not found, "\n".join(found)


def test_the_string_import_check_finds_one(tmp_path):
    """The check above, on a module that reaches up from the registry by a string: found."""
    module = tmp_path / "registry.py"
    module.write_text('import importlib\n\ndef up():\n    return importlib.import_module("tpukit.data.user_text")\n')
    layers = _layers()
    ((line, target),) = _string_imports(module)
    assert (line, target) == (4, "tpukit.data.user_text")
    assert _layer_of(target, layers) < _layer_of("tpukit.registry", layers)


def _tpukit_imports(path: Path):
    """The tpukit modules `path` imports (function-local imports too), as dotted names."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tpukit"):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tpukit")}
    return found


def test_tune_batch_size_runs_the_recipe_of_a_run_not_a_copy():
    """tune_batch_size builds, plans, compiles and feeds each trial through `Run.trial`, the steps train() takes:
    tuning.py reaches neither the data pipeline nor the model seam itself."""
    imports = _tpukit_imports(PACKAGE / "training" / "tuning.py")
    assert "tpukit.training.run.Run" in imports
    assert not {m for m in imports if m.endswith((".pipeline", ".modeling"))}


def test_the_panels_train_action_plans_no_run_of_its_own():
    """A run is planned once, by train(): the panel sizes its progress from what Keras reports when fit begins."""
    assert not {m for m in _tpukit_imports(PACKAGE / "ui" / "actions_train.py") if m.endswith("training.plan")}


def test_nothing_above_hardware_compares_a_kind_backend_or_worker_count_with_a_literal():
    """What differs between hardware paths is the path object's to answer (`Runtime`'s methods): above hardware/,
    no runtime's `.kind`, `.backend` or `.workers` is compared with a string or a count, and "mixed_float16" is written only in
    the module of the precision objects."""
    import re

    asks = re.compile(r"\b(runtime|rt)\.(kind|backend|workers)\s*(==|!=|>|<|>=|<=|in)\s*[\"'(\d]")
    found = []
    for name, path in sorted(_modules().items()):
        text = path.read_text()
        if not name.startswith("tpukit.hardware"):
            found += [f"{name}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if asks.search(line)]
        if name != "tpukit.precision" and '"mixed_float16"' in text:
            found.append(f'{name}: writes "mixed_float16"')
    assert not found, "\n".join(found)


def test_the_tests_mirror_the_source():
    """A unit test file is `tests/<package>/test_<module>.py` for `tpukit/<package>/<module>.py` (or its subpackage);
    the suites that test behaviour across modules (real fits, kills, notebooks, browsers) are in tests/behaviour/."""
    whole_package = {"test_layers.py", "test_packaging.py"}  # about the package as a whole: its layers, its metadata
    strays = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        rel = path.relative_to(REPO / "tests")
        if rel.parts[0] == "behaviour" or (len(rel.parts) == 1 and rel.name in whole_package):
            continue
        module = PACKAGE.joinpath(*rel.parts[:-1], rel.name[len("test_") :])
        if not (module.is_file() or module.with_suffix("").is_dir()):
            strays.append(f"tests/{rel} (no {module.relative_to(REPO)})")
    assert not strays, "\n".join(strays)
