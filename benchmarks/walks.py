"""How straight the user's settings walk through tpukit's layers: for train(), the CLI's train, resume(), the panel's
train action and tune_batch_size().

Why: a call path that goes down a layer, comes back up and goes down again (the CLI checking names, connecting and
planning, and then `train` doing all three again) is code a maintainer must read twice and keep in step. This
counts it, the same way every time, instead of by reading.

The walk is the sequence of calls, in the order they are made, into tpukit functions that are handed the user's
settings: a `RunConfig`, the CLI's parsed arguments, or the run directory being resumed. Consecutive calls in one
module are one stay. Counted:
    stays    the walk's stays;
    modules  the distinct modules it stays in;
    climbs   steps from a module to one in a higher layer (pyproject's import-linter layers, top first): the
             walk came back up to go down again;
    returns  steps into a module the walk had already left;
    again    the modules visited both before the settings reach the engine (`train`, `resume`,
             `tune_batch_size`) and after: what the caller checks, connects or plans that the engine does anew.
A straight walk goes down once: stays == modules, no climbs, no returns. A run's own walk is not straight (the run
asks the plan, the model's source and the hardware in turn, coming back between them); what a caller adds to it
is the measure of the caller: the CLI's walk should be train()'s with one more stay, and nothing again.

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


# Where a caller hands the settings to the engine: what the walk visits before it and again after is done twice.
ENGINE = ("tpukit.training.api", "tpukit.training.tuning")
# Never handed the settings: the CLI's option table, and its native-log filter, whose thread swaps file descriptors
# (reading a frame's locals there crashed an older CLI).
_UNFOLLOWED = ("tpukit.cli.options", "tpukit.cli.nativelog", "tpukit.native_lines")


class Walk:
    """Records the modules of the calls handed a followed value, while active (every thread)."""

    def __init__(self, followed, threads: bool = True):
        self.followed, self.threads = followed, threads
        self.modules = []

    def _profile(self, frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("tpukit") or module.startswith(_UNFOLLOWED):
            return
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        names = code.co_varnames[:count]
        values = [frame.f_locals.get(n) for n in names if n not in ("self", "cls")]
        if any(self.followed(v) for v in values):
            self.modules.append(module)

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
        engine = next((i for i, m in enumerate(stays) if m in ENGINE), len(stays))
        again = sorted(set(stays[:engine]) & set(stays[engine:]) - set(ENGINE))
        return {
            "stays": len(stays),
            "modules": len(set(stays)),
            "climbs": climbs,
            "returns": returns,
            "again": again,
            "walk": stays,
        }


def _settings(run_dir=None):
    from tpukit.config import RunConfig

    def followed(value):
        if isinstance(value, (RunConfig, argparse.Namespace)):
            return True
        return run_dir is not None and isinstance(value, (str, os.PathLike)) and os.fspath(value) == run_dir

    return followed


def scenarios(logdir: str) -> dict:
    """name -> (a function that runs it, the run directory it follows, if any). What the user does before (a
    config, a panel, a first run) is done here, outside the walk."""
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
        "train": (lambda: tpukit.train(train_config, verbose=0), None),
        "cli": (lambda: cli.main(argv), None),
        "resume": (lambda: tpukit.resume(first.run_dir, epochs=2, verbose=0), first.run_dir),
        "panel": (lambda: panel.train(wait=True), None),
        "tune_batch_size": (lambda: tpukit.tune_batch_size(config, max_batch_size=64, steps=2), None),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", default=None, help="print this walk stay by stay (train, cli, resume, ...)")
    parser.add_argument("--only", default=None, help="comma-separated walks to count (default: all)")
    args = parser.parse_args()
    order = layers()
    with tempfile.TemporaryDirectory() as logdir:
        found = {}
        for name, (run, run_dir) in scenarios(logdir).items():
            if args.only and name not in args.only.split(","):
                continue
            with Walk(_settings(run_dir), threads=name != "cli") as walk:  # the CLI trains in its main thread
                run()
            found[name] = walk.counts(order)
    print(f"{'walk':<16}{'stays':>6}{'modules':>9}{'climbs':>8}{'returns':>9}  again")
    for name, c in found.items():
        again = ", ".join(m.replace("tpukit.", "") for m in c["again"]) or "-"
        print(f"{name:<16}{c['stays']:>6}{c['modules']:>9}{c['climbs']:>8}{c['returns']:>9}  {again}")
    if args.show in found:
        print()
        print("\n".join(found[args.show]["walk"]))


if __name__ == "__main__":
    main()
