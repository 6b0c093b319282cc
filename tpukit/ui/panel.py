"""The tpukit panel: widgets that show a `Controller` (one RunConfig plus the engine calls that use it).

    import tpukit
    panel = tpukit.panel(tpukit.RunConfig(dataset="digits", model="mlp", epochs=2))
    result = panel.train(wait=True)

The panel is a view: the state and every action live in
`tpukit.ui.controller.Controller`, which knows nothing of widgets, and the
panel renders what the controller shows (the `View` methods) with ipywidgets.
`panel.config` is the single source of truth: assigning it updates every
widget, and a widget change updates it once RunConfig accepts the value.
Until then every field RunConfig refuses says why in a sentence under it
(`panel.problems`), and Train is off with the reason beside it.
Every button calls a public method (`connect`, `train`, `stop`, `resume`,
`capture_profile`, `show_tensorboard`, `compare`, `check_reproducibility`,
`load_model`, `export`, `start_from`),
so a test or a notebook cell does exactly what a click does. Failures show
as one short line in the panel and leave it usable; no traceback reaches
the cell. tpukit's own errors (ConfigError, ConnectError, RunDirError, ...)
say all there is in that line; any other exception, and the cause of a tpukit
error raised from one, is written with its full traceback to
`<logdir>/tpukit-panel.log` (the temp dir when the logdir cannot be written),
and the line names that file.

A click shows its state at once ("Connecting…", "loading TensorFlow…"),
set by the click's handler itself before the slow work starts; a new run
clears the last run's status line. Resume is on exactly when
`tpukit.resume()` would continue a run (`tpukit.ui.resumable`).

Importing this module is cheap: ipywidgets loads when a Panel is built,
TensorFlow when it connects or trains.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from tpukit.ui import context as _context
from tpukit.config import RunConfig
from tpukit.ui import layout
from tpukit.ui.controller import Controller
from tpukit.ui.state import Controls, View


def panel(config: Optional[RunConfig] = None, *, model=None, data=None, display: bool = True, **options) -> "Panel":
    """Build the panel for `config` (default `RunConfig()`) and display it.

    Args:
        config: the run to start from: a RunConfig or a dict of its fields.
        model: your own model: a factory (a callable returning a keras.Model) or a keras.Model,
            as `tpukit.train(model=...)` takes it. The model dropdown shows its name.
        data: your own data, as `tpukit.train(data=...)` takes it (arrays, a tf.data.Dataset, a loader).
        display: show the panel in the notebook now (False: show it later with
            `panel.display()` or by ending a cell with `panel`).
        **options: passed to `Panel` (context, display_fn, clock, runs, auto_tensorboard).

    Returns:
        The `Panel`.
    """
    built = Panel(config, model=model, data=data, **options)
    if display:
        built.display()
    return built


class Panel(View):
    """Widgets over a `Controller`: the settings, the buttons, and what the engine reports.

    Args:
        config: the starting RunConfig (or a dict of its fields); default `RunConfig()`.
        context: "colab", "jupyter", "vscode" or "none"; default `tpukit.ui.context.detect()`.
        display_fn: shows a display object (default `IPython.display.display`).
        clock: seconds, for progress rates and the redraw schedule (default `time.perf_counter`).
        runs: the list that collects RunResults (default: one list for the kernel, `KERNEL_RUNS`).
        auto_tensorboard: open TensorBoard on the profile tab after a profiled run.

    Attributes:
        controller: the state and the actions (no widgets); every method below calls it.
        widget: the root widget. `buttons`, `form.widgets` and `views` hold the parts.
    """

    def __init__(
        self,
        config=None,
        *,
        model=None,
        data=None,
        validation_data=None,
        test_data=None,
        context: Optional[str] = None,
        display_fn: Optional[Callable] = None,
        **options,
    ):
        super().__init__()
        self.controller = Controller(
            config,
            model=model,
            data=data,
            validation_data=validation_data,
            test_data=test_data,
            view=self,
            context=context,
            **options,
        )
        self.context = self.controller.context
        self._display_fn = display_fn
        self._shown = False  # displayed once: a cell ending with `panel` then names it instead of a second copy
        self._config = self.controller.config  # what the form shows first
        layout.build(self)
        self.progress_sink = self._progress_view  # the Progress section's widgets get the run's progress
        self.controller.start()

    # ---- the controller's state and actions: each button calls one --------------
    @property
    def config(self) -> RunConfig:
        """The current RunConfig. Assign a RunConfig, or a dict of fields to change."""
        return self.controller.config

    @config.setter
    def config(self, value) -> None:
        self.controller.config = value

    @property
    def problems(self) -> Dict[str, str]:
        """Why the form's values are refused: {field: sentence} ("" for a problem no field names); empty if none."""
        return self.controller.problems

    @property
    def runs(self) -> list:
        """The RunResults made in this kernel, oldest first."""
        return self.controller.runs

    @property
    def runtime(self):
        """The connected Runtime, or None."""
        return self.controller.runtime

    @property
    def progress(self):
        """The latest `tpukit.observe.meter.Progress` of the current or last run, or None."""
        return self.controller.progress

    @property
    def running(self) -> bool:
        return self.controller.running

    @property
    def message(self) -> str:
        """The panel's latest status line, as text."""
        return self.controller.message

    @property
    def profile_summary(self):
        """The latest ProfileSummary shown, or None."""
        return self.controller.profile_summary

    @property
    def error_log(self) -> Optional[str]:
        """The file the latest unexpected error's traceback was written to, or None."""
        return self.controller.error_log

    def connect(self):
        """Connect to the accelerator the config asks for (`Controller.connect`)."""
        return self.controller.connect()

    def train(self, wait: bool = False):
        """Train the current config with live progress (`Controller.train`)."""
        return self.controller.train(wait)

    def resume(self, run=None, wait: bool = False, epochs: Optional[int] = None):
        """Continue a stopped run, or extend a completed one (`Controller.resume`)."""
        return self.controller.resume(run, wait, epochs)

    def stop(self) -> bool:
        """End the run after its current step, kept as "stopped" (`Controller.stop`)."""
        return self.controller.stop()

    def wait(self, timeout: Optional[float] = None):
        """Wait for the current action to end; returns its result (`Controller.wait`)."""
        return self.controller.wait(timeout)

    def capture_profile(self, window: Optional[Tuple[int, int]] = None) -> Tuple[int, int]:
        """Profile the next run (`Controller.capture_profile`)."""
        return self.controller.capture_profile(window)

    def show_profile(self, run=None):
        """Summarize a run's capture inline (`Controller.show_profile`)."""
        return self.controller.show_profile(run)

    def show_tensorboard(self, profile: Optional[bool] = None) -> Optional[str]:
        """TensorBoard inline, on 127.0.0.1 (`Controller.show_tensorboard`)."""
        return self.controller.show_tensorboard(profile)

    def tune_batch_size(self, wait: bool = False):
        """Find the batch size and set it (`Controller.tune_batch_size`)."""
        return self.controller.tune_batch_size(wait)

    def load_model(self, run=None):
        """Bring a run's trained model into the kernel (`Controller.load_model`); also `panel.model`."""
        return self.controller.load_model(run)

    def export(self, run=None, path=None):
        """Write a run's model as a float32 .keras file (`Controller.export`)."""
        return self.controller.export(run, path)

    def start_from(self, run=None):
        """Start the next run from a run's weights (`Controller.start_from`; "" for fresh weights)."""
        return self.controller.start_from(run)

    @property
    def model(self):
        """The model last loaded, else the latest run's trained model (a keras.Model), or None."""
        return self.controller.model

    def compare(self, logdir: bool = True) -> List[Dict[str, Any]]:
        """This kernel's runs and (with `logdir`) the logdir's others side by side, saying what differed
        (`Controller.compare`)."""
        return self.controller.compare(logdir)

    def check_reproducibility(self, run=None, wait: bool = False):
        """Rerun a run and compare fingerprints (`Controller.check_reproducibility`)."""
        return self.controller.check_reproducibility(run, wait)

    # ---- showing the panel ---------------------------------------------------
    def display(self) -> None:
        """Show the panel in the notebook (as text where there is no notebook); called again, another view of the
        same panel (ipywidgets keeps them in step)."""
        if self.context == _context.NONE and self._display_fn is None:
            print(self.text())
        else:
            self._show(self.widget)
            self._shown = True

    def _ipython_display_(self):
        """A cell that ends with `panel`: the panel, unless it is already on the page (`tpukit.panel()` showed
        it), where a second copy would only look like a second panel; then one line says where it is."""
        if not self._shown:
            self.display()
        else:
            print(f"{self!r}: shown above (panel.display() shows it here too).")

    def text(self) -> str:
        """The panel as a few lines of text, for front ends without widgets."""
        return self.controller.text()

    def __repr__(self) -> str:
        c = self.controller
        state = c.job.name if c.running else "idle"
        connected = c.runtime.kind if c.runtime is not None else "not connected"
        return f"<tpukit Panel: {self.context}, {connected}, {len(c.runs)} runs, {state}>"

    def close(self) -> None:
        """Stop a run in progress, stop the TensorBoards this panel started, and close the widgets."""
        self.controller.close()
        for widget in self._all_widgets:
            widget.close()

    # ---- sections: one shown at a time below the actions ----------------------
    def show_section(self, name: str) -> None:
        """Show one section below the actions: Settings, Progress, Runs, Profile, TensorBoard or Accelerator."""
        if name not in self.sections:
            raise ValueError(f"Unknown section {name!r}. Choices: {', '.join(self.sections)}.")
        self.picker.value = name  # _on_section does the rest

    @property
    def section(self) -> str:
        """The section shown below the actions."""
        return self.picker.value

    def _on_section(self, change) -> None:
        for name, box in self.sections.items():
            box.layout.display = "" if name == change["new"] else "none"
        if change["new"] == "TensorBoard" and not self.controller.tensorboard_started:  # starts when first opened
            try:
                self.show_tensorboard()
            except Exception as e:  # show_tensorboard says its own failures; anything else, in one line
                self.controller.fail(e, "show_tensorboard")

    # ---- button handlers: one line each, the work is in the controller -------
    def _on_connect(self, button):
        self._handle(button, self.connect)

    def _on_train(self, button):
        self._handle(button, self.train)

    def _on_stop(self, button):
        self._handle(button, self.stop)

    def _on_resume(self, button):
        self._handle(button, self.resume)

    def _on_profile(self, button):
        self._handle(button, self.capture_profile)

    def _on_tensorboard(self, button):
        self._handle(button, self.show_tensorboard)

    def _on_tune(self, button):
        self._handle(button, self.tune_batch_size)

    def _on_compare(self, button):
        self._handle(button, self.compare)

    def _on_reproduce(self, button):
        self._handle(button, self.check_reproducibility)

    def _on_load_model(self, button):
        self._handle(button, lambda: self.load_model(self._picked()))

    def _on_export(self, button):
        self._handle(button, lambda: self.export(self._picked()))

    def _on_start_from(self, button):
        self._handle(button, lambda: self.start_from(self._picked()))

    def _picked(self):
        """The run chosen in the Runs section (its index in `runs`), or None for the latest."""
        return None if self.run_picker.value < 0 else self.run_picker.value

    def _handle(self, button, action) -> None:
        """Run a click: the button is disabled meanwhile; a failure becomes a short message; buttons are reset after."""
        button.disabled = True
        try:
            action()
        except Exception as e:
            self.controller.fail(e, getattr(action, "__name__", "action"))
        finally:
            self.controller.refresh()

    def _form_changed(self) -> None:
        """A person changed a widget: the controller takes the values, or says why not under each field."""
        self.controller.propose(self.form.values())

    def values(self) -> Dict[str, Any]:
        """The settings as the widgets hold them (a refused value included)."""
        return self.form.values()

    # ---- the View: what the controller shows, as widgets --------------------------
    def status(self, text: str, kind: str = "info") -> None:
        self.views["message"].value = _tables().message(text, kind)

    def accelerator(self, runtime=None, text: str = "", kind: str = "info", connecting: bool = False) -> None:
        tables = _tables()
        self.views["accelerator"].value = tables.message(text, kind) if text else tables.runtime(runtime)
        self.views["chip"].value = tables.chip(None, "connecting…") if connecting else tables.chip(runtime)

    def connected(self, runtime) -> None:
        self.buttons["connect"].description = "Reconnect"

    def show_config(self, config: RunConfig) -> None:
        self.form.show(config)

    def explain(self, config: RunConfig, runtime, stale: bool) -> None:
        self.form.explain(config, runtime, stale=stale)

    def show_problems(self, problems: Dict[str, str]) -> None:
        self.form.show_errors(problems)

    def controls(self, controls: Controls) -> None:
        for name, disabled in controls.disabled.items():
            if self.buttons[name].disabled != disabled:
                self.buttons[name].disabled = disabled
        self._tip("train", controls.train_tip or layout.TIPS["train"])
        self.views["train_off"].value = _tables().message(controls.train_off, "error")
        self._tip("resume", controls.resume_tip)

    def profile(self, summary=None, text: str = "", kind: str = "info") -> None:
        if summary is None:
            self.views["profile"].value = _tables().message(text, kind)
            return
        self.views["profile"].value = _tables().profile(summary)
        self._show_image("profile_chart", _plots().profile_chart(summary))

    def tensorboard(self, shown=None, text: str = "", kind: str = "info") -> None:
        if shown is None:
            self.views["tensorboard"].value = _tables().message(text, kind)
            return
        self.views["tensorboard"].value = shown.html
        out = self.views["tensorboard_frame"]
        out.outputs = ()
        if shown.javascript:
            from IPython.display import Javascript

            with out:
                self._show(Javascript(shown.javascript))

    def tuning(self, result) -> None:
        if result is None:
            self.views["tuning"].value = ""
            self.views["tuning_chart"].layout.display = "none"
            return
        self.views["tuning"].value = _tables().tuning(result)
        self._show_image("tuning_chart", _plots().tuning_chart(result))

    def show_runs(self, rows: List[dict], notes: List[str]) -> None:
        self.views["runs"].value = _tables().runs(rows, notes)
        options = [(f"#{i + 1} {row.get('run')} · {_model_word(row)}", i) for i, row in enumerate(rows)] or [
            ("no run yet", -1)
        ]
        if list(self.run_picker.options) != options:
            self.run_picker.options = options
            self.run_picker.value = options[-1][1]  # a new run: the latest is chosen

    def show_compare(self, rows: List[dict], shown: str, differed: List[str]) -> None:
        self.views["runs_compared"].value = _tables().compared(shown, differed)
        if rows:
            self._show_image("runs_chart", _plots().runs_chart(rows))

    def reproducibility(self, text: str, ok: bool) -> None:
        self.views["reproducibility"].value = _tables().message(text, "ok" if ok else "error")

    # ---- helpers ---------------------------------------------------------------
    def _show(self, obj) -> None:
        show = self._display_fn
        if show is None:
            from IPython.display import display as show
        show(obj)

    def _show_image(self, name: str, png: bytes) -> None:
        image = self.views[name]
        image.value = png
        image.layout.width, image.layout.max_width, image.layout.display = _plots().css_width(png), "100%", ""

    def _tip(self, button: str, text: str) -> None:
        if self.buttons[button].tooltip != text:
            self.buttons[button].tooltip = text


def _tables():
    from tpukit.ui import tables

    return tables


def _plots():
    from tpukit.ui import plots

    return plots


def _model_word(row: dict) -> str:
    """The run picker's word on a run's model: saved (tpukit.load brings it back), in this kernel only, or none."""
    if row.get("model_saved"):
        return "model saved"
    return "model in this kernel" if row.get("model_loads") else "no model"
