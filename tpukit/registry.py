"""Names for models and datasets: the built-in zoo, the user's registered ones, and import paths.

A RunConfig names what it trains with a string, so config.json can rebuild a
run in another process and the panel can offer a dropdown. A name is one of:

- a built-in or registered name (`register_model("tiny", build_tiny)`);
- an import path `package.module:function`, as uvicorn and gunicorn take it;
- a label for an object handed straight to `train(model=..., data=...)`,
  such as `__main__:build_model`. Such a run resumes when the same object is
  handed to `resume()` again.

Importing this module is cheap: nothing here loads Keras or TensorFlow.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import re
from typing import Callable, Dict, Optional, Tuple

from tpukit import global_state
from tpukit.config import RunConfig
from tpukit.errors import TpukitError, one_line

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class RegistryError(TpukitError, ValueError):
    """A name that is neither registered nor importable. The message is one line."""

    bad_input = True


@dataclasses.dataclass(frozen=True)
class Entry:
    """A registered factory (models) or loader (datasets)."""

    name: str
    target: Callable
    description: str
    builtin: bool = False


_MODELS: Dict[str, Entry] = {}
_DATASETS: Dict[str, Entry] = {}
_TABLES = {"model": _MODELS, "dataset": _DATASETS}


def register_model(name: str, factory: Callable, *, description: str = "") -> None:
    """Make `factory` trainable by name: `RunConfig(model=name)`, the panel's dropdown, the CLI.

    `factory` returns a `keras.Model`; it takes no argument, or one `DataSpec`
    (what the data says: input shape and dtype, classes, target shape).

    >>> tpukit.register_model("tiny", lambda spec: keras.Sequential([...]))
    """
    _register("model", name, factory, description)


def register_dataset(name: str, loader: Callable, *, description: str = "") -> None:
    """Make `loader` trainable by name: `RunConfig(dataset=name)`, the panel's dropdown, the CLI.

    `loader` takes no argument and returns what `train(data=...)` takes:
    arrays `(x, y)`, a dict of named inputs with `y`, a tf.data.Dataset, or
    a `tpukit.data.sources.Splits` with validation and test data.
    """
    _register("dataset", name, loader, description)


def _register(kind: str, name, target, description, builtin: bool = False) -> None:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_][\w.\-]*", name or ""):
        raise RegistryError(
            f"register_{kind}: expected a name of letters, digits, '_', '-' and '.'. Received: name={name!r}."
        )
    if not callable(target):
        what = "factory" if kind == "model" else "loader"
        raise RegistryError(f"register_{kind}: expected a callable {what}. Received: {what}={target!r}.")
    existing = _TABLES[kind].get(name)
    if existing is not None and existing.builtin:
        raise RegistryError(
            f"register_{kind}: {name!r} is a built-in {kind} name; choose another. Received: name={name!r}."
        )
    _TABLES[kind][name] = Entry(name, target, description or _doc_line(target), builtin)


def unregister(kind: str, name: str) -> None:
    """Forget a registered (not built-in) name; for tests and notebooks that re-register."""
    entry = _TABLES[kind].get(name)
    if entry is not None and not entry.builtin:
        del _TABLES[kind][name]


def names(kind: str) -> Tuple[str, ...]:
    """Built-in names first, then registered ones in the order they came."""
    _load_builtins()
    table = _TABLES[kind]
    return tuple(n for n, e in table.items() if e.builtin) + tuple(n for n, e in table.items() if not e.builtin)


def offered(kind: str) -> Tuple[str, ...]:
    """The names a chooser offers for `kind`: `names`, then what each name provider lists (KerasHub's presets:
    `add_name_provider`'s `listing`); a provider's listing that fails offers nothing."""
    found = list(names(kind))
    for listing in _LISTINGS[kind]:
        try:
            found += [n for n in listing() if n not in found]
        except Exception:  # noqa: BLE001 - an offer, never an error: a name typed still goes to `entry`
            continue
    return tuple(found)


def describe(kind: str, name: str) -> str:
    """One line on what `name` is (registered entries, import paths and labels alike)."""
    entry = lookup(kind, name)
    if entry is not None:
        return entry.description
    if is_import_path(name):
        return f"imported from {name}"
    target = provided(kind, name)
    return target.description if target is not None else f"handed to train() as {name}"


def provided(kind: str, name: str):
    """What a name provider (`add_name_provider`) makes of `name`, such as a pretrained model's `Preset`, or None
    (also where a provider refuses the name: `entry` says why); nothing registered, built in or imported is asked."""
    try:
        return _provided(kind, name)
    except RegistryError:
        return None


def _provided(kind: str, name: str):
    """`provided`, with a provider's RegistryError for a name it recognises as meant for it (a preset directory
    that is not one, a misspelled preset name) let through."""
    if not isinstance(name, str) or lookup(kind, name) is not None or is_import_path(name):
        return None
    for named, _ in _NAME_PROVIDERS[kind]:
        target = named(name)
        if target is not None:
            return target
    return None


def is_import_path(name) -> bool:
    return isinstance(name, str) and bool(_IMPORT_PATH.match(name)) and not name.startswith("__main__:")


def entry(kind: str, name: str) -> Entry:
    """The factory or loader behind `name`: registered, built in, or imported from `module:attr`.

    Raises:
        RegistryError: unknown name, or an import path that fails (one line: what failed and why).
    """
    _load_builtins()
    found = _TABLES[kind].get(name)
    if found is not None:
        return found
    if is_import_path(name):
        return Entry(name, _import(kind, name), f"imported from {name}")
    target = _provided(kind, name)
    if target is not None:
        return Entry(name, target, target.description)
    choices = ", ".join(names(kind))
    hint = (
        f"register it with tpukit.register_{kind}({name!r}, ...), pass it as {kind}= to train(), "
        f"or give an import path 'package.module:function'"
    )
    for _, also in _NAME_PROVIDERS[kind]:
        hint += f", {also}"
    if name.startswith("__main__:") or name.startswith("<"):
        hint = f"it came from a notebook or script, so pass the same object again as {kind}= to train() or resume()"
    close = difflib.get_close_matches(name, names(kind), n=1, cutoff=0.75)
    if close:
        hint = f"did you mean {close[0]!r}? Else {hint}"
    raise RegistryError(f"unknown {kind} {name!r}: {hint}. Known {kind}s: {choices}. Received: {kind}={name!r}.")


def _import(kind: str, path: str) -> Callable:
    module_name, _, attr = path.partition(":")
    try:
        target = importlib.import_module(module_name)
    except Exception as e:  # ImportError, or whatever the module raises at import
        raise RegistryError(f"{kind} {path!r}: importing {module_name!r} failed: {one_line(e)}") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise RegistryError(f"{kind} {path!r}: module {module_name!r} has no attribute {attr!r}.") from None
    if not callable(target):
        raise RegistryError(f"{kind} {path!r}: expected a callable, found {type(target).__name__}.")
    return target


def label(obj) -> str:
    """The name a config records for an object handed to train(): its import path when it has one.

    A function or class defined at module level gets `module:qualname`, which
    `entry` can import in another process; anything else gets a label that
    says where it came from (`__main__:build`, `<MyModel instance>`, `<arrays>`).
    """
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if (inspect.isfunction(obj) or inspect.isclass(obj)) and module and qualname:
        if "<" not in qualname:
            return f"{module}:{qualname}"
        return "<" + qualname.replace("<locals>.", "").replace("<", "").replace(">", "") + ">"
    return f"<{type(obj).__name__}>"


def takes_argument(fn: Callable) -> bool:
    """Whether `fn` takes one positional argument (the DataSpec) rather than none."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    required = [p for p in positional if p.default is p.empty and p.kind != p.VAR_POSITIONAL]
    return bool(required) or (bool(positional) and positional[0].kind == positional[0].VAR_POSITIONAL)


