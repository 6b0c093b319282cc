"""The settings form: one widget per RunConfig field, each with a note and an error line under it.

The form only converts: widget values to field values (`values`) and a
config back to widgets (`show`). It never validates; RunConfig does, and the
panel puts RunConfig's messages, as plain sentences (`plain`), under the
fields they name (`show_errors`).

Numbers are typed into text boxes and parsed strictly here: `1.5` in an
integer field stays the text '1.5', so RunConfig refuses it and the field
says "batch size must be a whole number ≥ 1; received '1.5'." (ipywidgets'
IntText drops the '.' as it is typed and would silently make it 15.)

Works with ipywidgets 7 (Colab) and 8: only widgets and traits both have.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Any, Callable, Dict, Optional, Tuple

import ipywidgets as widgets

from tpukit import config as _config
from tpukit import registry
from tpukit.models.source import KIND_SETTINGS, ModelSource
from tpukit.ui.messages import field_of, plain  # noqa: F401  (the form's sentences; widget-free)


def _shown_fields() -> Tuple[Tuple[str, str, str, Any, Any], ...]:
    """(field, label, kind, hint, choices) of each RunConfig field with a label, in the dataclass's order: the form
    restates none of them (`config._field`). Fields without one keep their config value."""
    fields = dataclasses.fields(_config.RunConfig)
    return tuple(
        (f.name, f.metadata["label"], f.metadata["kind"], f.metadata["hint"], f.metadata["choices"])
        for f in fields
        if f.metadata.get("label")
    )


FIELDS = _shown_fields()
# Shown only while the model reads them (a pretrained one): the settings some kinds of model have no use for.
KIND_FIELDS = tuple(name for name, *_ in FIELDS if name in KIND_SETTINGS)
_INT = re.compile(r"\s*[+-]?\d+\s*")
_FLOAT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_WINDOW = re.compile(r"\s*(\d+)\s*[:\-,]\s*(\d+)\s*")
_LABEL_STYLE = {"description_width": "120px"}
_NONE = "none"  # a choice of None, as its dropdown holds it


class Form:
    """Widgets for the fields of a RunConfig.

    Args:
        config: the config shown first.
        on_change: called with no arguments when the person changes a widget
            (not when `show` writes them).
    """

    def __init__(self, config, on_change: Callable[[], None]):
        # A field offered as choices holds its value as it is (a dropdown of values, None among them).
        self.kinds = {name: "choice" if choices is not None else kind for name, _, kind, _, choices in FIELDS}
        self.widgets: Dict[str, Any] = {}
        self.notes: Dict[str, widgets.HTML] = {}
        self.errors: Dict[str, widgets.HTML] = {}  # under each field; hidden while empty
        self.rows: Dict[str, widgets.Box] = {}
        self._on_change = on_change
        self._writing = False
        for name, label, kind, hint, choices in FIELDS:
            widget = _make_widget(name, label, kind, hint, choices)
            self.widgets[name] = widget
            # Under the field (the settings sit in two columns), shown only when there is something to say.
            self.notes[name] = widgets.HTML(layout=widgets.Layout(margin="-2px 0 4px 128px", display="none"))
            self.errors[name] = widgets.HTML(layout=widgets.Layout(margin="0 0 4px 128px", display="none"))
            self.rows[name] = widgets.VBox([widget, self.notes[name], self.errors[name]])
        self.show(config)
        for widget in self.widgets.values():
            widget.observe(self._changed, names="value")

    # ---- widgets -> fields -------------------------------------------------
    def values(self) -> Dict[str, Any]:
        """Field values as the widgets hold them (text that is not a number stays text)."""
        return {name: _read(self.kinds[name], widget.value) for name, widget in self.widgets.items()}

    # ---- fields -> widgets -------------------------------------------------
    def show(self, config) -> None:
        """Write `config` into the widgets without calling on_change."""
        self._writing = True
        try:
            for name, widget in self.widgets.items():
                value = _write(self.kinds[name], getattr(config, name))
                if self.kinds[name] == "name" and value not in widget.options:
                    widget.options = list(widget.options) + [value]  # registered later, or handed to the panel
                if widget.value != value:
                    widget.value = value
        finally:
            self._writing = False

    # ---- messages ----------------------------------------------------------
    def show_errors(self, problems: Dict[str, str]) -> None:
        """Put each sentence under its field ({field: sentence}); every other field's error line is cleared."""
        for field, label in self.errors.items():
            value = error_html(problems[field]) if problems.get(field) else ""
            if label.value != value:
                label.value = value
                label.layout.display = "" if value else "none"
            # A refused field's note describes the value it still holds, not the one typed: the error says it all.
            self.notes[field].layout.display = "none" if value or not self.notes[field].value else ""

    def note(self, field: str, text: str, detail: str = "") -> None:
        """A grey line of information beside a field (empty text clears it); `detail` shows on hover."""
        title = f' title="{html.escape(detail)}"' if detail else ""
        value = (
            f'<div style="color:#666;font-size:12px;line-height:1.35"{title}>{html.escape(text)}</div>' if text else ""
        )
        if self.notes[field].value != value:
            self.notes[field].value = value
            self.notes[field].layout.display = "" if text and not self.errors[field].value else "none"

    def explain(self, config, runtime=None, stale: bool = False) -> None:
        """Notes beside the fields: what "auto" precision resolves to and why, the global batch and padding
        advice, what determinism promises, the dataset. `runtime`: the connected one, if it fits `config`;
        `stale`: connected, but to other hardware than the settings now ask for."""
        from tpukit.training import determinism

        if config.precision != "auto":
            slow = runtime.precision_advice(config.precision, config.deterministic) if runtime is not None else None
            self.note("precision", f"⚠ {slow}" if slow else "")
        elif runtime is not None:
            policy, why = runtime.resolve_precision("auto")
            self.note("precision", f"auto → {policy}: {why}")
        else:
            self.note(
                "precision",
                "auto: decided at connect (TPU bfloat16, Tensor Core GPU float16, "
                "CPU bfloat16 only where it measures faster)",
            )
        replicas = runtime.replicas if runtime is not None else (config.replicas or 1)
        batch = f"global batch {config.global_batch(replicas)} = {config.batch_size} × {replicas} replica"
        advice = runtime.padding_advice(config) if runtime is not None else config.padding_advice()
        self.note("batch_size", batch + ("s" if replicas != 1 else "") + (f". {advice}" if advice else ""))
        if config.deterministic:
            self.note("deterministic", "seeded, deterministic ops: same config, same weights")
        elif determinism.op_determinism_enabled():
            self.note("deterministic", "op determinism stays on in this process until a restart")
        else:
            self.note("deterministic", "seeded; ops may differ in the last bits between runs")
        self._explain_steps_per_execution(config, runtime)
        self.note("dataset", registry.describe("dataset", config.dataset))
        self._explain_pretrained(config, runtime)
        simulated = config.replicas is not None and config.accelerator in ("auto", "cpu")
        self.note("replicas", "on a CPU: simulated replicas (logical devices)" if simulated else "")
        self.note("accelerator", "changed since connect: Train reconnects" if stale else "")
        self.note("backend", _backend_note(config.backend))

    def _explain_pretrained(self, config, runtime) -> None:
        """The model's line; for a pretrained model (a KerasHub preset) its LoRA and text settings, shown only then,
        and its step's memory estimate."""
        target = registry.provided("model", config.model)
        target = target.for_method(config) if isinstance(target, ModelSource) else None  # what a run would train
        settings = target.settings_note(config) if target is not None else None
        for name in KIND_FIELDS:
            self.rows[name].layout.display = "" if settings else "none"
        if not settings:
            self.note("model", registry.describe("model", config.model))
            return
        lora, text = settings
        memory = target.memory_note(config, runtime)
        self.note("model", f"{target.description}; {memory}" if memory else target.description)
        self.note("lora_rank", lora)
        self.note("sequence_length", text)

    def _explain_steps_per_execution(self, config, runtime) -> None:
        """What "auto" steps per call becomes here, the whole reason on hover (the run records it too)."""
        from tpukit.hardware.runtime import AUTO_STEPS_PER_EXECUTION, CPU_CALL_SECONDS
        from tpukit.training import plan

        if config.steps_per_execution != "auto":
            self.note("steps_per_execution", "")
            return
        if runtime is not None and runtime.step_time_caps_calls and not runtime.multi_step_refusal():
            self.note(
                "steps_per_execution",
                "auto on the CPU: from the model's step time, when the run starts",
                detail=f"auto on the CPU: up to {AUTO_STEPS_PER_EXECUTION} steps per call while a call "
                f"stays under {1000 * CPU_CALL_SECONDS:.0f} ms, from the model's FLOPs at the "
                "CPU's measured peak (only millisecond steps gain; a stop request waits for a call); the "
                "run's notes say what it chose",
            )
            return
        if runtime is None or (not config.steps_per_epoch and not runtime.multi_step_refusal()):
            self.note(
                "steps_per_execution",
                f"auto: up to {AUTO_STEPS_PER_EXECUTION} steps per call on "
                "TPU and GPU, and on the CPU for millisecond steps; decided when the run "
                "starts",
            )
            return
        try:
            _, why = plan.resolve_steps_per_execution("auto", runtime, config.steps_per_epoch, config.profile)
        except Exception:  # noqa: BLE001 - a note, never an error: Train says what is wrong
            self.note("steps_per_execution", "")
            return
        self.note("steps_per_execution", why.split(":")[0], detail=why)

    def _changed(self, change) -> None:
        if not self._writing:
            self._on_change()


