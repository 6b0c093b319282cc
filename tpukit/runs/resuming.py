"""What resuming a run directory means, decided once: which run it continues, with which settings, from where.

`tpukit.resume` asks `decide` once and builds the run from the answer, so the checks on the directory, its two
records and the arguments live in one place: the arguments first, then the directory and its records, read once,
then what they say. Each refusal is one line naming the run and what to do instead.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple, Optional

from tpukit.config import ConfigError, RunConfig
from tpukit.runs import directory, records
from tpukit.runs.records import ResumeCheck, RunResult


class Resumption(NamedTuple):
    """A resume, decided: `config` is what trains (epochs raised where a completed run is extended), `previous` the
    run's record, `found` where a stopped run goes on (None: a completed run extended into a new directory)."""

    config: RunConfig
    previous: RunResult
    found: Optional[ResumeCheck]
    moved_from: Optional[str] = None  # the preset directory the run trained from, where it has moved since

    @property
    def extends(self) -> bool:
        return self.found is None


def decide(run_dir, epochs: Optional[int] = None, model=None, settings: Optional[dict] = None) -> Resumption:
    """How `resume(run_dir, epochs=..., model=..., **settings)` goes on, or its one-line refusal.

    In one pass down: the arguments, the directory, its records (result.json, then config.json as the settings
    that train), then what they say, here. The checks on what was read compare plain values, so nothing goes back
    to a module already left (`benchmarks/walks.py` counts it).

    Raises:
        ConfigError: a setting besides `epochs`, or a `model=` that names another model than the run trained.
        directory.RunDirError: not a run directory, a symlink in it, its two records disagree, a completed run
            that `epochs` does not extend, epochs= on a run that is not complete, or nothing to resume from
            (`records.BackupError` where its backup is damaged).
    """
    _refuse_settings(run_dir, settings or {})
    # The directory read once (is it a run, holding no symlink; its result.json as it stands; config.json), then
    # its records made from what was read.
    directory.check_run_dir(run_dir, "resume")
    directory.check_contained(run_dir)
    values = directory.recorded(run_dir)
    config = directory.load_config(run_dir)
    previous = records.from_recorded(values, run_dir)
    # A completed run is not resumed in place: the check says so without reading its backup. Otherwise a damaged
    # backup raises its BackupError here, before anything changes.
    found = records.resume_check(run_dir, previous, verify=True)
    named = model if isinstance(model, str) else getattr(model, "source", None)
    moved, gone = _moved_preset(config.model, named)
    if gone:
        raise directory.RunDirError(f"{run_dir} {gone}")
    if moved:  # where the run's preset directory is now: it trains from there (the run's config.json then says so)
        named = None
    if isinstance(named, str) and named != config.model:  # a run rebuilds its own model; another would fail later
        raise ConfigError(
            f"resume(model={named!r}): {run_dir} trained the model {config.model!r}, and a resume continues that "
            "one (it rebuilds it by itself; model= is for a model object the run was given). To train another, "
            "start a new run: train(config.replace(model=...)).",
            field="model",
        )
    written = json.loads(json.dumps(config.to_dict()))
    differ = _differing(written, previous.config or written)
    if differ:  # one of the two records was edited or replaced
        k = differ[0]
        raise directory.RunDirError(
            f"{run_dir}: config.json and result.json disagree on {', '.join(differ)} ({k}={written.get(k)!r} vs "
            f"{previous.config.get(k)!r}); the run cannot resume exactly. Start a new run with the settings you want."
        )
    if previous.status == "completed":
        if epochs is None or epochs <= previous.epochs_done:
            raise directory.RunDirError(
                f"{run_dir} is a completed run ({previous.epochs_done} epochs) and is not trained again; to train it "
                f"further, extend it into a new run: resume(run_dir, epochs=N) or --resume DIR --epochs N, with N > "
                f"{previous.epochs_done}. Received: epochs={epochs}."
            )
        return Resumption(config.replace(epochs=epochs, **moved), previous, None, config.model if moved else None)
    if not found.ok and not found.in_use:  # in use: taking the lock says by whom
        raise directory.RunDirError(f"{run_dir}: {found.reason}")
    if epochs is not None and epochs != config.epochs:
        raise directory.RunDirError(
            f"{run_dir} is a {previous.status} run of {config.epochs} epochs; resume finishes it as it was set up, "
            f"and epochs= extends only completed runs. Received: epochs={epochs}."
        )
    return Resumption(config.replace(**moved), previous, found, config.model if moved else None)


def _refuse_settings(run_dir, settings: dict) -> None:
    """ConfigError, in one line, for settings passed to resume(): it continues the run as it was set up."""
    if not settings:
        return
    given = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    raise ConfigError(
        f"resume() continues {run_dir} with the settings it was started with, so {given} would be ignored; only "
        "epochs=N extends a completed run. To change them, start a new run: train(config.replace(...)).",
        field=next(iter(settings)),
        value=next(iter(settings.values())),
    )


def _differing(written: dict, recorded: dict) -> list:
    """The settings on which config.json (`written`) and result.json (`recorded`) disagree, sorted."""
    return sorted(k for k in set(written) | set(recorded) if written.get(k) != recorded.get(k))


def _is_path(model: str) -> bool:
    return os.sep in model or model.startswith(("~", "."))


def _moved_preset(recorded: str, named) -> tuple:
    """({"model": where the run's preset directory is now}, None) where the directory it was trained from is gone
    and `named` (resume's model=) is a directory; ({}, None) where it is still there; else ({}, the refusal's words
    after the run's path)."""
    if not _is_path(recorded) or os.path.isdir(os.path.expanduser(recorded)):
        return {}, None
    if isinstance(named, str) and named != recorded and os.path.isdir(os.path.expanduser(named)):
        return {"model": named}, None
    return {}, (
        f"was trained from the preset directory {recorded!r}, which is no longer there (moved or deleted): put it "
        "back there, or say where it is now: resume(run_dir, model=DIR), or --resume RUN --model DIR."
        + (f" Received: model={named!r}, no such directory." if isinstance(named, str) else "")
    )