def _doc_line(target) -> str:
    doc = inspect.getdoc(target) or ""
    return doc.strip().splitlines()[0] if doc.strip() else label(target)


_builtins_loaded = False


def _set_tables(value) -> None:
    global _builtins_loaded
    for table, saved in zip((_MODELS, _DATASETS), value[:2]):
        table.clear()
        table.update(saved)
    _builtins_loaded = value[2]


global_state.register(
    "registry", lambda: (dict(_MODELS), dict(_DATASETS), _builtins_loaded), _set_tables, lambda: ({}, {}, False)
)


# The modules above the registry (it is the bottom layer, beside config) register what they provide when they are
# imported (`tpukit` imports `tpukit.models` and `tpukit.data`, whose packages import them), so the registry never
# imports upward: their built-in names (`add_builtins`: a function giving (name, target, description) of each,
# asked on the first lookup), names no table holds (`add_name_provider`: a pretrained model's preset directory,
# URL or KerasHub name; a JSONL path), and what an object handed to train() is labelled (`add_labeller`).
_BUILTIN_ENTRIES = {"model": [], "dataset": []}
_NAME_PROVIDERS = {"model": [], "dataset": []}
_LISTINGS = {"model": [], "dataset": []}
_LABELLERS = {"model": [], "dataset": []}


