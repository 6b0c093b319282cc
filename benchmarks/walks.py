"""How straight the user's settings walk through tpukit's layers: for train(), the CLI's train, resume(), the panel's
train action and tune_batch_size().

Why: a call path that goes down a layer, comes back up and goes down again (the CLI checking names, connecting and
planning, and then `train` doing all three again) is code a maintainer must read twice and keep in step. This
counts it, the same way every time, instead of by reading.

The walk follows one argument: the first one (after self) of the face's entry, the function the face hands the
user's settings to (`ENTRIES`: the CLI's `_train(args)`, `resume(run_dir)`, the panel's `_train_work(config)`,
`tune_batch_size(config)`, `train(config)`). It is the sequence of calls, in the order they are made, into tpukit
functions handed that value (the object itself, or for a path any str or PathLike naming it). Consecutive calls in
one module are one stay. Counted:
    stays    the walk's stays;
    modules  the distinct modules it stays in;
    climbs   steps from a module to one in a higher layer (pyproject's import-linter layers, top first): the
             walk came back up to go down again;
    returns  steps into a module the walk had already left.
A straight walk goes down once: stays == modules, no climbs, no returns. A face that builds what it needs once
(the CLI its RunConfig, resume its decision) and hands that down walks its own argument straight; a layer below
that asks back for the argument, or re-checks it, shows as a climb or a return.

    python benchmarks/walks.py              # all five, a tiny run each (digits, mlp, one epoch)
    python benchmarks/walks.py --show cli   # and the CLI's walk, stay by stay
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def layers() -> list:
    """The import-linter layers, top first, each a tuple of module prefixes."""
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    declared = next(c for c in contracts if c["id"] == "layers")["layers"]
    return [tuple(name.strip() for name in layer.split("|")) for layer in declared]


def layer_of(module: str, order: list) -> int:
    """The index of `module`'s layer (0: the top); modules above every layer (tpukit, tpukit.colab) are -1."""
    for i, names in enumerate(order):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return -1


# Never handed the settings: the CLI's option table, and its native-log filter, whose thread swaps file descriptors
# (reading a frame's locals there crashed an older CLI).
_UNFOLLOWED = ("tpukit.cli.options", "tpukit.cli.nativelog", "tpukit.native_lines")


class Walk:
    """Records the modules of the calls handed the followed value, while active (every thread).

    The followed value is the first argument (after self) of the walk's entry, the function a face hands the
    user's settings to (`ENTRIES`), taken when the entry is called: that one object, by identity, or, for a path,
    any str or PathLike naming it. A value made from it (the CLI's RunConfig built from its arguments) is not
    followed: a face that builds what it needs once and hands it down shows as one straight walk."""

    def __init__(self, entry: tuple, threads: bool = True):
        self.entry, self.threads = entry, threads
        self.value, self.following, self.stopped, self.modules = None, False, False, []

    def _is_followed(self, value) -> bool:
        if value is self.value:
            return True
        if isinstance(self.value, (str, os.PathLike)) and isinstance(value, (str, os.PathLike)):
            return os.fspath(value) == os.fspath(self.value)
        return False

    def _profile(self, frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("tpukit") or module.startswith(_UNFOLLOWED):
            return
        code = frame.f_code
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        names = [n for n in names if n not in ("self", "cls")]
        if not self.following:
            if (module, code.co_name) == self.entry and names:
                self.value, self.following = frame.f_locals.get(names[0]), True
                self.modules.append(module)
            return
        if self.stopped or not any(self._is_followed(frame.f_locals.get(n)) for n in names):
            return
        self.modules.append(module)
        if (module, code.co_name) in ENGINE and (module, code.co_name) != self.entry:
            self.stopped = True  # handed to the engine, whose own walk is its own row

    def __enter__(self):
        if self.threads:
            threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        threading.setprofile(None)

    def counts(self, order: list) -> dict:
        stays = [m for i, m in enumerate(self.modules) if i == 0 or m != self.modules[i - 1]]
        climbs = sum(1 for a, b in zip(stays, stays[1:]) if layer_of(b, order) < layer_of(a, order))
        returns = sum(1 for i, m in enumerate(stays) if m in stays[:i])
        return {"stays": len(stays), "modules": len(set(stays)), "climbs": climbs, "returns": returns, "walk": stays}


# The engine's entries: a face's walk ends where it hands its argument to one (the engine's walk is its own row).
ENGINE = {
    ("tpukit.training.api", "train"),
    ("tpukit.training.api", "resume"),
    ("tpukit.training.tuning", "tune_batch_size"),
}
# Each face's entry: the function it hands the user's settings to, whose first argument the walk follows.
ENTRIES = {
    "train": ("tpukit.training.api", "train"),
    "cli": ("tpukit.cli.main", "_train"),
    "resume": ("tpukit.training.api", "resume"),
    "panel": ("tpukit.ui.actions_train", "_train_work"),
    "tune_batch_size": ("tpukit.training.tuning", "tune_batch_size"),
}


def scenarios(logdir: str) -> dict:
    """name -> a function that runs it. What the user does before (a config, a panel, a first run) is done here,
    outside the walk."""
    import tpukit
    from tpukit.cli import main as cli
    from tpukit.config import RunConfig

    config = RunConfig(model="mlp", dataset="digits", epochs=1, batch_size=32, logdir=logdir)
    first = tpukit.train(config.replace(name="first"), verbose=0)
    train_config = config.replace(name="train")
    panel = tpukit.panel(config.replace(name="panel"), display=False, runs=[])
    argv = ["train", "--model", "mlp", "--dataset", "digits", "--epochs", "1", "--batch-size", "32"]
    argv += ["--logdir", logdir, "--name", "cli", "--verbose"]  # --verbose: no native-log filter thread
    return {
        "train": lambda: tpukit.train(train_config, verbose=0),
        "cli": lambda: cli.main(argv),
        "resume": lambda: tpukit.resume(first.run_dir, epochs=2, verbose=0),
        "panel": lambda: panel.train(wait=True),
        "tune_batch_size": lambda: tpukit.tune_batch_size(config, max_batch_size=64, steps=2),
    }


def measure(only=None) -> dict:
    """name -> counts, each walk run once in a fresh log directory."""
    order = layers()
    found = {}
    with tempfile.TemporaryDirectory() as logdir:
        for name, run in scenarios(logdir).items():
            if only and name not in only:
                continue
            with Walk(ENTRIES[name], threads=name != "cli") as walk:  # the CLI trains in its main thread
                run()
            found[name] = walk.counts(order)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", default=None, help="print this walk stay by stay (train, cli, resume, ...)")
    parser.add_argument("--only", default=None, help="comma-separated walks to count (default: all)")
    args = parser.parse_args()
    found = measure(args.only.split(",") if args.only else None)
    print(f"{'walk':<16}{'stays':>6}{'modules':>9}{'climbs':>8}{'returns':>9}")
    for name, c in found.items():
        print(f"{name:<16}{c['stays']:>6}{c['modules']:>9}{c['climbs']:>8}{c['returns']:>9}")
    if args.show in found:
        print()
        print("\n".join(found[args.show]["walk"]))


if __name__ == "__main__":
    main()