def _backend_note(chosen: str) -> str:
    """Which Keras backend this kernel runs, once one is loaded (a kernel cannot switch), or KERAS_BACKEND names."""
    from tpukit import backend

    loaded = backend.loaded()
    env = backend.from_environment()
    if env is not None and env not in backend.KERAS_BACKENDS:
        return f"KERAS_BACKEND={env} in the environment: tpukit runs tensorflow or jax; change it and restart"
    if env is not None and chosen not in ("auto", env):
        return f"KERAS_BACKEND={env} in the environment: choose {env} or auto, or change it and restart"
    if loaded is None:
        if env is not None:
            return f"Keras will run on {env}: KERAS_BACKEND={env} in the environment"
        return "auto: TensorFlow if installed, else JAX (and JAX on Colab's TPU)" if chosen == "auto" else ""
    if chosen not in ("auto", loaded):
        return f"this kernel runs Keras on {loaded}; restart it to use {chosen}"
    return f"Keras runs on {loaded} in this kernel"


def error_html(message: str) -> str:
    return f'<div style="color:#b00020;line-height:1.35">{html.escape(message)}</div>'


def _make_widget(name: str, label: str, kind: str, hint: Optional[str], choices):
    common = dict(description=label, style=_LABEL_STYLE, layout=widgets.Layout(width="330px"))
    if choices is not None:
        shown = [_write("choice", c) for c in choices]  # None as "none"
        return widgets.Dropdown(options=list(zip(shown, shown)), **common)
    if kind == "name":  # the names offered when the form is built (KerasHub's presets among the models')
        offered = list(registry.offered(name))
        if not hint:  # a name from the list
            return widgets.Dropdown(options=offered, **common)
        # or anything typed: a preset directory, an import path
        return widgets.Combobox(
            options=offered, ensure_option=False, continuous_update=False, placeholder=hint, **common
        )
    if kind == "bool":
        return widgets.Checkbox(value=False, indent=True, **common)
    # Numbers are text, parsed strictly by `_read`: IntText would turn a typed "1.5" into 15.
    return widgets.Text(placeholder=hint or "", continuous_update=False, **common)