def add_builtins(kind: str, entries: Callable) -> None:
    """Register `entries()` as a source of built-in names of `kind` (asked once, on the first lookup)."""
    if entries not in _BUILTIN_ENTRIES[kind]:
        _BUILTIN_ENTRIES[kind].append(entries)


def add_name_provider(kind: str, named: Callable, hint: str, listing: Optional[Callable] = None) -> None:
    """Ask `named(name)` about a name of `kind` no table holds: it gives the target (with a `description`) or None;
    `hint` says, in an unknown name's error, what else it takes; `listing()`, the names it knows to offer
    (`offered`), quickly and without importing a framework."""
    if all(named is not known for known, _ in _NAME_PROVIDERS[kind]):
        _NAME_PROVIDERS[kind].append((named, hint))
        if listing is not None:
            _LISTINGS[kind].append(listing)


def add_labeller(kind: str, labeller: Callable) -> None:
    """Ask `labeller(obj)` for the name a config records for an object of `kind` handed to train() (None: not
    its kind)."""
    if labeller not in _LABELLERS[kind]:
        _LABELLERS[kind].append(labeller)


def _load_builtins() -> None:
    """Register the zoo's models and the bundled datasets, on the first lookup (they import nothing heavy)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    for kind, providers in _BUILTIN_ENTRIES.items():
        for entries in providers:
            for name, target, description in entries():
                _register(kind, name, target, description, builtin=True)


def lookup(kind: str, name: str) -> Optional[Entry]:
    """The registered or built-in entry for `name`, or None (no import attempted)."""
    _load_builtins()
    return _TABLES[kind].get(name)


def check_names(config: RunConfig, model=None, data=None) -> None:
    """Resolve the config's model and dataset names (unless objects stand in for them); RegistryError if unknown."""
    if model is None:
        entry("model", config.model)
    if data is None and not config.dataset.startswith("tfds:"):
        entry("dataset", config.dataset)


def with_labels(config, model, data):
    """(config, model, data): names for objects handed to train() go into the config; a name given as
    `model=` or `data=` becomes the config's name, and the object slot empties."""
    changes = {}
    if isinstance(model, str):
        changes["model"], model = model, None
    elif model is not None:
        changes["model"] = label(model)
    if isinstance(data, str):
        changes["dataset"], data = data, None
    elif data is not None and _labelled("dataset", data):
        changes["dataset"] = _labelled("dataset", data)
    elif isinstance(data, (tuple, list)):
        changes["dataset"] = "<arrays>"
    elif data is not None:
        changes["dataset"] = label(data)
    if changes:
        config = config.replace(**changes)
    return config, model, data


def _labelled(kind: str, obj) -> Optional[str]:
    """The label a registered labeller gives `obj`, or None."""
    return next((name for name in (labeller(obj) for labeller in _LABELLERS[kind]) if name), None)
