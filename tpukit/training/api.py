"""Train a RunConfig: build and compile in the strategy's scope, fit with tpukit's callbacks, keep everything.

`train()` is the one entry point the notebooks, the panel and the CLI share.
It creates a fresh run directory (or continues one with `resume()`), writes
config.json and a result.json that is updated every epoch, and returns a
`RunResult`. A stop request, Ctrl-C (KeyboardInterrupt), SIGTERM or a NaN loss
ends the run cleanly with what was done so far; any other failure after the run
directory exists ends it "failed" with a one-line reason. A killed process can
be resumed from its last whole epoch and, when deterministic, ends with the
same weights.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterable, Optional

from tpukit.config import RunConfig
from tpukit.observe.meter import text_progress
from tpukit.runs import resuming
from tpukit.runs.records import RunResult
from tpukit.training.run import Run


def train(
    config: RunConfig,
    runtime=None,
    callbacks: Iterable = (),
    *,
    model=None,
    data=None,
    validation_data=None,
    test_data=None,
    stop: Optional[threading.Event] = None,
    progress=None,
    verbose="auto",
    announce=None,
) -> RunResult:
    """Train `config` on `runtime` (connected from the config when None) and return its RunResult.

    Args:
        config: the run's settings.
        runtime: a `Runtime` from `tpukit.connect`; None connects as the config says.
        callbacks: extra Keras callbacks, called after tpukit's own.
        model: what to train instead of `config.model`: a factory (a callable that returns a
            keras.Model, taking no argument or the data's `DataSpec`), or a built keras.Model (trained in
            place where its variables can serve the run, else cloned; `result.model` is the trained one).
        data: what to train on instead of `config.dataset`: arrays `(x, y)` (x may be a dict of
            named inputs), a tf.data.Dataset of unbatched `(x, y)`, a batched dataset or PyDataset,
            a callable returning one of these, or a `tpukit.Splits`. For a pretrained language model, text:
            a list of strings, of (prompt, response) pairs or of dicts ({"text"} or {"prompt", "response"}), a
            JSONL file's path (lines of such dicts), or a Hugging Face `datasets.Dataset` with such columns;
            a pair's prompt is no label (`tpukit.data.user_text`).
        validation_data: arrays or a dataset to validate on (default: `config.validation_split`
            of the training data, split with the run's seed).
        test_data: arrays or a dataset evaluated once, after training (built-in datasets bring their test split).
        stop: a threading.Event; setting it ends training after the current step.
        progress: the text stream progress goes to (default sys.stdout; the CLI passes stderr).
        verbose: as Keras' `fit`: 0 silent; 1 a line updated in place during each epoch (step/total, loss,
            examples/s, elapsed, ETA) and one line kept per epoch; 2 the line per epoch only; "auto" is 1. The
            line updates in place in a notebook's output and on a terminal; to a file or a pipe, 1 writes
            what 2 does.
        announce: called with each line said before training starts: where the run runs, and how its batches
            fall (the CLI prints them on stderr).

    Raises:
        ConfigError, tpukit.DataError, tpukit.ModelError, RegistryError: bad input, in one line,
            before a run directory is made.
    """
    progress = text_progress(verbose, progress)
    return Run(
        config, runtime, callbacks, stop, progress, inputs=(model, data, validation_data, test_data), announce=announce
    ).execute()


def resume(
    run_dir,
    runtime=None,
    callbacks: Iterable = (),
    *,
    epochs: Optional[int] = None,
    model=None,
    data=None,
    validation_data=None,
    test_data=None,
    stop=None,
    progress=None,
    verbose="auto",
    announce=None,
    **settings,
) -> RunResult:
    """Continue a stopped or killed run in its own directory, from its last whole epoch.

    `progress`, `verbose` and `announce` say where and how progress is shown, as for `train()`.

    A completed run is never trained again in place: with `epochs=N` (more than
    it ran) it is extended into a new run directory that records it as its
    `parent`, starting from its final weights and optimizer state.

    A run of a model or data handed to `train()` as objects needs the same objects
    again (`model=`, `data=`); one named by the registry or an import path rebuilds by itself.

    Raises:
        ConfigError: a setting passed besides `epochs` (a resume continues the run as it was set up), in one line.
        directory.RunDirError: the run is complete and `epochs` does not extend it, its record or backup is
            damaged, it holds a symlink, or another process is training it (`directory.RunInUse`); or `run_dir`
            is not the path of a run directory.
    """
    decided = resuming.decide(run_dir, epochs, model, settings)
    progress = text_progress(verbose, progress)
    inputs = (model, data, validation_data, test_data)
    # A completed run is extended into a new directory from its final weights; any other goes on in its own.
    if decided.extends:
        where = dict(parent=decided.previous)
    else:
        where = dict(run_dir=Path(run_dir), previous=decided.previous, resume_from=decided.found)
    where["moved_from"] = decided.moved_from
    return Run(decided.config, runtime, callbacks, stop, progress, inputs=inputs, announce=announce, **where).execute()
