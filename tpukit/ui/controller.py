"""The panel's logic without widgets: one RunConfig, the runtime, the runs, and the actions that use them.

    from tpukit.ui import Controller
    c = Controller(tpukit.RunConfig(dataset="digits", model="mlp", epochs=2))
    result = c.train(wait=True)

The controller holds the state (config, runtime, runs, the job going on) and
does every action by calling the engine with the config's own arguments:
`runtime.connect`, `training.train` / `resume`, `tuning.tune_batch_size`,
`profiling.summarize`, `tensorboard.start`, `records.compare`. It never imports
ipywidgets. What it has to show goes to a `View` (`tpukit.ui.state`): one method
per thing shown. The base `View` shows nothing (a script's or a test's view);
`tpukit.ui.panel.Panel` is the widget view, and its buttons call the methods
here, so a test that drives the controller does what a click does.

This module keeps the core: the state, Connect, the status line and which buttons
are on. The actions are mixed in from one module per part of the panel:
`actions_settings` (the config, and settings as typed: taken or refused),
`actions_train` (Train, Resume, Stop, Tune), `actions_runs` (the Runs section)
and `actions_profile` (Profile, TensorBoard). Where a job runs (a thread, or the
foreground) and the log of its failures are `tpukit.ui.jobs`.

Where training runs depends on the front end (`tpukit.ui.context`): in Colab,
widget updates from a background thread do not reach the page, so a run goes
in the foreground of the call and Stop is Colab's interrupt (the engine keeps
the run as "stopped"). Elsewhere a run goes in a thread and `stop()` ends it
after the current step.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from tpukit.ui import context as _context
from tpukit.config import RunConfig
from tpukit.ui.actions_profile import ProfileActions
from tpukit.ui.actions_runs import RunsActions
from tpukit.ui.actions_settings import SettingsActions
from tpukit.ui.actions_train import TrainActions
from tpukit.ui.jobs import ErrorLog, Runner, short_error

# View and NoRunError are imported from here too (tests, scripts): the names of `tpukit.ui.state`.
from tpukit.ui.state import KERNEL_RUNS, Controls, NoRunError, View, runtime_key, valid  # noqa: F401


class Controller(SettingsActions, TrainActions, RunsActions, ProfileActions):
    """One RunConfig, the runtime it connects, the runs it makes, and the actions on them; no widgets.

    Args:
        config: the starting RunConfig (or a dict of its fields); default `RunConfig()`.
        model, data, validation_data, test_data: the user's own, as `tpukit.train` takes them.
        view: what shows the state (default: a `View` that shows nothing).
        context: "colab", "jupyter", "vscode" or "none"; default `tpukit.ui.context.detect()`.
        clock: seconds, for progress rates and the redraw schedule (default `time.perf_counter`).
        runs: the list that collects RunResults (default: one list for the kernel, `KERNEL_RUNS`).
        auto_tensorboard: open TensorBoard on the profile tab after a profiled run.
    """

    def __init__(
        self,
        config=None,
        *,
        model=None,
        data=None,
        validation_data=None,
        test_data=None,
        view: Optional[View] = None,
        context: Optional[str] = None,
        clock: Callable[[], float] = time.perf_counter,
        runs: Optional[list] = None,
        auto_tensorboard: bool = True,
    ):
        from tpukit import registry

        if isinstance(config, dict):
            config = valid(config)
        elif config is None:
            config = valid({})
        elif not isinstance(config, RunConfig):
            raise TypeError(f"Expected a RunConfig, a dict of its fields or None. Received: config={config!r}")
        config, model, data = registry.with_labels(config, model, data)
        # The user's own model and data (objects), used while the config still names them.
        self._inputs = {
            "model": (config.model, model),
            "data": (config.dataset, data),
            "validation_data": validation_data,
            "test_data": test_data,
        }
        self.context = context or _context.detect()
        if self.context not in _context.CONTEXTS:
            raise ValueError(f"Unknown context {self.context!r}. Expected one of {', '.join(_context.CONTEXTS)}.")
        self.view = view or View()
        self.clock = clock
        self._runs = KERNEL_RUNS if runs is None else runs
        self._runs_lock = threading.Lock()
        self._auto_tensorboard = auto_tensorboard
        self._config = config
        self._runtime = None
        self._runtime_key: Optional[tuple] = None
        self._unsettled = False  # connected to new hardware, and the settings not yet checked against it
        self._invalid: Dict[str, str] = {}  # field (or "" for none) -> a sentence: why the settings are refused
        self._errors = ErrorLog()
        self._jobs = Runner(self.explain, self._job_failed, self.refresh)
        self._run_status = None  # the phase of the run going on, as the status line says it (`tpukit.ui.phases`)
        self._message = ""
        self._profile_summary = None
        self._profile_once = None  # the window "Profile next run" set: the next Train takes it, once
        self._tensorboard = None
        self._tensorboard_lock = threading.Lock()
        self._launched: List[Any] = []  # TensorBoards this controller started (only these are stopped on close)
        self._model = None  # the model load_model brought into the kernel

    def start(self) -> None:
        """Show the starting state (the view is ready)."""
        self._commit(self._config)
        self.render_runs()

    # ---- the accelerator ---------------------------------------------------------
    def connect(self):
        """Connect to the accelerator the config asks for; returns the Runtime, or None (the status says why)."""
        self._jobs.ensure_idle("connect")
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
        self._say(
            f"Connected: {runtime.kind.upper()}, {runtime.replicas} replica"
            + ("s" if runtime.replicas != 1 else "")
            + f", {runtime.backend}.",
            "ok",
        )
        return runtime

    def _connect(self, config: RunConfig, *, recheck: bool = True):
        """Connect for `config` and show the accelerator. New hardware may not fit the settings: Connect checks
        them against it at once (`recheck`); a job that connects to train or tune leaves the form as it is until
        it ends (`_settle_settings`), so the settings never move under a run that trains what was clicked."""
        from tpukit.hardware.connect import connect_for

        key = runtime_key(config)
        try:
            runtime = connect_for(config)
        except Exception as e:
            self.view.accelerator(self._runtime, text=short_error(e), kind="error")
            raise
        self.view.accelerator(runtime)
        if runtime is not self._runtime or self._runtime_key != key:
            self._runtime, self._runtime_key = runtime, key
            self.view.connected(runtime)
            self._unsettled = True
        if recheck:
            self._settle_settings()
        return runtime

    def _settle_settings(self) -> None:
        """After connecting to new hardware: the settings shown again, each that does not fit it refused under
        its field (nothing if they were checked since)."""
        if self._unsettled:
            self._unsettled = False
            self.view.show_config(self._config)
            self.propose(self._form_values())

    def _connecting_line(self, config: RunConfig) -> str:
        """What an action that connects says at once: connecting, and loading the framework the first time."""
        from tpukit import backend

        line = (
            "Connecting: looking for a TPU, else GPUs, else the CPU…"
            if config.accelerator == "auto"
            else f"Connecting to the {config.accelerator.upper()}…"
        )
        if backend.loaded() is None:
            name = config.backend if config.backend != "auto" else backend.from_environment()
            framework = {"tensorflow": "TensorFlow", "jax": "JAX"}.get(name, "TensorFlow or JAX")
            line += f" Loading {framework} (the first time in a kernel takes a while)…"
        return line

    def _runtime_for(self, recorded: dict):
        """The connected runtime if it is the kind and size a recorded run used (no reconnect, which
        on a TPU would initialize it again), else None."""
        rt = self._runtime
        if (
            rt is not None
            and rt.kind == recorded.get("runtime", {}).get("kind")
            and rt.replicas == recorded.get("config", {}).get("replicas")
        ):
            return rt
        return None

    def close(self) -> None:
        """Stop a run in progress and the TensorBoards this controller started."""
        from tpukit.observe import tensorboard as tb

        if self.running:
            self._jobs.stop_event.set()
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
        """The latest `tpukit.observe.meter.Progress` of the current or last run, or None."""
        return self.view.progress_sink.latest

    @property
    def job(self):
        """The current or last job (`tpukit.ui.jobs.Job`: its name, result, error), or None."""
        return self._jobs.job

    @property
    def running(self) -> bool:
        return self._jobs.running

    @property
    def message(self) -> str:
        """The latest status line, as text."""
        return self._message

    @property
    def error_log(self) -> Optional[str]:
        """The file the latest unexpected error's traceback was written to, or None."""
        return self._errors.path

    def text(self) -> str:
        """The state as a few lines of text, for front ends without widgets."""
        rt = self._runtime.describe() if self._runtime is not None else "Not connected."
        lines = [f"tpukit panel ({self.context})", rt, "config: " + self._config.to_json(indent=None)]
        if self._message:
            lines.append(self._message)
        lines += [r.summary().splitlines()[0] for r in self._runs]
        return "\n".join(lines)

    # ---- what the view shows -----------------------------------------------------
    def explain(self, error: BaseException, action: str) -> str:
        """The one line to show for `error`. Unless it is tpukit's own (and says all), its traceback goes to
        the log file (`tpukit.ui.jobs.ERROR_LOG` in the logdir), which the line names."""
        return self._errors.explain(error, action, self._config.logdir)

    def fail(self, error: BaseException, action: str) -> None:
        """An action failed: its one line in the status."""
        self._say(self.explain(error, action), "error")

    def _job_failed(self, line: str) -> None:
        self._say(line, "error")
        self.view.progress_sink.failed(line)

    def _say(self, text: str, kind: str = "info") -> None:
        self._message = text
        self.view.status(text, kind)

    def controls(self) -> Controls:
        """Which actions are off now, and why Train and Resume are off."""
        from tpukit.runs import records

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
            "compare": not runs and not records.has_runs(self._config.logdir),  # the logdir's others count too
            "reproduce": busy or not any(r.status == "completed" and r.fingerprint for r in runs),
            "load_model": not runs,
            "export": not runs,
            "start_from": busy or not runs,
        }
        why = f"'{self.job.name}' is going on: wait for it, or press Stop." if busy else ""
        train_off = self.train_off() if self._invalid else ""
        resume_tip = (
            ("Resume is off: " + why)
            if busy
            else (f"{os.path.basename(target.run_dir)}: {target.reason}" if target.run_dir else target.reason)
        )
        return Controls(disabled, train_off, train_off or ("Train is off: " + why if busy else ""), resume_tip)

    def refresh(self) -> None:
        """Tell the view which actions are on."""
        self.view.controls(self.controls())
