"""The Runs section's actions: the runs table, compare, check reproducibility, and a run's model (load it into
the kernel, export it, start the next run from it).

It exists to keep these buttons out of the controller's core (config, jobs, training): `RunsActions` is mixed
into `tpukit.ui.controller.Controller` and uses its state: `_runs`, `_config`, `_inputs`, `view`, `_say`,
`_start`, `_train_work` and `_runtime_for`. Each method calls the engine (`tpukit.runs.records`, `saving`).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, List

from tpukit.config import RunConfig
from tpukit.ui import resumable
from tpukit.ui.state import NoRunError, Reproducibility, valid


class RunsActions:
    """The Runs section's buttons, as Controller methods."""

    def render_runs(self, rows=None) -> None:
        """The runs table: one row per run, with a note (why it ended; "(resumable)" when Resume would work).
        Once Compare was asked for, its chart and its line are redrawn with the table (a new run joins them)."""
        from tpukit.runs import records

        rows = records.compare(self._runs) if rows is None else rows
        notes = []
        for i, run in enumerate(self._runs):
            note = resumable.without_promise(run)
            if run.status != "completed" and resumable.check(run.run_dir).ok:
                note += " (resumable)"
            saved = model_saved(run)
            loads = saved or run.model_slot.model is not None
            if i < len(rows):  # the Runs section's run picker says it too
                rows[i] = {**rows[i], "model_loads": loads, "model_saved": saved}
            if not loads:
                note += " (no model to load: it kept no whole epoch)"
            elif not saved:
                note += " (model in this kernel only: its directory holds no weights for tpukit.load)"
            notes.append(note.strip())
        self.view.show_runs(rows, notes)
        if getattr(self, "_comparing", None) is not None:
            self._show_compare(self._comparing)

    def compare(self, logdir: bool = True) -> List[Dict[str, Any]]:
        """Runs side by side: this kernel's and, with `logdir`, the other runs recorded in the logdir (a CLI run,
        an earlier kernel's). One row per run, shown as a chart under the runs table, with a line above it saying
        which runs it shows and which settings differed between them (`records.differences`)."""
        self._comparing = bool(logdir)
        rows = self._show_compare(self._comparing)
        self.render_runs()
        self.view.show_section("Runs")
        return rows

    def compared_runs(self, logdir: bool = True):
        """The runs Compare shows: this kernel's, then (with `logdir`) the logdir's others, oldest first; and a
        phrase saying which they are."""
        from tpukit.runs import records

        runs = list(self._runs)
        mine = {os.path.realpath(r.run_dir) for r in runs}
        others = (
            [r for r in records.list_runs(self._config.logdir) if os.path.realpath(r.run_dir) not in mine]
            if logdir
            else []
        )
        where = self._config.logdir
        if not others:
            shown = f"this kernel's {_count(len(runs))}" + (f" (no other run in {where}/)" if logdir else "")
        else:
            shown = (
                f"this kernel's {_count(len(runs))} ({_numbers(1, len(runs))}) and {_count(len(others))} more "
                f"from {where}/ ({_numbers(len(runs) + 1, len(runs) + len(others))})"
                if runs
                else f"the {_count(len(others))} in {where}/ (none in this kernel yet)"
            )
        return runs + others, shown

    def _show_compare(self, logdir: bool) -> List[Dict[str, Any]]:
        from tpukit.runs import records

        runs, shown = self.compared_runs(logdir)
        rows = records.compare(runs)
        self.view.show_compare(rows, shown, records.differences(runs))
        return rows

    def check_reproducibility(self, run=None, wait: bool = False):
        """Rerun a run's config and compare the weights' fingerprints.

        Args:
            run: the RunResult to rerun (default: the latest completed run).
            wait: block until the rerun ends (always so in Colab).

        Returns:
            A `Reproducibility` when the rerun has ended, else None.
        """
        run = run or next((r for r in reversed(self._runs) if r.status == "completed" and r.fingerprint), None)
        if run is None:
            raise NoRunError("No completed run to rerun yet: train one first.")
        config = valid({**run.config, "profile": None})
        return self._start(
            "check reproducibility",
            functools.partial(self._reproduce_work, run, config),
            wait,
            config,
            self._runtime_for(run.to_dict()),
        )

    def _reproduce_work(self, original, config: RunConfig):
        rerun = self._train_work(config, None, self._runtime_for(original.to_dict()))
        check = Reproducibility(original, rerun)
        self.view.reproducibility(check.text(), check.reproducible)
        self._say(check.text(), "ok" if check.reproducible else "error")
        return check

    # ---- the runs' models: load, export, start the next run from one -------------------
    def load_model(self, run=None):
        """Bring a run's trained model into the kernel: returns it (also `model`, and `runs[i].model`).

        Args:
            run: the run: its index in `runs`, a RunResult, or a run directory; default the latest whose model loads.

        Raises:
            NoRunError: no run of this kernel has a model to load.
            ModelError, RunDirError: the model cannot be rebuilt, or the run kept no weights (one line each).
        """
        result = self._run_for_model(run)
        model = result.model_slot.model
        if model is None:
            from tpukit.runs import store

            model = store.load(result.run_dir, model=self._object_for(result)).model
            result.attach_model(model)
        self._model = model
        where = f"panel.runs[{self._runs.index(result)}].model" if result in self._runs else "panel.model"
        self._say(
            f"The model of {os.path.basename(result.run_dir)} is in the kernel: panel.model (also {where}); "
            "predict, evaluate or save it as any keras.Model.",
            "ok",
        )
        return model

    @property
    def model(self):
        """The model last loaded with `load_model`, else the latest run's trained model (None before any run)."""
        if getattr(self, "_model", None) is not None:
            return self._model
        latest = next((r for r in reversed(self._runs) if r.model_slot.model is not None), None)
        return latest.model if latest is not None else None

    def export(self, run=None, path=None):
        """Write a run's model as a float32 `.keras` file (and a SavedModel on TensorFlow); returns what was written.

        Args:
            run: as for `load_model`.
            path: a file ending in .keras or a folder; default `<logdir>/exports/<run>.keras`.
        """
        from tpukit.runs import saving

        result = self._run_for_model(run)
        self.load_model(result)
        path = path or os.path.join(self._config.logdir, "exports", os.path.basename(result.run_dir) + ".keras")
        exported = saving.export(result.model, path)
        beside = ", with a SavedModel beside it" if exported.saved_model else ""
        self._say(
            f"Exported {os.path.basename(result.run_dir)} to {exported.keras_path} (float32; "
            f"keras.saving.load_model opens it){beside}.",
            "ok",
        )
        return exported

    def start_from(self, run=None) -> RunConfig:
        """Make the next run start from a run's final weights (RunConfig.init_from); returns the new config.

        Args:
            run: as for `load_model`; pass "" to start from fresh weights again.
        """
        if run == "":
            self.config = {"init_from": None}
            self._say("The next run starts from fresh weights.", "info")
            return self._config
        result = self._run_for_model(run)
        self.config = {"init_from": result.run_dir}
        self._say(
            f"The next run starts from the weights of {os.path.basename(result.run_dir)} (init_from): set a "
            "lower learning rate to fine-tune, then Train.",
            "ok",
        )
        return self._config

    def _run_for_model(self, run):
        from tpukit.runs import records

        if run is None:
            found = next((r for r in reversed(self._runs) if model_loads(r)), None)
            if found is None:
                raise NoRunError(
                    "No run with a model to load yet: train one first (a run keeps its model once it "
                    "has trained a whole epoch)."
                )
            return found
        if isinstance(run, int) and not isinstance(run, bool):
            if not -len(self._runs) <= run < len(self._runs):
                raise NoRunError(
                    f"No run #{run} in this kernel: it has {len(self._runs)} run(s), panel.runs[0] to "
                    f"panel.runs[{len(self._runs) - 1}]. Received: run={run}."
                )
            return self._runs[run]
        if isinstance(run, records.RunResult):
            return run
        return records.load(self._run_dir(run))

    def _object_for(self, result):
        """The model object or factory handed to this panel, for a run that trained it (config.json names it
        only by a label)."""
        name, model = self._inputs["model"]
        return model if result.config.get("model") == name else None

    def _run_dir(self, run) -> str:
        """A run directory given as a path or as a name under the logdir; RunDirError if it is not one."""
        from tpukit.runs import directory

        path = os.path.expanduser(os.fspath(run))
        under_logdir = os.path.join(self._config.logdir, path)
        if not os.path.isdir(path) and not os.path.isabs(path) and os.path.isdir(under_logdir):
            path = under_logdir
        if not os.path.isfile(os.path.join(path, directory.CONFIG_FILE)):
            raise directory.RunDirError(
                f"{run!s} is not a tpukit run directory (no config.json): pass a run's directory, "
                f"or the name of one under {os.path.abspath(self._config.logdir)}."
            )
        return path


def model_loads(run) -> bool:
    """Whether a run's trained model can come into the kernel: kept in memory, or weights in its directory."""
    return run.model_slot.model is not None or model_saved(run)


def model_saved(run) -> bool:
    """Whether the run's directory holds its weights: what `tpukit.load` (a new kernel) can bring back."""
    from tpukit.runs import saving

    try:
        saving.weights_file(run.run_dir)
        return True
    except Exception:  # noqa: BLE001 - a run without weights, or a damaged record: it does not load
        return False


def _count(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def _numbers(first: int, last: int) -> str:
    return f"#{first}" if first == last else f"#{first}-#{last}"
