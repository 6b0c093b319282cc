"""tpukit's modules import one way: no import cycle, and the engine never imports the widgets.

The graph counts every `import` of a tpukit module, function-local ones included, so a local import cannot hide a
cycle: one is left only where it defers a heavy framework import (a tpukit module that pulls in TensorFlow, Keras
or JAX is never imported at module level by a cheap one; see test_every_module_imports_without_a_framework).
"""

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tpukit"


def _modules():
    """{dotted name: path} of every module of tpukit (a package is named by its __init__.py)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imported(module, path, modules):
    """The tpukit modules `module` imports anywhere in its source, as dotted names."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:  # tpukit.a.b.attr -> tpukit.a.b
                name = name.rpartition(".")[0]
            if name.startswith("tpukit") and name != module:
                targets.add(name)
    return targets


def _graph():
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycles(graph):
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle():
    graph = _graph()
    cycles = _cycles(graph)
    detail = "; ".join(" <-> ".join(sorted(c)) + " (" + ", ".join(
        f"{a}->{b}" for a in c for b in sorted(graph[a]) if b in c) + ")" for c in cycles)
    assert not cycles, f"import cycles: {detail}"


def test_the_engine_never_imports_the_widgets():
    offenders = {name: sorted(t for t in targets if t == "tpukit.ui" or t.startswith("tpukit.ui."))
                 for name, targets in _graph().items() if not name.startswith("tpukit.ui") and name != "tpukit"}
    offenders = {name: targets for name, targets in offenders.items() if targets}
    assert not offenders, f"engine modules that import tpukit.ui: {offenders}"


def test_the_cycle_check_sees_a_cycle_through_a_local_import():
    """The check itself: a cycle closed by a function-local import is found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    modules = {"tpukit.x": None, "tpukit.y": None}
    source = "import os\n\ndef f():\n    from tpukit import y\n    return y\n"
    path = REPO / "tests" / "_layers_probe_x.py"
    try:
        path.write_text(source)
        assert _imported("tpukit.x", path, modules) == {"tpukit.y"}
    finally:
        path.unlink()


# Modules that subclass keras.callbacks.Callback at import: they are the framework layer, imported where a run
# starts (function-local, to defer Keras), never at module level by a cheap module.
KERAS_MODULES = {"tpukit.observe.scalars", "tpukit.training.callbacks"}


def test_every_module_imports_without_a_framework():
    """Importing any engine module (not the widgets, not KERAS_MODULES) loads no TensorFlow, Keras or JAX."""
    names = sorted(name for name in _modules()
                   if not name.startswith("tpukit.ui") and name not in KERAS_MODULES | {"tpukit.__main__"})
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "heavy = sorted(m for m in ('tensorflow', 'keras', 'jax', 'ipywidgets', 'matplotlib') if m in sys.modules)\n"
            "print(','.join(heavy))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", f"importing tpukit's engine modules loaded: {done.stdout.strip()}"
