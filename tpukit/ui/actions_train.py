"""The Train, Resume, Stop and Tune actions: each starts a job (`tpukit.ui.jobs`) that calls the engine's
`training.train` / `resume` or `tuning.tune_batch_size` with the config's own arguments, and records its result.

It exists to keep the actions that train out of the controller's core. `TrainActions` is mixed into
`tpukit.ui.controller.Controller` and uses its state: `_config`, `_invalid`, `_runs`, `_runs_lock`, `_jobs`,
`view`, `context`, `clock`, `_say`, `refresh`, `_connect`, `_settle_settings`, `_connecting_line`,
`_matching_runtime`, `_run_status`, `_runtime_for`, `_run_dir`, `render_runs` and `_after_profiled_run`.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Any, Callable, Dict, List, Optional

from tpukit.ui import context as _context
from tpukit.config import ConfigError, RunConfig
from tpukit.ui import resumable
from tpukit.ui.state import NoRunError

TUNE = "tune batch size"  # the job's name: it says what is going on, and the tuning views outlive only it


class TrainActions:
    """Train, Resume, Stop, Tune and waiting for them, as Controller methods."""

    def train(self, wait: bool = False):
        """Train the current config with live progress.

        Elsewhere than Colab the run goes in a thread and this returns at once
        (None) unless `wait`; in Colab it runs in the foreground. Returns the
        RunResult when the run ran to an end (completed, stopped or NaN), None
        if it could not (the status says why).

        Raises:
            PanelBusy: a run is already going on.
            ConfigError: the proposed settings are refused (each says why; the error lists them).
        """
        if self._invalid:
            raise ConfigError(self.train_off())
        config = self._config
        status = self._run_status_for(config.run_name)
        work = functools.partial(self._train_work, config, None, status=status, chart=self._chart_for(config))
        once = self._profile_once
        # PanelBusy: nothing started, and "Profile next run" still holds
        result = self._start("train", work, wait, config, status=status)
        if once is not None:  # it was for this run only
            self._profile_once = None
            if self._config.profile == once:
                self.config = self._config.replace(profile=None)
        return result

    def resume(self, run=None, wait: bool = False, epochs: Optional[int] = None):
        """Continue a stopped run from its last whole epoch, in its own directory.

        Args:
            run: the run: a RunResult, or its run directory (a path, or a directory
                name under the config's logdir). Default: the latest resumable run
                of this kernel.
            wait: block until the run ends (always so in Colab).
            epochs: extend a completed run to this many epochs, in a new run
                directory (`tpukit.resume(run_dir, epochs=N)`).

        Returns:
            The RunResult when the run has ended, else None (as `train`).

        Raises:
            NoRunError: no run given and none of this kernel's runs can be resumed, or the run
                given kept nothing to resume from (it stopped before its first whole epoch ended).
            RunDirError: `run` is not a tpukit run directory, its record is damaged, or it completed
                (and `epochs` does not extend it).
        """
        from tpukit.runs import directory, records

        if run is None:
            found = self.resume_target()
            if not found.ok:
                raise NoRunError(f"No resumable run. {found.reason}")
            run_dir = found.run_dir
        elif isinstance(run, (str, os.PathLike)):
            run_dir = self._run_dir(run)
        elif hasattr(run, "run_dir"):
            run_dir = run.run_dir
        else:
            raise TypeError(f"Expected a RunResult or a run directory. Received: run={run!r}")
        found = resumable.check(run_dir)
        if not found.ok and found.status in ("stopped", "failed") and epochs is None:
            raise NoRunError(f"{os.path.basename(run_dir)}: {found.reason}")  # the engine would start it over
        recorded = records.load(run_dir)
        config = directory.load_config(run_dir)
        runtime = self._runtime_for(recorded.to_dict())
        status = self._run_status_for(
            config.run_name,
            resumed_from=recorded.epochs_done + 1,
            extends_to=epochs if recorded.status == "completed" else None,
        )
        work = functools.partial(
            self._train_work, config, run_dir, runtime, epochs, status=status, chart=self._chart_for(config)
        )
        return self._start("resume", work, wait, config, runtime, status=status)

    def stop(self) -> bool:
        """Ask the run to end after its current step; it is kept as "stopped" and can be resumed.

        In Colab, where the run holds the foreground, stop with the cell's interrupt instead.
        Returns whether a run was going on.
        """
        if not self._jobs.stop():
            self._say("Nothing to stop: no run is going on.")
            return False
        status = self._run_status
        if status is not None:
            status.stopping()  # said until the run ends, whatever progress comes in meanwhile
        else:
            self._say("Stopping after the current step…")
        return True

    def wait(self, timeout: Optional[float] = None):
        """Wait for the current action to end; returns its result (None if it failed)."""
        return self._jobs.wait(timeout)

    def tune_batch_size(self, wait: bool = False):
        """Try growing per-replica batch sizes on the current model and data (`tpukit.tune_batch_size`), show
        the trials, and set the recommended batch size in the settings.

        Returns:
            The `BatchTuning` when it has ended (wait=True, or always in Colab), else None.
        """
        if self._invalid:
            raise ConfigError(self.train_off())
        config = self._config
        return self._start(TUNE, functools.partial(self._tune_work, config), wait, config)

    def resume_target(self) -> resumable.ResumeCheck:
        """The run Resume continues: the latest of this kernel's runs that `tpukit.resume()` would continue;
        else a check that is not ok, with the latest run's reason (or that there is no run)."""
        first = None
        for run in reversed(self._runs):
            found = resumable.check(run.run_dir)
            if found.ok:
                return found
            first = first or found
        return first or resumable.ResumeCheck("", False, "Nothing to resume: no run in this kernel yet.")

    # ---- the jobs' work ----------------------------------------------------------------
    def _start(self, name: str, work: Callable[[], Any], wait: bool, config: RunConfig, runtime=None, status=None):
        job = self._jobs.claim(name, work)
        # Before the slow part, from the caller's thread (a click's handler): the last run's status goes, and
        # the page says at once what is happening. In Colab only the handler's own updates reach the page.
        self.view.show_section("Progress")
        if runtime is None and self._matching_runtime(config) is None:
            line = self._connecting_line(config)
            self.view.accelerator(text=line, connecting=True)
            self.view.progress_sink.waiting(f"{name[0].upper() + name[1:]}: waiting for the accelerator…")
            self._say(line)
        else:
            lead = status.lead() if status is not None else f"Starting {config.run_name}"
            self.view.progress_sink.waiting(f"{lead}: building the model and the input pipeline…")
            if status is not None:
                status.building()  # says it
            else:
                self._say(f"{lead}: building the model and the input pipeline…")
        if name != TUNE:  # the last tuning's table would sit under this job's lines as if it were about it
            self.view.tuning(None)
        self.refresh()
        return self._jobs.launch(job, wait, foreground=self.context == _context.COLAB)

    def _run_status_for(self, name: str, **run):
        """The status line's words for a run about to start (`tpukit.ui.phases.RunStatus`), over the view's sink.
        Outside Colab a ticker says the seconds of the slow phases; in Colab the page would not show its updates."""
        from tpukit.ui.phases import RunStatus

        return RunStatus(
            self.view.progress_sink, self._say, name, self.clock, ticking=self.context != _context.COLAB, **run
        )

    def _chart_for(self, config: RunConfig) -> str:
        """The figure of the run's right chart beside its loss, from its source (`ModelSource.chart`), chosen by
        the action before its job starts: the job then connects and trains without asking for it."""
        from tpukit.models import source

        try:
            return source.choose(self.inputs_for(config).get("model"), config).chart
        except Exception:  # noqa: BLE001 - a model that names nothing fails in the run, which says why
            return "accuracy"

    def _train_work(
        self,
        config: RunConfig,
        run_dir: Optional[str],
        runtime=None,
        epochs: Optional[int] = None,
        *,
        status=None,
        chart: Optional[str] = None,
    ):
        from tpukit.ui import jobs

        status = status or self._run_status_for(config.run_name)
        self._run_status = status
        ticker = jobs.Ticker(status.tick) if status.ticking else None
        try:
            return self._train(config, run_dir, runtime, epochs, status, chart or self._chart_for(config))
        finally:
            status.close()  # before the job's end is said (a failure's line among them)
            if ticker is not None:
                ticker.stop()
            self._run_status = None
            self._settle_settings()  # a connect in this job left them for now

    def _train(self, config: RunConfig, run_dir: Optional[str], runtime, epochs: Optional[int], status, chart: str):
        from tpukit.data import builtin as data
        from tpukit.training import api as training
        from tpukit.ui import progress

        inputs = self.inputs_for(config)
        runtime = runtime or self._connect(config, recheck=False)
        # A fresh classifier's loss sets the plot's first height; the axes grow for anything else (the user's data,
        # text). A built-in image set's name cannot be registered over, so the name alone says which it is.
        images = config.dataset in data.DATASETS
        first_loss = 1.1 * math.log(data.info(config.dataset).num_classes) if images else 1.0
        sink = status  # the view's progress sink, and the status line's phase, from one progress model
        sink.start(config.run_name, self.context == _context.COLAB, first_loss, chart)
        callback = progress.make_callback(
            sink,
            figure="accuracy" if chart == "perplexity" else chart,  # perplexity is drawn from the loss
            global_batch=config.global_batch(runtime.replicas),
            clock=self.clock,
            earlier=_history(run_dir),
            before=progress.drawn(run_dir),
        )
        stop = self._jobs.stop_event
        quiet = dict(callbacks=[callback], stop=stop, verbose=0)  # the panel's progress is its own: no text lines
        if run_dir is None:
            result = training.train(config, runtime, **quiet, **inputs)
        else:
            result = training.resume(run_dir, runtime, epochs=epochs, **quiet, **inputs)
        job = self._jobs.job
        if job is not None:
            job.stoppable = False  # trained: what is left (the record, the profile, TensorBoard) is not a run
        progress.remember(result.run_dir, callback)  # a Resume in this kernel draws these steps again
        sink.finish(result)
        self._record(result)
        self.refresh()
        if result.profile_files:
            self._after_profiled_run(result)
        return result

    def _tune_work(self, config: RunConfig):
        try:
            return self._tune(config)
        finally:
            self._settle_settings()  # a connect in this job left them for now

    def _tune(self, config: RunConfig):
        from tpukit.training import tuning

        runtime = self._matching_runtime(config) or self._connect(config, recheck=False)
        sink = self.view.progress_sink
        sink.waiting("Tuning the batch size: a few steps at each size…")
        inputs = self.inputs_for(config)

        def on_trial(trials, trying):  # each size as it goes: the table so far and the size being tried
            done = "; ".join(
                f"{t.batch_size}: {t.examples_per_sec:,.0f}/s" if t.examples_per_sec else f"{t.batch_size}: {t.outcome}"
                for t in trials
            )
            sink.waiting(f"Tuning the batch size: trying {trying} per replica…" + (f" (so far {done})" if done else ""))

        result = tuning.tune_batch_size(config, runtime, model=inputs["model"], data=inputs["data"], on_trial=on_trial)
        self.view.tuning(result)
        self.config = self._config.replace(batch_size=result.recommended)
        sink.waiting(f"Tuned: tried {', '.join(str(t.batch_size) for t in result.trials)} per replica.")
        self._say(f"Batch size set to {result.recommended} per replica (tuned; the table says why).")
        return result

    def _record(self, result) -> None:
        with self._runs_lock:
            same = [i for i, r in enumerate(self._runs) if r.run_dir == result.run_dir]
            if same:
                self._runs[same[-1]] = result
            else:
                self._runs.append(result)
        kind = {"completed": "ok", "stopped": "info"}.get(result.status, "error")
        line = f"{result.status}: {os.path.basename(result.run_dir)}"
        if result.final_metrics.get("val_accuracy") is not None:
            line += f", val_accuracy {result.final_metrics['val_accuracy']:.4f}"
        if result.examples_per_sec:
            line += f", {result.examples_per_sec:,.0f} examples/s"
        sentences = [line, resumable.without_promise(result)]
        if result.status in ("stopped", "failed"):  # what Resume can do, as the button shows it
            sentences.append(resumable.check(result.run_dir).reason)
        samples = result.samples
        if samples.get("after") is not None:  # a language model: what training changed in its writing
            sentences.append(
                f"{samples['prompt']!r} continued: before {samples.get('before', '')!r}, after {samples['after']!r}"
            )
        self._say(sentences_line(sentences), kind)
        self.render_runs()


def _history(run_dir: Optional[str]) -> Optional[Dict[str, List[float]]]:
    """A resumed run's per-epoch history, so its curves go on where they were (None: a new run, or unreadable)."""
    if run_dir is None:
        return None
    from tpukit.runs import records

    try:
        return records.load(run_dir).history
    except Exception:  # noqa: BLE001 - the curves start empty; resume() itself says what is wrong
        return None


def sentences_line(sentences) -> str:
    """Sentences (some ending in a period, some not; empty ones left out) in one line, with exactly one period
    between two ("epoch 4 of 20. 'The' continued", not "epoch 4 of 20.. 'The' continued"), and the last one's own
    ending."""
    kept = [s for s in sentences if s]
    return ". ".join(s.rstrip(".") for s in kept) + ("." if kept and kept[-1].endswith(".") else "")
