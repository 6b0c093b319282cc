"""The panel's layout: which widgets exist and where they sit. No behaviour; `Panel` holds that.

Only widgets and traits that ipywidgets 7 (Colab) and 8 both have.
"""

from __future__ import annotations

from tpukit.ui import context as _context
from tpukit.ui import tables

BUTTONS = (
    ("connect", "Connect", "", "Find the accelerator: TPU, else GPUs, else the CPU"),
    ("train", "Train", "success", "Train the current settings"),
    ("stop", "Stop", "danger", "End the run after the current step; it is kept and can be resumed"),
    ("resume", "Resume", "", "Continue the latest stopped run from its last whole epoch"),
    ("profile", "Profile next run", "", "Capture the profile window's steps in the next run"),
    ("tune", "Tune batch size", "", "Try growing batch sizes on this model and data; set the fastest that fits"),
    ("tensorboard", "Refresh TensorBoard", "", "Start or reload TensorBoard for the runs directory"),
    ("compare", "Compare runs", "", "Table and chart of this kernel's runs and the logdir's others"),
    ("reproduce", "Check reproducibility", "", "Rerun the latest completed run and compare fingerprints"),
    ("load_model", "Load model", "", "Bring the chosen run's trained model into the kernel: panel.model"),
    ("export", "Export .keras", "", "Write the chosen run's model as a float32 .keras file under <logdir>/exports"),
    ("start_from", "Start next run from it", "", "The next run starts from the chosen run's weights (init_from)"),
)
TIPS = {name: tip for name, _, _, tip in BUTTONS}
# The sections below the actions, one shown at a time; the settings first.
SECTIONS = ("Settings", "Progress", "Runs", "Profile", "TensorBoard", "Accelerator")
SECTION_TIPS = (
    "The run's settings (a RunConfig)",
    "Live curves of the current run, and batch-size tuning",
    "The runs of this kernel: compare, check reproducibility, load or export a model",
    "The profile capture's summary",
    "TensorBoard inline (starts when opened)",
    "What Connect found, and why it skipped the rest",
)
# Settings in two columns: what a run is about, then where and how it runs.
CORE_FIELDS = (
    "dataset",
    "model",
    "lora_rank",
    "sequence_length",
    "quantize",
    "method",
    "precision",
    "batch_size",
    "epochs",
    "steps_per_epoch",
    "learning_rate",
    "optimizer",
)
ADVANCED_FIELDS = (
    "accelerator",
    "backend",
    "replicas",
    "tpu",
    "steps_per_execution",
    "deterministic",
    "seed",
    "profile",
    "logdir",
    "name",
)

# When the front end loses the kernel, ipywidgets marks every widget view `jupyter-widgets-disconnected` (the
# widget manager sets comm_live false: JupyterLab/Notebook 7 on a restart, classic Notebook on a kill or restart,
# and any page showing saved widget state with no kernel). The kernel cannot say it has died, so the page does:
# this rule puts a line at the top of the panel and greys its controls, in place of ipywidgets' own broken-link
# icon on every widget. Elsewhere it never matches. Seen in Voila (ipywidgets 8): a SIGKILLed kernel shows it in 1 s.
ROOT_CLASS = "tpukit-panel"
KERNEL_GONE = "Kernel not connected: this panel no longer reaches Python. Run its cell again once the kernel is back."
STYLE = f"""<style>
.{ROOT_CLASS}.jupyter-widgets-disconnected::after {{
  content: "{KERNEL_GONE}"; order: -1; display: block; padding: 4px 8px; margin-bottom: 4px;
  color: #fff; background: #b00020; font-weight: bold; }}
.{ROOT_CLASS}.jupyter-widgets-disconnected button, .{ROOT_CLASS}.jupyter-widgets-disconnected input,
.{ROOT_CLASS}.jupyter-widgets-disconnected select {{ pointer-events: none; opacity: 0.45; }}
.{ROOT_CLASS}.jupyter-widgets-disconnected::before,
.{ROOT_CLASS} .jupyter-widgets-disconnected::before {{ display: none; }}
.{ROOT_CLASS} .tpukit-section-profile td:last-child,
.{ROOT_CLASS} .tpukit-section-runs td:last-child {{ overflow-wrap: anywhere; }}
</style>"""


def build(p) -> None:
    """Make panel `p`'s widgets: p.form, p.buttons (wired to p._on_<name>), p.views, p.widget."""
    widgets = _widgets()
    from tpukit.ui import form as _form
    from tpukit.ui import progress

    p.form = _form.Form(p._config, p._form_changed)
    p.buttons = _buttons(p, widgets)
    p.views = _views(widgets)
    p.run_picker = _run_picker(widgets)
    p._progress_view = progress.ProgressView(p.views["progress"], p.views["bar"], p.views["curves"])
    p.views["progress"].add_class("tpukit-progress-line")
    top = _top(p, widgets)
    p.sections = _sections(p, widgets)
    p.picker = _section_picker(p, widgets)
    p.widget = widgets.VBox([top, p.picker, *p.sections.values()])
    p.widget.add_class(ROOT_CLASS)
    p._all_widgets = _descendants(p.widget)


