"""The panel's logic without widgets: one RunConfig, the runtime, the runs, and the actions that use them.

    from tpukit.ui import Controller
    c = Controller(tpukit.RunConfig(dataset="digits", model="mlp", epochs=2))
    result = c.train(wait=True)

The controller holds the state (config, runtime, runs, the job going on) and
does every action by calling the engine with the config's own arguments:
`runtime.connect`, `training.train` / `resume`, `tuning.tune_batch_size`,
`profiling.summarize`, `tensorboard.start`, `records.compare`. It never imports
ipywidgets. What it has to show goes to a `View`: one method per thing shown.
The base `View` shows nothing (a script's or a test's view);
`tpukit.ui.panel.Panel` is the widget view, and its buttons call the methods
here, so a test that drives the controller does what a click does.

Where training runs depends on the front end (`tpukit.context`): in Colab,
widget updates from a background thread do not reach the page, so a run goes
in the foreground of the call and Stop is Colab's interrupt (the engine keeps
the run as "stopped"). Elsewhere a run goes in a thread and `stop()` ends it
after the current step.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import tempfile
import threading
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from tpukit import context as _context
from tpukit.config import ConfigError, PaddingWarning, RunConfig
from tpukit.ui import resumable
from tpukit.ui.messages import field_of, plain

# Runs made by panels in this kernel: a panel built again (a re-run cell) still lists them.
KERNEL_RUNS: List[Any] = []
ERROR_LOG = "tpukit-panel.log"  # in the logdir (else the temp dir): tracebacks of unexpected errors
TUNE = "tune batch size"  # the job's name: it says what is going on, and the tuning views outlive only it


class PanelBusy(RuntimeError):
    """An action needs the panel idle, but a run is going on."""


class NoRunError(ValueError):
    """An action needs a run (to resume, to rerun) and the panel has none that fits."""


@dataclasses.dataclass(frozen=True)
class Reproducibility:
    """A run and its rerun from the same config: equal fingerprints mean bitwise-equal weights."""

    original: Any  # RunResult
    rerun: Any  # RunResult

    @property
    def reproducible(self) -> bool:
        return bool(self.original.fingerprint) and self.original.fingerprint == self.rerun.fingerprint

    def text(self) -> str:
        a, b = self.original.fingerprint, self.rerun.fingerprint
        if self.reproducible:
            return f"Reproducible: the rerun ended with the same weights (fingerprint {a})."
        why = ("" if self.original.config.get("deterministic")
               else " The run was not deterministic: tick 'deterministic' for bitwise-equal reruns.")
        return f"Not reproducible: fingerprints differ ({a} vs {b}).{why}"


@dataclasses.dataclass(frozen=True)
class Controls:
    """Which actions are off, and why Train and Resume are off (or what they do): the buttons' state."""

    disabled: Dict[str, bool]
    train_off: str  # why Train is off because of the settings ("" when they are fine)
    train_tip: str  # Train's tooltip: why it is off (settings or a job going on), "" for the default
    resume_tip: str  # which run Resume continues, or why it is off


class View:
    """What the controller shows. Each method shows one thing; this base shows nothing.

    `progress_sink` is the sink of the run's progress callback (`tpukit.ui.progress.make_callback`):
    start / waiting / failed / show_progress / show_curves / finish, and `latest`.
    """

    def __init__(self):
        from tpukit.ui import progress

        self.progress_sink = progress.ProgressRecord()

    def status(self, text: str, kind: str = "info") -> None:
        """The status line: what the last action did ("info", "ok" or "error")."""

    def accelerator(self, runtime=None, text: str = "", kind: str = "info", connecting: bool = False) -> None:
        """What is connected (`runtime`), or a line about connecting (`text`); `connecting`: a connect began."""

    def connected(self, runtime) -> None:
        """A new runtime is connected (Connect becomes Reconnect)."""

    def show_config(self, config: RunConfig) -> None:
        """The settings now hold `config` (written by code, not typed)."""

    def explain(self, config: RunConfig, runtime, stale: bool) -> None:
        """Notes on the settings: what "auto" becomes on `runtime`; `stale`: connected to other hardware."""

    def show_problems(self, problems: Dict[str, str]) -> None:
        """Each refused field's sentence ({field: sentence}); {} clears them."""

    def controls(self, controls: Controls) -> None:
        """Which buttons are on, and why Train and Resume are off."""

    def show_section(self, name: str) -> None:
        """Bring one section into view: Settings, Progress, Runs, Profile, TensorBoard or Accelerator."""

    def profile(self, summary=None, text: str = "", kind: str = "info") -> None:
        """A capture's summary, or a line about it."""

    def tensorboard(self, shown=None, text: str = "", kind: str = "info") -> None:
        """TensorBoard inline (`shown`: a `tpukit.ui.embed.Embed`), or a line about it."""

    def tuning(self, result) -> None:
        """A batch-size tuning's table and chart; None clears them."""

    def show_runs(self, rows: List[dict], notes: List[str], chart: bool) -> None:
        """The runs table (one row and note per run); `chart`: draw the chart too."""

    def reproducibility(self, text: str, ok: bool) -> None:
        """The outcome of a reproducibility check."""