def _read(kind: str, value):
    """A field value from a widget's; text that does not parse is passed on as text, for RunConfig to refuse."""
    if kind == "choice":
        return None if value == _NONE else value
    if kind == "int_or_auto":
        return "auto" if value.strip().lower() == "auto" else _read("int", value)
    if kind == "int":
        return int(value) if _INT.fullmatch(value) else value.strip()
    if kind == "float":
        return float(value) if _FLOAT.fullmatch(value) else value.strip()
    if kind == "optional_int":
        text = value.strip()
        return None if not text else int(text) if _INT.fullmatch(text) else text
    if kind == "optional_str":
        return value.strip() or None
    if kind == "window":
        text = value.strip()
        match = _WINDOW.fullmatch(text)
        return None if not text else (int(match.group(1)), int(match.group(2))) if match else text
    if kind == "str":
        return value.strip()
    return value


def _write(kind: str, value):
    """A widget's value for a field's: a dropdown holds None as "none" (ipywidgets reads a None value as no
    selection, and shows an empty box)."""
    if kind == "choice":
        return _NONE if value is None else value
    if kind in ("optional_int", "optional_str"):
        return "" if value is None else str(value)
    if kind == "window":
        return "" if value is None else f"{value[0]}:{value[1]}"
    if kind in ("int", "int_or_auto"):
        return str(value)
    if kind == "float":
        return repr(float(value))  # the shortest text that reads back as the same float
    return value
