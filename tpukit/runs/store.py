"""`tpukit.load(run_dir)`: a run back from its directory, as the `RunResult` that `train()` returned.

Above `records` (the result) and `saving` (the weights): it checks both are there, in one line each, and
tells the result what rebuilds its model.
"""

from __future__ import annotations

from tpukit.runs import directory, records, saving


def load(run_dir, model=None) -> records.RunResult:
    """The run in `run_dir` as a `RunResult`: its config, history and metrics, and `.model` (rebuilt when first
    asked for: the final weights, or a stopped run's last whole epoch).

    Args:
        run_dir: a run directory.
        model: what rebuilds the model when config.json cannot name it (a model handed to train() as an
            object): the same factory, or a built keras.Model, which gets the run's weights.

    Raises:
        directory.RunDirError: not a run directory, no weights in it, or a damaged record.
    """
    directory.check_run_dir(run_dir, "load")  # None, a file, a missing path: one line
    run_dir = str(run_dir)
    saving.weights_file(run_dir)  # no weights: say so now, in one line
    result = records.load(run_dir)
    result.model_slot.rebuild_with = model
    return result