class _Job:
    """One action that runs for a while (a training run), in the foreground or a thread."""

    def __init__(self, name: str, work: Callable[[], Any]):
        self.name = name
        self.work = work
        self.result = None
        self.error: Optional[str] = None
        self.active = True
        self.stoppable = True  # False once training has ended (the profile and TensorBoard may still be shown)
        self.done = threading.Event()


class Controller:
    """One RunConfig, the runtime it connects, the runs it makes, and the actions on them; no widgets.

    Args:
        config: the starting RunConfig (or a dict of its fields); default `RunConfig()`.
        model, data, validation_data, test_data: the user's own, as `tpukit.train` takes them.
        view: what shows the state (default: a `View` that shows nothing).
        context: "colab", "jupyter", "vscode" or "none"; default `tpukit.context.detect()`.
        clock: seconds, for progress rates and the redraw schedule (default `time.perf_counter`).
        runs: the list that collects RunResults (default: one list for the kernel, `KERNEL_RUNS`).
        auto_tensorboard: open TensorBoard on the profile tab after a profiled run.
    """

    def __init__(self, config=None, *, model=None, data=None, validation_data=None, test_data=None,
                 view: Optional[View] = None, context: Optional[str] = None,
                 clock: Callable[[], float] = time.perf_counter, runs: Optional[list] = None,
                 auto_tensorboard: bool = True):
        from tpukit.training import api as training

        if isinstance(config, dict):
            config = valid(config)
        elif config is None:
            config = valid({})
        elif not isinstance(config, RunConfig):
            raise TypeError(f"Expected a RunConfig, a dict of its fields or None. Received: config={config!r}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PaddingWarning)
            config, model, data = training.with_labels(config, model, data)
        # The user's own model and data (objects), used while the config still names them.
        self._inputs = {"model": (config.model, model), "data": (config.dataset, data),
                        "validation_data": validation_data, "test_data": test_data}
        self.context = context or _context.detect()
        if self.context not in _context.CONTEXTS:
            raise ValueError(f"Unknown context {self.context!r}. Expected one of {', '.join(_context.CONTEXTS)}.")
        self.view = view or View()
        self.clock = clock
        self._runs = KERNEL_RUNS if runs is None else runs
        self._auto_tensorboard = auto_tensorboard
        self._config = config
        self._runtime = None
        self._runtime_key: Optional[Tuple] = None
        self._invalid: Dict[str, str] = {}  # field (or "" for none) -> a sentence: why the settings are refused
        self.job: Optional[_Job] = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._message = ""
        self._profile_summary = None
        self._error_log: Optional[str] = None
        self._tensorboard = None
        self._tensorboard_lock = threading.Lock()
        self._launched: List[Any] = []  # TensorBoards this controller started (only these are stopped on close)
        self._model = None  # the model load_model brought into the kernel

    def start(self) -> None:
        """Show the starting state (the view is ready)."""
        self._commit(self._config)
        self.render_runs()

    # ---- the config ----------------------------------------------------------
    @property
    def config(self) -> RunConfig:
        """The current RunConfig. Assign a RunConfig, or a dict of fields to change."""
        return self._config

    @config.setter
    def config(self, value) -> None:
        if isinstance(value, dict):
            value = valid({**self._config.to_dict(), **value})
        elif not isinstance(value, RunConfig):
            raise TypeError(f"Expected a RunConfig or a dict of RunConfig fields. Received: {value!r}")
        self._check_runtime_fit(value)
        self.view.show_config(value)
        self.view.show_problems({})
        self._invalid = {}
        self._commit(value)

    @property
    def problems(self) -> Dict[str, str]:
        """Why the proposed settings are refused: {field: sentence} ("" for one no field names); empty if none."""
        return dict(self._invalid)

    def propose(self, values: Dict[str, Any]) -> Dict[str, str]:
        """Settings as a person typed them ({field: value}): take them if RunConfig (and the connected hardware)
        accept them all; else keep the config and return every refused field with its sentence."""
        candidate, self._invalid = self._check(values)
        self.view.show_problems(self._invalid)
        if candidate is None:
            self.refresh()
        else:
            self._commit(candidate)
        return dict(self._invalid)

    def _check(self, values: Dict[str, Any]) -> Tuple[Optional[RunConfig], Dict[str, str]]:
        """(the config `values` ask for, or None; {field: sentence} for each refused field).

        RunConfig stops at its first error, so each changed field is tried alone on the current config first,
        then all the fields that pass together (and against the hardware and the data's size).
        """
        base = self._config.to_dict()
        problems: Dict[str, str] = {}
        for field, value in values.items():
            if value != base.get(field):
                try:
                    valid({**base, field: value})
                except (ValueError, TypeError) as e:
                    problems[field] = plain(str(e))
        accepted = {field: value for field, value in values.items() if field not in problems}
        try:
            candidate = valid({**base, **accepted})
            self._check_runtime_fit(candidate)
        except (ValueError, TypeError) as e:
            field = field_of(str(e))
            problems[field if field in values else ""] = plain(str(e))
        return (None if problems else candidate), problems

    def _commit(self, config: RunConfig) -> None:
        self._config = config
        runtime = self._matching_runtime(config)
        self.view.explain(config, runtime, self._runtime is not None and runtime is None)
        self.refresh()

    def _check_runtime_fit(self, config: RunConfig) -> None:
        """Checks that need the hardware (against the connected runtime when it is the one `config` asks for)
        or the data's size (where it is known before loading)."""
        from tpukit.data import sources

        runtime = self._matching_runtime(config)
        if runtime is not None:
            config.check_for(runtime.kind, runtime.replicas)
        inputs = self.inputs_for(config)
        available = sources.planned_train_examples(config, inputs.get("data"), inputs.get("validation_data"))
        if available is not None:
            split = config.validation_split is not None and inputs.get("validation_data") is None
            config.check_examples(available, self._replicas(config), split)

    def _matching_runtime(self, config: RunConfig):
        if self._runtime is not None and self._runtime_key == _runtime_key(config):
            return self._runtime
        return None

    def _replicas(self, config: RunConfig) -> int:
        runtime = self._matching_runtime(config)
        return runtime.replicas if runtime is not None else (config.replicas or 1)

    # ---- actions (each button calls one) -------------------------------------
    def connect(self):
        """Connect to the accelerator the config asks for; returns the Runtime, or None (the status says why)."""
        self._ensure_idle("connect")
        line = self._connecting_line(self._config)
        self._say(line)  # shown before the slow part: a click's handler runs this
        self.view.accelerator(text=line, connecting=True)
        self.view.show_section("Accelerator")  # what it found, and why it skipped the rest
        try:
            runtime = self._connect(self._config)
        except Exception as e:  # ConnectError, RestartRequired, or TensorFlow's own
            line = self.explain(e, "connect")
            self._say(line, "error")
            self.view.accelerator(self._runtime, text=line, kind="error")
            return None
        self._say(f"Connected: {runtime.kind.upper()}, {runtime.replicas} replica"
                  + ("s" if runtime.replicas != 1 else "") + f", {runtime.backend}.", "ok")
        return runtime

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
        return self._start("train", functools.partial(self._train_work, config, None), wait, config)

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
        from tpukit.runs import records

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
        config = records.load_config(run_dir)
        runtime = self._runtime_for(recorded.to_dict())
        work = functools.partial(self._train_work, config, run_dir, runtime, epochs)
        return self._start("resume", work, wait, config, runtime)

    def stop(self) -> bool:
        """Ask the run to end after its current step; it is kept as "stopped" and can be resumed.

        In Colab, where the run holds the foreground, stop with the cell's interrupt instead.
        Returns whether a run was going on.
        """
        job = self.job
        if job is None or not job.active or not job.stoppable:
            self._say("Nothing to stop: no run is going on.")
            return False
        self._stop.set()
        self._say("Stopping after the current step…")
        return True

    def wait(self, timeout: Optional[float] = None):
        """Wait for the current action to end; returns its result (None if it failed)."""
        job = self.job
        if job is None:
            return None
        if not job.done.wait(timeout):
            raise TimeoutError(f"{job.name} still running after {timeout} s")
        return job.result

    def capture_profile(self, window: Optional[Tuple[int, int]] = None) -> Tuple[int, int]:
        """Profile the next run: sets the config's profile window (default: a few steps after warm-up).

        After the run, the summary shows inline (`show_profile`) and TensorBoard
        opens on its profile tab. Returns the window.
        """
        window = tuple(window) if window is not None else (self._config.profile or self._default_window())
        self.config = self._config.replace(profile=window)
        self._say(f"The next run profiles steps {window[0]}–{window[1]}: press Train.")
        return window

    def show_profile(self, run=None):
        """Summarize a run's profile capture (default: the latest run that has one); returns the summary."""
        from tpukit.observe import profiling

        run = run or next((r for r in reversed(self._runs) if r.profile_files), None)
        if run is None:
            self.view.profile(text="No profile capture yet: press 'Profile next run', then Train.")
            return None
        try:
            summary = profiling.summarize(run.profile_files[0])
        except Exception as e:  # missing xprof, an unreadable capture
            self.view.profile(text=self.explain(e, "show_profile"), kind="error")
            return None
        self._profile_summary = summary
        self.view.profile(summary)
        return summary

    def show_tensorboard(self, profile: Optional[bool] = None) -> Optional[str]:
        """Show TensorBoard for the runs' logdir inline; returns the URL shown, or None (the view says why).

        TensorBoard listens on 127.0.0.1 (reused if one already serves the
        logdir). `profile`: open the profile tab (None: when the latest run has
        a capture under this logdir).
        """
        logdir = os.path.abspath(self._config.logdir)
        self.view.tensorboard(text=f"Starting TensorBoard for {logdir}…")
        try:
            # One start at a time: a profiled run's job opens TensorBoard while a person may open its section;
            # both started a server for the logdir (seen in the browser test). The second now reuses the first.
            with self._tensorboard_lock:
                return self._show_tensorboard(logdir, profile)
        except Exception as e:
            line = self.explain(e, "show_tensorboard")
            self.view.tensorboard(text=line, kind="error")
            self._say(line, "error")
            return None

    def _show_tensorboard(self, logdir: str, profile: Optional[bool]) -> Optional[str]:
        import atexit

        from tpukit.observe import tensorboard as tb
        from tpukit.ui import embed

        result = tb.start(logdir)
        if isinstance(result, tb.Failed):
            self.view.tensorboard(text=result.message, kind="error")
            return None
        if isinstance(result, tb.Launched):
            self._launched.append(result)
            # Stopped with the kernel: at a normal exit (Jupyter's restart or shut down) as at close(). A
            # killed kernel runs nothing; the next panel on the logdir reuses the server it left.
            atexit.register(tb.stop, result)
        self._tensorboard = result
        capture = self._latest_capture(logdir) if profile is not False else None
        url = tb.profile_url(result, run=capture) if capture else (
            tb.profile_url(result) if profile else result.url)
        self.view.tensorboard(embed.tensorboard(url, self.context, height=embed.HEIGHT))
        return url

    @property
    def tensorboard_started(self) -> bool:
        """Whether TensorBoard was shown (it starts when its section first opens)."""
        return self._tensorboard is not None

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

    def _tune_work(self, config: RunConfig):
        from tpukit.training import tuning

        runtime = self._matching_runtime(config) or self._connect(config)
        sink = self.view.progress_sink
        sink.waiting("Tuning the batch size: a few steps at each size…")
        inputs = self.inputs_for(config)

        def on_trial(trials, trying):  # each size as it goes: the table so far and the size being tried
            done = "; ".join(f"{t.batch_size}: {t.examples_per_sec:,.0f}/s" if t.examples_per_sec else
                             f"{t.batch_size}: {t.outcome}" for t in trials)
            sink.waiting(f"Tuning the batch size: trying {trying} per replica…" + (f" (so far {done})" if done else ""))

        result = tuning.tune_batch_size(config, runtime, model=inputs["model"], data=inputs["data"],
                                        on_trial=on_trial)
        self.view.tuning(result)
        self.config = self._config.replace(batch_size=result.recommended)
        sink.waiting(f"Tuned: tried {', '.join(str(t.batch_size) for t in result.trials)} per replica.")
        self._say(f"Batch size set to {result.recommended} per replica (tuned; the table says why).")
        return result

    def compare(self) -> List[Dict[str, Any]]:
        """The runs made in this kernel side by side: one row per run (also shown as a table and a chart)."""
        from tpukit.runs import records

        rows = records.compare(self._runs)
        self.render_runs(rows, chart=True)
        self.view.show_section("Runs")
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
        return self._start("check reproducibility", functools.partial(self._reproduce_work, run, config), wait,
                           config, self._runtime_for(run.to_dict()))

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
        model = result.__dict__.get("_model")
        if model is None:
            from tpukit.runs import store

            model = store.load(result.run_dir, model=self._object_for(result)).model
            result.attach_model(model)
        self._model = model
        where = f"panel.runs[{self._runs.index(result)}].model" if result in self._runs else "panel.model"
        self._say(f"The model of {os.path.basename(result.run_dir)} is in the kernel: panel.model (also {where}); "
                  "predict, evaluate or save it as any keras.Model.", "ok")
        return model

    @property
    def model(self):
        """The model last loaded with `load_model`, else the latest run's trained model (None before any run)."""
        if getattr(self, "_model", None) is not None:
            return self._model
        latest = next((r for r in reversed(self._runs) if r.__dict__.get("_model") is not None), None)
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
        self._say(f"Exported {os.path.basename(result.run_dir)} to {exported.keras_path} (float32; "
                  f"keras.saving.load_model opens it){beside}.", "ok")
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
        self._say(f"The next run starts from the weights of {os.path.basename(result.run_dir)} (init_from): set a "
                  "lower learning rate to fine-tune, then Train.", "ok")
        return self._config

    def _run_for_model(self, run):
        from tpukit.runs import records

        if run is None:
            found = next((r for r in reversed(self._runs) if _model_loads(r)), None)
            if found is None:
                raise NoRunError("No run with a model to load yet: train one first (a run keeps its model once it "
                                 "has trained a whole epoch).")
            return found
        if isinstance(run, int) and not isinstance(run, bool):
            if not -len(self._runs) <= run < len(self._runs):
                raise NoRunError(f"No run #{run} in this kernel: it has {len(self._runs)} run(s), panel.runs[0] to "
                                 f"panel.runs[{len(self._runs) - 1}]. Received: run={run}.")
            return self._runs[run]
        if isinstance(run, records.RunResult):
            return run
        return records.load(self._run_dir(run))

    def _object_for(self, result):
        """The model object or factory handed to this panel, for a run that trained it (config.json names it
        only by a label)."""
        name, model = self._inputs["model"]
        return model if result.config.get("model") == name else None

    def close(self) -> None:
        """Stop a run in progress and the TensorBoards this controller started."""
        from tpukit.observe import tensorboard as tb

        if self.running:
            self._stop.set()
            self.wait(60)
        for launched in self._launched:
            tb.stop(launched)
        self._launched.clear()

    # ---- read-only state -----------------------------------------------------
    @property
    def runs(self) -> list:
        """The RunResults made in this kernel, oldest first."""
        return list(self._runs)

    @property
    def runtime(self):
        """The connected Runtime, or None."""
        return self._runtime

    @property
    def progress(self):
        """The latest `tpukit.observe.progress.Progress` of the current or last run, or None."""
        return self.view.progress_sink.latest

    @property
    def running(self) -> bool:
        job = self.job
        return job is not None and job.active

    @property
    def message(self) -> str:
        """The latest status line, as text."""
        return self._message

    @property
    def profile_summary(self):
        """The latest ProfileSummary shown, or None."""
        return self._profile_summary

    @property
    def error_log(self) -> Optional[str]:
        """The file the latest unexpected error's traceback was written to, or None."""
        return self._error_log

    def text(self) -> str:
        """The state as a few lines of text, for front ends without widgets."""
        rt = self._runtime.describe() if self._runtime is not None else "Not connected."
        lines = [f"tpukit panel ({self.context})", rt, "config: " + self._config.to_json(indent=None)]
        if self._message:
            lines.append(self._message)
        lines += [r.summary().splitlines()[0] for r in self._runs]
        return "\n".join(lines)

    # ---- errors ----------------------------------------------------------------
    def explain(self, error: BaseException, action: str) -> str:
        """The one line to show for `error`. Unless it is tpukit's own (and says all), its traceback goes to
        the log file, which the line names."""
        if _is_tpukit_error(error) and error.__cause__ is None:
            return short_error(error)
        line = short_error(error, limit=200)
        path, problem = self._log_traceback(error, action)
        if path is None:
            return f"{line} (the traceback could not be written: {problem})"
        return f"{line} (full traceback in {path})"

    def fail(self, error: BaseException, action: str) -> None:
        """An action failed: its one line in the status."""
        self._say(self.explain(error, action), "error")

    def _log_traceback(self, error: BaseException, action: str) -> Tuple[Optional[str], str]:
        """Append `error`'s traceback to `<logdir>/tpukit-panel.log`, else the temp dir's; returns (path, problem)."""
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        entry = f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} panel.{action} ---\n{text}\n"
        problem = ""
        for folder in (os.path.abspath(self._config.logdir), tempfile.gettempdir()):
            path = os.path.join(folder, ERROR_LOG)
            try:
                os.makedirs(folder, exist_ok=True)
                with open(path, "a", encoding="utf-8") as f:
                    f.write(entry)
            except OSError as e:
                problem = short_error(e)
                continue
            self._error_log = path
            return path, ""
        return None, problem

    # ---- jobs: foreground in Colab, a thread elsewhere -------------------------
    def _ensure_idle(self, what: str) -> None:
        job = self.job
        if job is not None and job.active:
            raise PanelBusy(f"Cannot {what}: '{job.name}' is still going on. Wait for it, or press Stop.")

    def _start(self, name: str, work: Callable[[], Any], wait: bool, config: RunConfig, runtime=None):
        with self._lock:
            self._ensure_idle(name)
            job = self.job = _Job(name, work)
            self._stop = threading.Event()
        # Before the slow part, from the caller's thread (a click's handler): the last run's status goes, and
        # the page says at once what is happening. In Colab only the handler's own updates reach the page.
        self.view.show_section("Progress")
        if runtime is None and self._matching_runtime(config) is None:
            line = self._connecting_line(config)
            self.view.accelerator(text=line, connecting=True)
            self.view.progress_sink.waiting(f"{name[0].upper() + name[1:]}: waiting for the accelerator…")
        else:
            line = f"Starting {config.run_name}: building the model and the input pipeline…"
            self.view.progress_sink.waiting(line)
        self._say(line)
        if name != TUNE:  # the last tuning's table would sit under this job's lines as if it were about it
            self.view.tuning(None)
        self.refresh()
        if self.context == _context.COLAB:
            self._run(job)
            return job.result
        threading.Thread(target=self._run, args=(job,), name=f"tpukit-panel-{name}", daemon=True).start()
        if wait:
            job.done.wait()
            return job.result
        return None

    def _run(self, job: _Job) -> None:
        try:
            job.result = job.work()
        except KeyboardInterrupt:  # Colab's interrupt outside fit (fit itself ends the run as "stopped")
            job.error = f"{job.name} interrupted before training began; nothing was kept."
            self._say(job.error, "error")
            self.view.progress_sink.failed(job.error)
        except Exception as e:
            job.error = self.explain(e, job.name.replace(" ", "_"))
            self._say(job.error, "error")
            self.view.progress_sink.failed(job.error)
        finally:
            job.active = False
            self.refresh()
            job.done.set()

    def _connect(self, config: RunConfig):
        from tpukit.hardware import runtime as rt

        try:
            runtime = rt.connect(config.accelerator, backend=config.backend, tpu=config.tpu,
                                 replicas=config.replicas, deterministic=config.deterministic)
        except Exception as e:
            self.view.accelerator(self._runtime, text=short_error(e), kind="error")
            raise
        self.view.accelerator(runtime)
        if runtime is not self._runtime or self._runtime_key != _runtime_key(config):
            self._runtime, self._runtime_key = runtime, _runtime_key(config)
            self.view.connected(runtime)
            self.view.show_config(self._config)  # the settings may not fit this hardware: say so under the field
            self.propose(self._form_values())
        return runtime

    def _form_values(self) -> Dict[str, Any]:
        """The values the view holds (a widget view may hold refused ones); the config's own otherwise."""
        values = getattr(self.view, "values", None)
        return values() if values is not None else self._config.to_dict()

    def _connecting_line(self, config: RunConfig) -> str:
        """What an action that connects says at once: connecting, and loading the framework the first time."""
        from tpukit.hardware import backend

        line = ("Connecting: looking for a TPU, else GPUs, else the CPU…" if config.accelerator == "auto"
                else f"Connecting to the {config.accelerator.upper()}…")
        if backend.loaded() is None:
            framework = {"tensorflow": "TensorFlow", "jax": "JAX"}.get(config.backend, "TensorFlow or JAX")
            line += f" Loading {framework} (the first time in a kernel takes a while)…"
        return line

    def _runtime_for(self, recorded: dict):
        """The connected runtime if it is the kind and size a recorded run used (no reconnect, which
        on a TPU would initialize it again), else None."""
        rt = self._runtime
        if rt is not None and rt.kind == recorded.get("runtime", {}).get("kind") \
                and rt.replicas == recorded.get("config", {}).get("replicas"):
            return rt
        return None

    def _train_work(self, config: RunConfig, run_dir: Optional[str], runtime=None, epochs: Optional[int] = None):
        from tpukit import registry
        from tpukit.data import builtin as data
        from tpukit.training import api as training
        from tpukit.ui import progress

        runtime = runtime or self._connect(config)
        inputs = self.inputs_for(config)
        plan = training.plan(config, runtime.replicas, inputs.get("data"), inputs.get("validation_data"))
        total = (plan.steps_per_epoch or 1) * (epochs or config.epochs)  # unknown: the plot's axes grow
        entry = registry.lookup("dataset", config.dataset)
        # A fresh classifier's loss sets the plot's first height; the axes grow for anything else.
        first_loss = 1.1 * math.log(data.info(config.dataset).num_classes) if entry and entry.builtin else 1.0
        sink = self.view.progress_sink
        sink.start(config.run_name, self.context == _context.COLAB, total, first_loss)
        callback = progress.make_callback(sink, global_batch=plan.global_batch, clock=self.clock,
                                          earlier=_history(run_dir))
        if run_dir is None:
            result = training.train(config, runtime, callbacks=[callback], stop=self._stop, **inputs)
        else:
            result = training.resume(run_dir, runtime, callbacks=[callback], stop=self._stop, epochs=epochs,
                                     **inputs)
        if self.job is not None:
            self.job.stoppable = False  # trained: what is left (the record, the profile, TensorBoard) is not a run
        sink.finish(result)
        self._record(result)
        self.refresh()
        if result.profile_files:
            self._after_profiled_run(result)
        return result

    def _after_profiled_run(self, result) -> None:
        """The summary inline, and TensorBoard on the profile tab; a failure here never loses the run."""
        try:
            self.show_profile(result)
            self.view.show_section("Profile")
            if self._auto_tensorboard:
                self.show_tensorboard(profile=True)
        except Exception as e:
            self._say(f"{result.status}, but the profile could not be shown: {self.explain(e, 'show_profile')}",
                      "error")

    def _reproduce_work(self, original, config: RunConfig):
        rerun = self._train_work(config, None, self._runtime_for(original.to_dict()))
        check = Reproducibility(original, rerun)
        self.view.reproducibility(check.text(), check.reproducible)
        self._say(check.text(), "ok" if check.reproducible else "error")
        return check

    def _record(self, result) -> None:
        with self._lock:
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
        message = resumable.without_promise(result.message)
        if message:
            line += f". {message}"
        if result.status in ("stopped", "failed"):  # what Resume can do, as the button shows it
            line += f". {resumable.check(result.run_dir).reason}"
        self._say(line, kind)
        self.render_runs()

    # ---- what the view shows -----------------------------------------------------
    def _say(self, text: str, kind: str = "info") -> None:
        self._message = text
        self.view.status(text, kind)

    def render_runs(self, rows=None, chart: bool = False) -> None:
        """The runs table: one row per run, with a note (why it ended; "(resumable)" when Resume would work)."""
        from tpukit.runs import records

        rows = records.compare(self._runs) if rows is None else rows
        notes = []
        for i, run in enumerate(self._runs):
            note = resumable.without_promise(run.message)
            if run.status != "completed" and resumable.check(run.run_dir).ok:
                note += " (resumable)"
            loads = _model_loads(run)
            if i < len(rows):
                rows[i] = {**rows[i], "model_loads": loads}  # the Runs section's run picker says it too
            if not loads:
                note += " (no model to load: it kept no whole epoch)"
            notes.append(note.strip())
        self.view.show_runs(rows, notes, chart)

    def controls(self) -> Controls:
        """Which actions are off now, and why Train and Resume are off."""
        busy = self.running
        runs = self._runs
        target = None if busy else self.resume_target()
        disabled = {
            "connect": busy,
            "train": busy or bool(self._invalid),
            "stop": not busy or not self.job.stoppable,
            "resume": busy or not target.ok,
            "profile": False,
            "tune": busy or bool(self._invalid),
            "tensorboard": False,
            "compare": not runs,
            "reproduce": busy or not any(r.status == "completed" and r.fingerprint for r in runs),
            "load_model": not runs, "export": not runs, "start_from": busy or not runs,
        }
        why = f"'{self.job.name}' is going on: wait for it, or press Stop." if busy else ""
        train_off = self.train_off() if self._invalid else ""
        resume_tip = ("Resume is off: " + why) if busy else (
            f"{os.path.basename(target.run_dir)}: {target.reason}" if target.run_dir else target.reason)
        return Controls(disabled, train_off, train_off or ("Train is off: " + why if busy else ""), resume_tip)

    def refresh(self) -> None:
        """Tell the view which actions are on."""
        self.view.controls(self.controls())

    def train_off(self) -> str:
        """Why Train is off while the settings have problems: each refused field's sentence."""
        return "Train is off: " + " ".join(self._invalid.values())

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

    # ---- helpers ---------------------------------------------------------------
    def inputs_for(self, config: RunConfig) -> Dict[str, Any]:
        """The objects handed over, for a config that still names them (the settings may have moved on)."""
        name, model = self._inputs["model"]
        dataset, data = self._inputs["data"]
        out = {"model": model if config.model == name else None, "data": data if config.dataset == dataset else None}
        if out["data"] is not None:
            out.update(validation_data=self._inputs["validation_data"], test_data=self._inputs["test_data"])
        return out

    def _default_window(self) -> Tuple[int, int]:
        """A few steps after warm-up that fit in the run: 10-14 when the run is long enough."""
        from tpukit.training import api as training

        config = self._config
        inputs = self.inputs_for(config)
        plan = training.plan(config, self._replicas(config), inputs.get("data"), inputs.get("validation_data"))
        total = (plan.steps_per_epoch or 1) * config.epochs
        start = min(10, total // 4)
        return start, max(start, min(start + 4, total - 1))

    def _run_dir(self, run) -> str:
        """A run directory given as a path or as a name under the logdir; RunDirError if it is not one."""
        from tpukit.runs import records

        path = os.path.expanduser(os.fspath(run))
        under_logdir = os.path.join(self._config.logdir, path)
        if not os.path.isdir(path) and not os.path.isabs(path) and os.path.isdir(under_logdir):
            path = under_logdir
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise records.RunDirError(
                f"{run!s} is not a tpukit run directory (no config.json): pass a run's directory, "
                f"or the name of one under {os.path.abspath(self._config.logdir)}.")
        return path

    def _latest_capture(self, logdir: str) -> Optional[str]:
        """The newest capture of this kernel's runs under `logdir` (TensorBoard's profile tab opens on it)."""
        for run in reversed(self._runs):
            for path in run.profile_files:
                if os.path.abspath(path).startswith(logdir + os.sep):
                    return path
        return None


# ---- module helpers ---------------------------------------------------------------
def valid(values: dict) -> RunConfig:
    """RunConfig.from_dict, without the padding warning (the settings show the advice beside the batch)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaddingWarning)
        return RunConfig.from_dict(values)


def _history(run_dir: Optional[str]) -> Optional[Dict[str, List[float]]]:
    """A resumed run's per-epoch history, so its curves go on where they were (None: a new run, or unreadable)."""
    if run_dir is None:
        return None
    from tpukit.runs import records

    try:
        return records.load(run_dir).history
    except Exception:  # noqa: BLE001 - the curves start empty; resume() itself says what is wrong
        return None


def _model_loads(run) -> bool:
    """Whether a run's trained model can come into the kernel: kept in memory, or weights in its directory."""
    if run.__dict__.get("_model") is not None:
        return True
    from tpukit.runs import saving

    try:
        saving.weights_file(run.run_dir)
        return True
    except Exception:  # noqa: BLE001 - a run without weights, or a damaged record: it does not load
        return False


def _runtime_key(config: RunConfig) -> Tuple:
    return (config.accelerator, config.backend, config.tpu, config.replicas, config.deterministic)


def _is_tpukit_error(error: BaseException) -> bool:
    """Raised as one of tpukit's own error types (ConfigError, ConnectError, ...), whose message says all."""
    return type(error).__module__.split(".")[0] == "tpukit"


def short_error(error: BaseException, limit: int = 300) -> str:
    from tpukit.ui import tables

    return tables.short_error(error, limit=limit)
