"""A run loaded back from its directory, as `tpukit.load(run_dir)` gives it: config, result, history and model.

Above `records` (the result) and `saving` (the weights and the model): it puts the two together.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tpukit.runs import files, records, saving


@dataclasses.dataclass
class Run:
    """A finished (or stopped) run, loaded from its directory: `.config`, `.result`, `.history`, `.model`."""

    run_dir: str
    config: Any
    result: records.RunResult
    model_arg: Any = dataclasses.field(default=None, repr=False)
    _model: Any = dataclasses.field(default=None, repr=False)

    @property
    def history(self):
        """Per-epoch metrics, {name: [value per epoch]}, as `RunResult.history`."""
        return self.result.history

    @property
    def model(self):
        """The run's model with its final weights (a stopped run: its last whole epoch), built on first use."""
        if self._model is None:
            self._model = saving.rebuild(self.run_dir, self.model_arg, self.config)
            self.result.attach_model(self._model)
        return self._model

    def export(self, path) -> saving.Exported:
        """Write the model as a `.keras` file (and a SavedModel on TensorFlow); see `export`."""
        return saving.export(self.model, path)


def load(run_dir, model=None) -> Run:
    """The run in `run_dir`: its config, result and history, and its model (rebuilt when first asked for).

    Args:
        run_dir: a run directory.
        model: what rebuilds the model when config.json cannot name it (a model handed to train() as an
            object): the same factory, or a built keras.Model, which gets the run's weights.

    Raises:
        records.RunDirError: not a run directory, or a damaged record.
    """
    files.check_run_dir(run_dir, "load")  # None, a file, a missing path: one line
    run_dir = str(run_dir)
    saving.weights_file(run_dir)  # no weights: say so now, in one line
    result = records.load(run_dir)
    return Run(run_dir, files.load_config(run_dir), result, model)