def _buttons(p, widgets) -> dict:
    """The action buttons by name, each wired to `p._on_<name>`."""
    buttons = {}
    for name, label, style, tip in BUTTONS:
        button = widgets.Button(description=label, button_style=style, tooltip=tip, layout=widgets.Layout(width="auto"))
        button.on_click(getattr(p, "_on_" + name))
        buttons[name] = button
    if p.context == _context.COLAB:
        buttons["stop"].tooltip = "In Colab, interrupt the cell (Ctrl+M I) to stop a run; it is kept as stopped"
    return buttons


def _html(widgets, value=""):
    return widgets.HTML(value=value)


def _image(widgets):
    return widgets.Image(value=b"", format="png", layout=widgets.Layout(display="none"))


def _views(widgets) -> dict:
    """The panel's outputs by name: lines of HTML, charts (hidden until drawn), the bar, TensorBoard's frame."""
    return {
        "message": _html(widgets),
        "accelerator": _html(
            widgets,
            tables.message("Not connected. Connect finds a TPU, else GPUs, else the CPU (Train connects too)."),
        ),
        "chip": _html(widgets, tables.chip(None)),
        "progress": _html(widgets, tables.message("No run yet.")),
        "curves": _image(widgets),
        "bar": widgets.IntProgress(value=0, min=0, max=1000, layout=widgets.Layout(width="60%")),
        "profile": _html(widgets),
        "profile_chart": _image(widgets),
        "tensorboard": _html(widgets),
        "tensorboard_frame": widgets.Output(),
        "runs": _html(widgets),
        "runs_compared": _html(widgets),
        "runs_chart": _image(widgets),
        "reproducibility": _html(widgets),
        "train_off": _html(widgets),
        "tuning": _html(widgets),
        "tuning_chart": _image(widgets),
    }


def _run_picker(widgets):
    """The run the Runs section's Load model, Export and Start next run from it act on (the latest by default)."""
    return widgets.Dropdown(
        options=[("no run yet", -1)],
        value=-1,
        description="run",
        style={"description_width": "32px"},
        layout=widgets.Layout(width="400px"),
    )


def _top(p, widgets):
    """What stays on screen: the header (what is connected), the actions, the status and the progress line."""
    b, v = p.buttons, p.views
    top = widgets.VBox(
        [
            widgets.HBox(
                [_html(widgets, STYLE + "<b style='font-size:14px'>tpukit</b>"), v["chip"], b["connect"]],
                layout=widgets.Layout(align_items="center"),
            ),
            widgets.HBox([b["train"], b["stop"], b["resume"], b["profile"], b["tune"]]),
            v["train_off"],
            v["message"],
            v["progress"],
            v["bar"],
        ]
    )
    top.add_class("tpukit-top")
    return top


def _sections(p, widgets) -> dict:
    """The rest, one section at a time, by name (SECTIONS); the first shown, the others hidden."""
    rows, b, v = p.form.rows, p.buttons, p.views

    def column(*names):
        return widgets.VBox([rows[n] for n in names], layout=widgets.Layout(width="50%", min_width="360px"))

    sections = {
        "Settings": widgets.HBox(
            [column(*CORE_FIELDS), column(*ADVANCED_FIELDS)], layout=widgets.Layout(flex_flow="row wrap")
        ),
        "Progress": widgets.VBox([v["curves"], v["tuning"], v["tuning_chart"]]),
        "Runs": widgets.VBox(
            [
                widgets.HBox([b["compare"], b["reproduce"]]),
                widgets.HBox([p.run_picker, b["load_model"], b["export"], b["start_from"]]),
                rows["init_from"],  # a RunConfig field, shown by the action that sets it
                v["reproducibility"],
                v["runs"],
                v["runs_compared"],
                v["runs_chart"],
            ]
        ),
        "Profile": widgets.VBox([v["profile"], v["profile_chart"]]),
        "TensorBoard": widgets.VBox([widgets.HBox([b["tensorboard"]]), v["tensorboard"], v["tensorboard_frame"]]),
        "Accelerator": widgets.VBox([v["accelerator"]]),
    }
    for name, box in sections.items():
        box.add_class(f"tpukit-section-{name.lower()}")
        box.layout.display = "" if name == SECTIONS[0] else "none"
    return sections


def _section_picker(p, widgets):
    """Which section shows (ToggleButtons, not Tab or Accordion: both render alike in ipywidgets 7 on Colab, whose
    Accordion misbehaves, colabtools #3571), wired to `p._on_section`."""
    picker = widgets.ToggleButtons(
        options=SECTIONS,
        value=SECTIONS[0],
        tooltips=SECTION_TIPS,
        style={"button_width": "104px"},
        layout=widgets.Layout(margin="8px 0 4px 0"),
    )
    picker.observe(p._on_section, names="value")
    return picker


def _descendants(widget) -> list:
    found = [widget]
    for child in getattr(widget, "children", ()):
        found += _descendants(child)
    return found


def _widgets():
    try:
        import ipywidgets
    except ImportError as e:
        raise ImportError(
            f"The tpukit panel needs ipywidgets (pip install ipywidgets); without it, use tpukit.train: {e}"
        ) from e
    return ipywidgets
