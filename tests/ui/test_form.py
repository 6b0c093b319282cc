"""The settings form is made from RunConfig's fields: their labels, kinds, hints and choices are declared once."""

import dataclasses

import pytest

pytest.importorskip("ipywidgets")

from tpukit import RunConfig  # noqa: E402
from tpukit.ui import form, layout  # noqa: E402


def test_every_labelled_field_is_a_widget_in_one_column_and_its_choices_are_the_configs():
    shown = {f.name: f.metadata for f in dataclasses.fields(RunConfig) if f.metadata["label"]}
    assert [name for name, *_ in form.FIELDS] == list(shown)
    placed = layout.CORE_FIELDS + layout.ADVANCED_FIELDS + ("init_from",)  # init_from: in Runs, beside its action
    assert sorted(placed) == sorted(shown), "a labelled field the panel does not place, or a placed one unlabelled"
    made = form.Form(RunConfig(), on_change=lambda: None)
    for name, metadata in shown.items():
        widget = made.widgets[name]
        assert widget.description == metadata["label"], name
        if metadata["choices"] is not None:
            assert [value for _, value in widget.options] == [c or "none" for c in metadata["choices"]], name
        elif metadata["hint"]:
            assert widget.placeholder == metadata["hint"], name
    quantize = made.widgets["quantize"]  # None shows as "none": ipywidgets shows a None value as an empty box
    assert quantize.options == (("none", "none"), ("int8", "int8"), ("int4", "int4")) and quantize.value == "none"
    quantize.value = "int4"
    assert made.values()["quantize"] == "int4"
    quantize.value = "none"
    assert made.values()["quantize"] is None


def test_steps_per_execution_reads_auto_or_a_whole_number_and_keeps_other_text_for_the_config_to_refuse():
    made = form.Form(RunConfig(steps_per_execution=4), on_change=lambda: None)
    box = made.widgets["steps_per_execution"]
    assert box.value == "4"
    for typed, read in (("auto", "auto"), (" AUTO ", "auto"), ("8", 8), ("1.5", "1.5")):
        box.value = typed
        assert made.values()["steps_per_execution"] == read, typed
