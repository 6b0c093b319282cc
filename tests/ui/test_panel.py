"""The panel, headless: real widgets, real training on the CPU, no browser and no mocks of the engine.

Buttons are pressed with `Button.click()`, the path a real click takes.
Works under ipywidgets 8 (no kernel needed) and 7.7.1, Colab's version
(widgets get a stand-in comm there, as ipywidgets 7's own tests do).
"""

import functools
import html
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import ipywidgets
import pytest

from conftest import unset_env

import panel_support
import tpukit
from tpukit.ui import context
from tpukit.runs import directory, records
from tpukit.observe import tensorboard as tb
from tpukit.config import ConfigError, RunConfig
from tpukit.runs.records import RunDirError
from tpukit.ui import NoRunError, Panel, PanelBusy, embed, layout, progress, resumable

SMALL = dict(dataset="digits", model="mlp", epochs=1, batch_size=32)


# ---- fixtures -----------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def headless_widgets():
    restore = panel_support.headless_widgets()
    yield
    restore()


@pytest.fixture
def make_panel(tmp_path):
    """Build panels on a tiny config (display=False); closes them after the test."""
    made = []

    def make(ctx=context.JUPYTER, logdir=None, model=None, data=None, **changes):
        shown = []
        config = RunConfig(**{**SMALL, "logdir": str(logdir or tmp_path / "runs"), **changes})
        panel = tpukit.panel(
            config, model=model, data=data, display=False, context=ctx, display_fn=shown.append, runs=[]
        )
        panel.shown = shown
        made.append(panel)
        return panel

    yield make
    for panel in made:
        panel.close()


@pytest.fixture(scope="module")
def shared_logdir(tmp_path_factory):
    """A logdir with one TensorBoard for the module: panels reuse it (and so never stop it)."""
    logdir = tmp_path_factory.mktemp("tensorboard") / "runs"
    logdir.mkdir()
    server = tb.start(logdir)
    assert not isinstance(server, tb.Failed), server
    yield logdir
    tb.stop(server)


def wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def is_png(image):
    return bytes(image.value).startswith(b"\x89PNG")  # ipywidgets 8 holds a memoryview, 7 bytes


def text(widget):
    return html.unescape(widget.value)


def words(widget):
    """What a person reads in an HTML widget: its text without the tags."""
    return html.unescape(re.sub(r"<[^>]+>", "", widget.value))


# ---- building and the config ------------------------------------------------------
def test_import_stays_cheap_until_a_panel_is_built():
    code = (
        "import sys, tpukit; tpukit.panel; "
        "print(*[m in sys.modules for m in ('ipywidgets', 'tensorflow', 'keras', 'matplotlib')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"] * 4


def test_widgets_and_config_follow_each_other(make_panel):
    panel = make_panel()
    w = panel.form.widgets
    assert (w["dataset"].value, w["batch_size"].value, w["profile"].value) == ("digits", "32", "")
    w["batch_size"].value = "64"
    w["deterministic"].value = True
    w["steps_per_epoch"].value = "7"
    w["profile"].value = "3:5"
    w["precision"].value = "float32"
    c = panel.config
    assert (c.batch_size, c.deterministic, c.steps_per_epoch, c.profile, c.precision) == (
        64,
        True,
        7,
        (3, 5),
        "float32",
    )
    assert "global batch 64 = 64 × 1 replica" in text(panel.form.notes["batch_size"])

    panel.config = RunConfig(dataset="shapes", model="cnn", epochs=4, batch_size=8, replicas=8, logdir="elsewhere")
    assert (w["dataset"].value, w["model"].value, w["epochs"].value, w["replicas"].value) == ("shapes", "cnn", "4", "8")
    assert (w["steps_per_epoch"].value, w["profile"].value, w["logdir"].value) == ("", "", "elsewhere")
    assert "global batch 64 = 8 × 8 replicas" in text(panel.form.notes["batch_size"])
    panel.config = {"learning_rate": 0.01}  # a dict changes just those fields
    assert w["learning_rate"].value == "0.01" and panel.config.model == "cnn"


def test_an_invalid_widget_value_is_said_in_a_sentence_under_it_and_disables_train(make_panel):
    panel = make_panel()
    train, before = panel.buttons["train"], panel.config
    errors = panel.form.errors
    assert not train.disabled and errors["batch_size"].layout.display == "none"
    panel.form.widgets["batch_size"].value = "0"
    assert words(errors["batch_size"]) == "batch size must be a whole number ≥ 1; received 0."
    assert errors["batch_size"].layout.display == "" and train.disabled and panel.config == before
    with pytest.raises(ConfigError, match="Train is off: batch size must be a whole number ≥ 1; received 0."):
        panel.train()
    train.click()  # a click on a disabled button still reaches the handler: it says why, nothing runs
    assert "batch size must be a whole number ≥ 1" in panel.message and not panel.running

    panel.form.widgets["batch_size"].value = "5000"  # valid alone, larger than the dataset
    assert "fewer than one global batch" in text(errors["batch_size"]) and train.disabled
    panel.form.widgets["batch_size"].value = "16"
    assert errors["batch_size"].value == "" and errors["batch_size"].layout.display == "none"
    assert not train.disabled and panel.config.batch_size == 16 and panel.problems == {}

    panel.form.widgets["steps_per_epoch"].value = "ten"
    assert words(errors["steps_per_epoch"]) == "steps per epoch must be a whole number ≥ 1 or empty; received 'ten'."
    assert train.disabled


def test_numbers_are_parsed_strictly(make_panel):
    """IntText would have made a typed 1.5 into 15; the form's text boxes pass it on, and it is refused."""
    panel = make_panel()
    w, before = panel.form.widgets, panel.config
    w["batch_size"].value = "1.5"
    assert panel.problems == {"batch_size": "batch size must be a whole number ≥ 1; received '1.5'."}
    assert words(panel.form.errors["batch_size"]) == panel.problems["batch_size"]
    assert panel.buttons["train"].disabled and panel.config == before
    w["batch_size"].value = " 48 "  # spaces around a whole number are fine
    assert panel.config.batch_size == 48 and not panel.buttons["train"].disabled
    for typed in ("1e3", "1,000", "", "15.0"):
        w["epochs"].value = typed
        assert panel.problems["epochs"].startswith("epochs must be a whole number ≥ 1 and ≤ 1,000,000"), typed
        assert panel.config.epochs == 1
    w["epochs"].value = "3"
    w["learning_rate"].value = "3e-4"
    assert (panel.config.epochs, panel.config.learning_rate) == (3, 3e-4) and panel.problems == {}
    w["learning_rate"].value = "0.0.1"  # FloatText would have read 0 here
    assert panel.problems == {"learning_rate": "learning rate must be a positive number; received '0.0.1'."}
    panel.config = {"learning_rate": 1e-05}
    assert w["learning_rate"].value == "1e-05" and panel.problems == {}


def test_every_invalid_field_is_marked_at_once_and_train_says_why_it_is_off(make_panel):
    panel = make_panel()
    w, train = panel.form.widgets, panel.buttons["train"]
    assert train.tooltip == layout.TIPS["train"] and words(panel.views["train_off"]) == ""
    w["batch_size"].value = "1.5"
    w["epochs"].value = "0"
    w["seed"].value = "-1"
    assert set(panel.problems) == {"batch_size", "epochs", "seed"}
    for field, start in (
        ("batch_size", "batch size must be a whole number ≥ 1"),
        ("epochs", "epochs must be a whole number ≥ 1"),
        ("seed", "seed must be a whole number ≥ 0"),
    ):
        assert words(panel.form.errors[field]).startswith(start), field
    assert train.disabled
    # in RunConfig's order, the order of `--help`
    assert train.tooltip.startswith(
        "Train is off: epochs must be a whole number ≥ 1 and ≤ 1,000,000; received 0. batch"
    )
    assert words(panel.views["train_off"]) == train.tooltip
    w["epochs"].value = "2"  # fixing one leaves the others marked
    assert set(panel.problems) == {"batch_size", "seed"} and words(panel.form.errors["epochs"]) == ""
    assert train.disabled and "epochs" not in train.tooltip
    w["batch_size"].value = "5000"  # valid alone, too large for the data: checked with the other valid fields
    assert set(panel.problems) == {"batch_size", "seed"}
    assert "fewer than one global batch" in panel.problems["batch_size"]
    w["seed"].value = "7"
    assert set(panel.problems) == {"batch_size"}
    w["batch_size"].value = "32"
    assert panel.problems == {} and not train.disabled and train.tooltip == layout.TIPS["train"]
    assert words(panel.views["train_off"]) == "" and (panel.config.epochs, panel.config.seed) == (2, 7)


def test_an_invalid_assignment_raises_value_error_and_changes_nothing(make_panel):
    panel = make_panel()
    before = panel.config
    with pytest.raises(
        ValueError, match=r"RunConfig.epochs: expected an integer >= 1 and <= 1,000,000. Received: epochs=0"
    ):
        panel.config = {"epochs": 0}
    with pytest.raises(ValueError, match="RunConfig has no field 'epoch'"):
        panel.config = {"epoch": 2}
    with pytest.raises(TypeError):
        panel.config = "digits"
    assert panel.config == before and panel.form.widgets["epochs"].value == "1"


def test_connect_shows_the_accelerator_and_what_auto_precision_means(make_panel):
    panel = make_panel(accelerator="cpu", replicas=8)
    runtime = panel.connect()
    assert runtime.kind == "cpu" and runtime.replicas == 8 and runtime.simulated
    shown = text(panel.views["accelerator"])
    assert "simulated replicas" in shown and "/device:CPU:7" in shown
    assert panel.buttons["connect"].description == "Reconnect"
    assert f"auto → {runtime.precision}" in text(panel.form.notes["precision"])
    assert "= 32 × 8 replicas" in text(panel.form.notes["batch_size"])
    panel.form.widgets["batch_size"].value = "200"  # 1600 > 1437 examples on 8 replicas
    assert "fewer than one global batch of 1600" in text(panel.form.errors["batch_size"])


def test_a_precision_the_probe_measured_slow_is_said_under_precision_before_train(make_panel, cpu_probe_says):
    """TensorFlow's own float16 conv gradients at 0.1x float32 (the probe's figures, injected), with XLA off under
    op determinism: the form says so under precision, before Train; where XLA runs it instead, it says nothing."""
    cpu_probe_says("bf16_slower")
    panel = make_panel(accelerator="cpu", precision="mixed_float16", deterministic=True)
    panel.connect()
    said = text(panel.form.notes["precision"])
    assert "mixed_float16 is slow here" in said and "0.1x" in said and "float32 is likely faster" in said
    panel.form.widgets["deterministic"].value = False  # XLA runs float16 at the speed the probe measured for it
    assert text(panel.form.notes["precision"]) == ""
    panel.form.widgets["precision"].value = "float32"
    assert text(panel.form.notes["precision"]) == ""


# ---- training ------------------------------------------------------------------------
def test_the_train_button_runs_a_run_and_lists_it(make_panel):
    panel = make_panel(epochs=2)
    panel.buttons["train"].click()
    assert panel.running and panel.buttons["train"].disabled and not panel.buttons["stop"].disabled
    result = panel.wait(120)
    assert result.status == "completed" and panel.runs == [result]
    assert not panel.running and not panel.buttons["train"].disabled and panel.buttons["stop"].disabled
    assert panel.progress.done and panel.progress.global_step == 2 * 40 and panel.progress.fraction == 1.0
    assert panel.views["bar"].value == 1000 and is_png(panel.views["curves"])
    table = text(panel.views["runs"])
    assert Path(result.run_dir).name in table and "completed" in table and result.fingerprint in table
    assert panel.message.startswith("completed:")

    # resume takes a run directory, by path or by name under the logdir; a completed one is refused in one line.
    for run in (result.run_dir, Path(result.run_dir).name):
        assert panel.resume(run, wait=True) is None
        assert panel.message.startswith(f"RunDirError: {result.run_dir} is a completed run"), panel.message
        assert "\n" not in panel.message and panel.error_log is None
    assert panel.runs == [result] and not panel.buttons["train"].disabled


def test_the_runs_section_loads_exports_and_starts_the_next_run_from_a_run(make_panel, tmp_path):
    """panel.runs[i].model and panel.model; Load model, Export .keras and Start next run from it, by click."""
    import keras
    import numpy as np

    panel = make_panel(epochs=1, deterministic=True)
    assert panel.model is None and panel.buttons["load_model"].disabled and panel.buttons["export"].disabled
    result = panel.train(wait=True)
    assert panel.runs[-1].model is result.model and panel.model is result.model  # trained in this kernel
    assert panel.run_picker.options[0][0].endswith(" · model saved")  # the row says its model loads, from disk too
    assert panel.run_picker.value == 0 and not panel.buttons["load_model"].disabled
    panel.buttons["load_model"].click()
    assert panel.message.startswith("The model of ") and "panel.runs[0].model" in panel.message
    sample = np.zeros((2, 8, 8, 1), "uint8")
    expected = panel.model.predict(sample, verbose=0)
    panel.buttons["export"].click()
    exported = Path(panel.config.logdir, "exports", Path(result.run_dir).name + ".keras")
    assert exported.is_file() and panel.message.startswith("Exported "), panel.message
    np.testing.assert_allclose(keras.saving.load_model(exported).predict(sample, verbose=0), expected, atol=2e-3)
    panel.buttons["start_from"].click()
    assert panel.config.init_from == result.run_dir and panel.form.widgets["init_from"].value == result.run_dir
    follow = panel.train(wait=True)
    assert follow.config["init_from"] == result.run_dir and any(n.startswith("init_from:") for n in follow.notes)
    assert [label for label, _ in panel.run_picker.options] == [
        f"#{i + 1} {Path(r.run_dir).name} · model saved" for i, r in enumerate(panel.runs)
    ]
    panel.start_from("")
    assert panel.config.init_from is None and panel.form.widgets["init_from"].value == ""
    with pytest.raises(Exception, match="No run #5"):
        panel.load_model(5)


def test_the_panel_trains_a_user_model_on_user_data(make_panel):
    """tpukit.panel(config, model=..., data=...): the user's factory and arrays, the same progress and runs table."""
    from usermodels import text_classifier, tokens

    x, y = tokens(1024)
    panel = make_panel(model=text_classifier, data=(x, y), epochs=2, batch_size=16)
    assert panel.config.model == "usermodels:text_classifier" and panel.config.dataset == "<arrays>"
    assert panel.form.widgets["model"].value == "usermodels:text_classifier"
    assert "cnn" in panel.form.widgets["model"].options  # the zoo stays on offer
    result = panel.train(wait=True)
    assert result.status == "completed" and result.config["model"] == "usermodels:text_classifier"
    assert panel.progress.global_step == 2 * (922 // 16) and result.validation_metrics
    assert Path(result.run_dir).name in text(panel.views["runs"])
    panel.form.widgets["model"].value = "mlp"  # back to the zoo: the user's objects no longer apply
    assert panel.controller.inputs_for(panel.config)["model"] is None
    panel.form.widgets["model"].value = "cnnn"  # the field takes typing (a preset, an import path): a typo is refused
    assert panel.config.model == "mlp" and "did you mean 'cnn'" in panel.controller.problems["model"]
    panel.form.widgets["model"].value = "usermodels:text_classifier"  # an import path, typed
    assert panel.config.model == "usermodels:text_classifier" and not panel.controller.problems


class PauseAt:
    """A clock for the progress callback that holds the training thread at its n-th read until released."""

    def __init__(self, n):
        self.n, self.calls = n, 0
        self.reached, self.release = threading.Event(), threading.Event()

    def __call__(self):
        self.calls += 1
        if self.calls == self.n:
            self.reached.set()
            self.release.wait(60)
        return time.perf_counter()


def test_a_second_train_is_rejected_and_stop_keeps_the_run(make_panel):
    panel = make_panel(epochs=3, steps_per_execution=1)  # a stop at a step (auto runs the mlp 22 steps per call)
    # read at each step's start and end: this is mid second epoch (44 steps an epoch)
    panel.controller.clock = pause = PauseAt(120)
    panel.train()
    assert pause.reached.wait(60) and panel.running
    with pytest.raises(PanelBusy, match="still going on"):
        panel.train()
    panel.buttons["train"].click()
    assert "still going on" in panel.message
    assert panel.stop()
    pause.release.set()
    stopped = panel.wait(120)
    assert stopped.status == "stopped" and stopped.resumable and stopped.epochs_done == 1
    assert not panel.buttons["train"].disabled and not panel.buttons["resume"].disabled
    assert "stopped" in text(panel.views["runs"]) and "(resumable)" in text(panel.views["runs"])
    assert panel.message.endswith("stopped on request. Resume continues it from epoch 2 of 3."), panel.message
    assert panel.buttons["resume"].tooltip.endswith("Resume continues it from epoch 2 of 3.")
    assert not panel.stop() and panel.message.startswith("Nothing to stop")

    with directory.locked(stopped.run_dir):  # another process trains it (the engine's own lock)
        panel.buttons["resume"].click()
        assert panel.message.startswith("NoRunError: No resumable run. Cannot resume yet: a process is training")
        assert panel.buttons["resume"].disabled and not panel.running
    panel.buttons["compare"].click()  # any refresh after the lock is gone offers it again
    assert not panel.buttons["resume"].disabled

    # Killed: the record still says "running", and no process holds the lock. It resumes as a stopped run.
    record = Path(stopped.run_dir, "result.json")
    record.write_text(json.dumps({**json.loads(record.read_text()), "status": "running"}))
    assert resumable.check(stopped.run_dir).ok and records.load(stopped.run_dir).status == "stopped"
    panel.buttons["resume"].click()
    resumed = panel.wait(120)
    assert resumed.status == "completed" and resumed.run_dir == stopped.run_dir and resumed.epochs_done == 3
    assert panel.runs == [resumed]  # the same run, continued
    assert panel.buttons["resume"].disabled and "the run completed" in panel.buttons["resume"].tooltip
    with pytest.raises(NoRunError, match="No resumable run. Nothing to resume: the run completed"):
        panel.resume()

    # A completed run is extended, not resumed: into a new run directory that names it as its parent.
    extended = panel.resume(resumed, epochs=4, wait=True)
    assert extended.status == "completed" and extended.parent == resumed.run_dir and extended.epochs_done == 4


def test_a_run_stopped_in_its_first_epoch_promises_no_resume(make_panel):
    """No whole epoch done, so nothing was kept: Resume stays off, and no line says a resume would continue it."""
    panel = make_panel(epochs=2, steps_per_execution=1)
    panel.controller.clock = pause = PauseAt(10)  # in the first epoch
    panel.train()
    assert pause.reached.wait(60) and panel.stop()
    pause.release.set()
    stopped = panel.wait(120)
    assert stopped.status == "stopped" and stopped.epochs_done == 0
    check = resumable.check(stopped.run_dir)
    assert not check.ok and "before its first whole epoch ended" in check.reason
    assert "resume continues" not in panel.message.lower()
    assert panel.message.endswith("stopped on request. " + check.reason), panel.message
    assert panel.buttons["resume"].disabled and panel.buttons["resume"].tooltip.endswith(check.reason)
    assert "resum" not in words(panel.views["runs"])
    with pytest.raises(NoRunError, match="No resumable run. Nothing to resume: the run stopped before"):
        panel.resume()
    with pytest.raises(NoRunError, match="Nothing to resume"):  # named, it is refused too: it would start over
        panel.resume(stopped)
    assert not panel.buttons["train"].disabled and not panel.running


def test_a_click_says_at_once_what_it_does_and_a_new_run_clears_the_last_status(make_panel):
    """Set by the click's handler itself, before the slow part (in Colab only the handler's updates show)."""
    panel = make_panel(accelerator="cpu")
    seen = {name: [] for name in ("message", "accelerator", "progress", "bar")}

    def note(change):
        seen[change["owner"].tpukit_view].append((change["new"], threading.current_thread()))

    for name in seen:
        panel.views[name].tpukit_view = name
        panel.views[name].observe(note, "value")

    def first(name):
        value, thread = seen[name][0]
        assert thread is threading.main_thread(), name
        return html.unescape(re.sub(r"<[^>]+>", "", value)) if isinstance(value, str) else value

    panel.buttons["train"].click()
    assert first("message").startswith("Connecting to the CPU…") and first("accelerator") == first("message")
    assert first("progress") == "Train: waiting for the accelerator…"  # said once where it happens, not thrice
    done = panel.wait(120)
    assert panel.message.startswith("completed:") and "kind" in words(panel.views["accelerator"])

    for views in seen.values():
        views.clear()
    panel.buttons["train"].click()  # connected: no connecting now, and the last run's status is gone at once
    assert (
        first("message") == f"Starting {done.config['name'] or 'mlp-digits'}: building the model and the input "
        "pipeline…"
    )
    assert first("progress") == first("message") and first("bar") == 0
    panel.wait(120)

    for views in seen.values():
        views.clear()
    panel.buttons["connect"].click()
    assert first("accelerator").startswith("Connecting to the CPU…") and first("message").startswith("Connecting")
    assert panel.message.startswith("Connected: CPU, 1 replica") and "kind" in words(panel.views["accelerator"])


def test_the_page_marks_the_panel_when_the_kernel_is_gone(make_panel):
    """The kernel cannot say it died; ipywidgets marks views it lost as disconnected, and a style rule shows it."""
    panel = make_panel()
    assert layout.ROOT_CLASS in panel.widget._dom_classes
    header = panel.widget.children[0].children[0].children[0].value  # the top box's header line
    assert f".{layout.ROOT_CLASS}.jupyter-widgets-disconnected::after" in header and layout.KERNEL_GONE in header


def test_engine_errors_become_one_line_and_the_panel_stays_usable(make_panel, tmp_path, monkeypatch):
    panel = make_panel(accelerator="gpu")  # this TensorFlow has no CUDA
    assert panel.train(wait=True) is None
    assert panel.message.startswith("ConnectError: no GPU visible") and "\n" not in panel.message
    assert not panel.running and not panel.buttons["train"].disabled and panel.runs == []
    assert words(panel.views["progress"]).startswith("Did not finish: ConnectError: no GPU visible")
    assert panel.connect() is None and "ConnectError" in text(panel.views["accelerator"])
    assert panel.error_log is None  # tpukit's own errors say all in their line: nothing is logged

    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    temp = tmp_path / "temp"
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    panel.config = {"accelerator": "cpu", "logdir": str(not_a_dir)}  # fails only when the run starts
    panel.buttons["train"].click()
    assert panel.wait(120) is None
    # A logdir that is a file is tpukit's RunDirError, found before the run starts: one line, nothing logged.
    assert panel.message.startswith(f"RunDirError: logdir {not_a_dir} is not a writable directory")
    assert "\n" not in panel.message and panel.error_log is None and not temp.exists()
    assert not panel.buttons["train"].disabled and panel.buttons["stop"].disabled


def test_tpukit_errors_from_the_controller_are_one_line_and_log_nothing(make_panel):
    """A TPU address nothing listens on, and bad runs for resume: each action says why in one line."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"grpc://127.0.0.1:{s.getsockname()[1]}"
    panel = make_panel(accelerator="tpu", tpu=address, batch_size=128)
    started = time.monotonic()
    assert panel.connect() is None
    assert time.monotonic() - started < 5
    assert panel.message.startswith(f"ConnectError: TPU '{address}' does not answer") and "\n" not in panel.message
    assert f"TPU '{address}'" in text(panel.views["accelerator"])

    with pytest.raises(RunDirError, match="no-such-run is not a tpukit run directory"):
        panel.resume("no-such-run")
    panel._handle(panel.buttons["resume"], functools.partial(panel.resume, "no-such-run"))  # as a click would
    assert panel.message.startswith("RunDirError: no-such-run is not a tpukit run directory (no config.json)")
    assert "\n" not in panel.message and not panel.running
    with pytest.raises(NoRunError, match="No resumable run"):
        panel.resume()
    panel.buttons["resume"].click()
    assert panel.message.startswith("NoRunError: No resumable run")
    with pytest.raises(TypeError, match="Received: run=42"):
        panel.resume(42)
    assert panel.error_log is None and not (Path(panel.config.logdir) / "tpukit-panel.log").exists()


def exploding_factory():
    raise ZeroDivisionError("the factory divided by zero")


class Explodes(__import__("keras").layers.Layer):
    """Fine when the model is built; raises when fit traces a training step."""

    def call(self, x, training=None):
        if training:
            raise ArithmeticError("the layer exploded")
        return x


def exploding_in_fit(spec):
    import keras

    inputs = keras.Input(spec.input_shape)
    x = Explodes()(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(spec.num_classes, activation="softmax")(x))


def test_an_error_that_is_not_tpukits_goes_with_its_traceback_to_a_log_the_line_names(make_panel, tmp_path):
    logdir = tmp_path / "runs"
    log = logdir / "tpukit-panel.log"
    panel = make_panel(model=exploding_in_fit, logdir=logdir)
    assert panel.train(wait=True) is None
    assert panel.message.startswith("ArithmeticError: the layer exploded (in Explodes.call())")
    assert "\n" not in panel.message and panel.message.endswith(f"(full traceback in {log})")
    logged = log.read_text()
    assert "panel.train ---" in logged and "Traceback (most recent call last)" in logged
    assert 'raise ArithmeticError("the layer exploded")' in logged  # the line that raised, for the user to find
    assert not panel.running and not panel.buttons["train"].disabled

    # A tpukit error raised from the user's exception keeps that exception's traceback too.
    panel = make_panel(model=exploding_factory, logdir=logdir)
    assert panel.train(wait=True) is None
    assert panel.message.startswith("ModelError: the model factory") and "ZeroDivisionError" in panel.message
    assert panel.message.endswith(f"(full traceback in {log})") and panel.error_log == str(log)
    logged = log.read_text()
    assert logged.count("panel.train ---") == 2 and 'raise ZeroDivisionError("the factory divided by zero")' in logged


def test_a_profiled_run_is_summarized_inline_and_opens_the_profile_tab(make_panel, shared_logdir):
    panel = make_panel(logdir=shared_logdir)
    assert panel.capture_profile() == (10, 14) and panel.form.widgets["profile"].value == "10:14"
    result = panel.train(wait=True)
    assert result.profile_files and result.config["profile"] == [10, 14]
    assert panel.config.profile is None and panel.form.widgets["profile"].value == ""  # for that run only
    summary = panel.profile_summary
    assert summary is not None and summary.step_time_ms > 0 and len(summary.steps) == 5
    shown = text(panel.views["profile"])
    assert "step time" in shown and "Top ops by self time" in shown and summary.top_ops[0].name in shown
    assert is_png(panel.views["profile_chart"])
    frame = text(panel.views["tensorboard"])
    assert '<iframe src="http://127.0.0.1:' in frame and "tag=overview_page" in frame
    assert "/data/plugin/profile/index.html?new_nav=1&run=" in frame  # XProf's own page: no menu over it
    assert panel.views["tensorboard_frame"].outputs == () and panel.shown == []  # an iframe needs no script


def test_reproducibility_and_compare(make_panel):
    panel = make_panel(deterministic=True)
    assert panel.buttons["reproduce"].disabled
    first = panel.train(wait=True)
    check = panel.check_reproducibility(wait=True)
    assert check.reproducible and check.rerun.fingerprint == first.fingerprint
    assert "Reproducible" in text(panel.views["reproducibility"])
    rows = panel.compare()
    assert [r["fingerprint"] for r in rows] == [first.fingerprint] * 2 and len(panel.runs) == 2
    assert all(r["examples_per_sec"] > 0 and "val_accuracy" in r for r in rows)
    assert is_png(panel.views["runs_chart"])
    logdir = first.config["logdir"]
    assert words(panel.views["runs_compared"]) == (
        f"Compared: this kernel's 2 runs (no other run in {logdir}/). No setting differed."
    )
    # a run of the logdir that this kernel did not make (the CLI's, an earlier kernel's): Compare shows it too
    other = directory.new_run_dir(logdir, "cli")
    config = {**first.config, "batch_size": first.config["batch_size"] * 2, "precision": "float32"}
    directory.write_json(other / "config.json", config)
    records.save_result(records.RunResult(run_dir=str(other), status="completed", config=config))
    rows = panel.compare()
    assert len(rows) == 3 and rows[2]["run"] == other.name and len(panel.runs) == 2
    line = words(panel.views["runs_compared"])
    assert line.startswith(f"Compared: this kernel's 2 runs (#1-#2) and 1 run more from {logdir}/ (#3). ")
    assert f"batch: {first.config['batch_size']} vs {config['batch_size']}" in line
    assert other.name not in text(panel.views["runs"])  # the table stays this kernel's (Load model picks from it)
    assert len(panel.compare(logdir=False)) == 2


def test_in_colab_a_run_holds_the_foreground_and_the_interrupt_stops_it(make_panel, shared_logdir):
    calls = []

    def clock():  # the progress callback reads it at every step's start and end: Colab's interrupt arrives there
        calls.append(threading.current_thread())
        if len(calls) == 60:
            raise KeyboardInterrupt
        return time.perf_counter()

    panel = make_panel(ctx=context.COLAB, logdir=shared_logdir, epochs=3, steps_per_execution=1)
    panel.controller.clock = clock
    result = panel.train()  # no wait: in Colab it returns when the run has ended
    assert result.status == "stopped" and "interrupted" in result.message
    assert set(calls) == {threading.main_thread()}
    assert not panel.running and not panel.buttons["train"].disabled

    panel.show_tensorboard(profile=False)
    script = panel.shown[-1].data
    assert "google.colab.kernel.proxyPort" in script and "window.element" in script
    assert "127.0.0.1" not in script


# ---- parts -------------------------------------------------------------------------------
def test_tensorboard_embeds_for_each_front_end(monkeypatch):
    url = "http://127.0.0.1:6123/?run=a%2Fb&tool=overview_page#profile"
    unset_env(monkeypatch, "TENSORBOARD_PROXY_URL", "JUPYTERHUB_SERVICE_PREFIX")
    plain = embed.tensorboard(url, context.JUPYTER)
    assert plain.src == url and not plain.javascript and "<iframe" in plain.html
    assert embed.tensorboard(url, context.VSCODE) == plain
    monkeypatch.setenv("TENSORBOARD_PROXY_URL", "/user/me/proxy/%PORT%/")
    proxied = embed.tensorboard(url, context.JUPYTER)
    assert proxied.src == "/user/me/proxy/6123/?run=a%2Fb&tool=overview_page#profile"
    colab = embed.tensorboard(url, context.COLAB)
    assert (
        "proxyPort(port" in colab.javascript
        and '(6123, "/?run=a%2Fb&tool=overview_page#profile", 800)' in colab.javascript
    )
    assert embed.tensorboard(url, context.NONE).html.startswith("TensorBoard: http://127.0.0.1:6123/")
    with pytest.raises(ValueError, match="Unknown context"):
        embed.tensorboard(url, "emacs")


def test_redraws_are_throttled_by_wall_time_and_by_their_cost():
    from tpukit.ui.throttle import Throttle

    throttle = Throttle(every=1.0, budget=0.01)
    assert throttle.due(0.0)
    throttle.done(0.0, cost=0.002)  # cheap: every second
    assert not throttle.due(0.9) and throttle.due(1.0)
    throttle.done(1.0, cost=0.05)  # 50 ms: at most every 5 s to stay within 1%
    assert not throttle.due(5.9) and throttle.due(6.0)
    assert throttle.spent == pytest.approx(0.052)


class Sink:
    def __init__(self):
        self.progress, self.curves = [], 0

    def show_progress(self, p):
        self.progress.append(p)

    def show_curves(self, points, epochs):
        self.curves += 1

    def sized(self, total_steps):
        self.total_steps = total_steps


def test_the_progress_callback_reports_by_wall_time_not_by_step():
    ticks = iter(range(10**6))
    sink = Sink()
    # two reads a step (its start and its end), 0.5 ms each: 1 ms a step
    callback = progress.make_callback(sink, global_batch=32, clock=lambda: next(ticks) / 2000)
    callback.set_params({"epochs": 2, "steps": 1500})
    callback.on_train_begin()
    for epoch in range(2):
        callback.on_epoch_begin(epoch)
        for step in range(1500):
            callback.on_train_batch_begin(step)
            callback.on_train_batch_end(step, {"loss": 1.0, "accuracy": 0.5})
        callback.on_epoch_end(epoch, {"loss": 1.0, "accuracy": 0.5, "val_loss": 1.0, "val_accuracy": 0.5})
    callback.on_train_end()
    assert 6 <= len(sink.progress) <= 9  # ~3 s of steps: text every 0.5 s, not 3000 times
    assert 3 <= sink.curves <= 5  # the plot every 1 s, and once at the end
    last = sink.progress[-1]
    assert last.done and last.global_step == 3000 and last.fraction == 1.0
    assert sink.progress[-2].examples_per_sec == pytest.approx(32 / 0.001, rel=0.05)


def test_a_cell_ending_with_a_shown_panel_names_it_instead_of_a_second_copy(make_panel, capsys):
    panel = make_panel()
    panel.display()  # as tpukit.panel() does
    shown = list(panel.shown)
    panel._ipython_display_()  # what IPython calls for a cell ending with `panel`
    assert panel.shown == shown and capsys.readouterr().out.endswith(
        ": shown above (panel.display() shows it here too).\n"
    )
    panel.display()  # asked for: another view
    assert len(panel.shown) == len(shown) + 1


def test_without_a_notebook_the_panel_is_text(capsys, tmp_path):
    panel = Panel(RunConfig(**SMALL, logdir=str(tmp_path)), context=context.NONE, runs=[])
    panel.display()
    out = capsys.readouterr().out
    assert out.startswith("tpukit panel (none)") and '"dataset": "digits"' in out
    assert repr(panel) == "<tpukit Panel: none, not connected, 0 runs, idle>"
    panel.close()


def test_tune_batch_size_shows_the_trials_and_sets_the_recommended_batch(make_panel):
    """The Tune button on the reader's own model and arrays: a table, a chart, and the batch size set."""
    from usermodels import images, user_cnn

    panel = make_panel(model=user_cnn, data=images(512), precision="float32")
    panel.buttons["tune"].click()
    assert panel.wait(300) is not None or panel.message.startswith("Batch size set to")
    result = panel.controller.job.result
    assert result.recommended == panel.config.batch_size and result.recommended % 8 == 0
    shown = words(panel.views["tuning"])
    assert "examples/s" in shown and "Recommended: batch_size=" in shown
    highlighted = re.search(r'<tr style="font-weight:600[^"]*"><td[^>]*>(\d+)</td>', panel.views["tuning"].value)
    assert highlighted and int(highlighted.group(1)) == result.recommended, panel.views["tuning"].value
    chart = panel.views["tuning_chart"]
    assert chart.layout.display == "" and chart.value[:4] == b"\x89PNG"
    assert chart.layout.width == f"{int.from_bytes(chart.value[16:20], 'big') // 2}px"  # drawn at 2x, never stretched
    assert panel.message == f"Batch size set to {result.recommended} per replica (tuned; the table says why)."
    assert not panel.buttons["tune"].disabled and not panel.buttons["train"].disabled


def test_a_language_models_run_shows_its_preset_by_name_its_lora_rank_row_length_and_tokens_per_second():
    from tpukit.ui import tables

    row = {
        "run": "r",
        "status": "completed",
        "model": "/tmp/presets/tiny_gemma",
        "dataset": "pydoc",
        "precision": "float32",
        "batch_size": 16,
        "replicas": 1,
        "examples_per_sec": 3915.0,
        "tokens_per_sec": 62640.0,
        "lora_rank": 4,
        "sequence_length": 16,
        "val_perplexity": 262.4,
    }
    page = html.unescape(tables.runs([row, {**row, "model": "hf://google/gemma-3-1b-it", "lora_rank": None}]))
    assert '"/tmp/presets/tiny_gemma">tiny_gemma (LoRA r4, 16 tokens) / pydoc<' in page  # the path in the tooltip
    assert ">hf://google/gemma-3-1b-it (full, 16 tokens) / pydoc<" in page
    assert 'title="62,640 tokens/s">3,915<' in page and ">perplexity 262.4<" in page
    preferred = {**row, "dataset": "<preferences>", "val_logp_chosen": -117.1, "val_reward_accuracy": 0.875}
    del preferred["val_perplexity"]
    assert ">reward accuracy 87.5%<" in html.unescape(tables.runs([preferred]))  # a DPO run's own figure


def test_the_runs_table_is_narrow_names_never_wrap_and_numbers_line_up():
    """The helper's screenshot: 16 columns made a 1314 px table in an 848 px output; run names wrapped. The UX
    report: 894 px beside JupyterLab's file browser (845 px), its note column squeezed: a note is a line under
    its run, and the fingerprint is cut to 8 characters (the whole one in its tooltip)."""
    from tpukit.ui import tables

    rows = [
        {
            "run": "20261124-101010-mlp-digits",
            "status": "completed",
            "model": "mlp",
            "dataset": "digits",
            "precision": "mixed_bfloat16",
            "batch_size": 32,
            "replicas": 8,
            "deterministic": True,
            "examples_per_sec": 12345.6,
            "val_accuracy": 0.9531,
            "fingerprint": "fa82969f8d1fd1ed",
        },
        {
            "run": "20261124-101011-cnn",
            "status": "stopped",
            "model": "cnn",
            "dataset": "mnist5k",
            "precision": "float32",
            "batch_size": 64,
            "replicas": 1,
        },
    ]
    page = tables.runs(rows, ["", "stopped by the user (resumable)"])
    cells = re.findall(r"<t[hd] style=\"([^\"]*)\"(?: title=\"([^\"]*)\")?>([^<]*)</t[hd]>", page)
    assert page.startswith('<div style="overflow-x:auto')
    shown = [html.unescape(value) for _, _, value in cells]
    assert shown[:9] == [
        "#",
        "run",
        "status",
        "model / data",
        "precision",
        "batch",
        "examples/s",
        "validation",
        "fingerprint",
    ]
    assert shown[9:18] == [
        "1",
        "20261124-101010-mlp-digits",
        "completed",
        "mlp / digits",
        "bf16",
        "32 × 8",
        "12,346",
        "95.3%",
        "fa82969f det",
    ]
    assert html.unescape(cells[17][1]) == "weights' fingerprint fa82969f8d1fd1ed (deterministic run)"
    assert cells[13][1] == "mixed_bfloat16"  # the short precision's tooltip is the policy's name
    assert shown[18:27] == ["2", "20261124-101011-cnn", "stopped", "cnn / mnist5k", "fp32", "64", "–", "–", "–"]
    assert len(cells) == 27 and page.count("<tr>") == 4  # header, run 1, run 2, and run 2's note under it:
    assert re.search(
        r'<tr><td></td><td colspan="8" style="[^"]*white-space:normal">stopped by the user '
        r"\(resumable\)</td></tr></table>",
        page,
    )
    styles = [style for style, _, _ in cells]
    assert all("nowrap" in s for s in styles)
    assert ["text-align:right" in s for s in styles[:9]] == [True, False, False, False, False, False, True, True, False]


def test_differences_names_the_settings_that_differed_between_runs():
    """Compare's line: the recorded configs' differing settings, in RunConfig's order, each value once."""
    from tpukit.runs.records import RunResult, differences

    base = RunConfig(dataset="digits", model="mlp", precision="float32", batch_size=32).to_dict()
    a = RunResult(run_dir="runs/a", status="completed", config={**base, "logdir": "runs", "name": "a"})
    b = RunResult(
        run_dir="runs/b",
        status="completed",
        config={**base, "precision": "mixed_bfloat16", "batch_size": 64, "name": "b", "profile": [2, 4]},
    )
    c = {**base, "batch_size": 64, "logdir": "elsewhere"}
    assert differences([a, b]) == ["batch: 32 vs 64", "precision: float32 vs mixed_bfloat16"]
    assert differences([a, b, c]) == ["batch: 32 vs 64", "precision: float32 vs mixed_bfloat16"]
    assert differences([a, {**base, "name": "again"}]) == [] and differences([]) == []
    older = {k: v for k, v in base.items() if k not in ("seed", "batch_size")}  # an older record: the defaults
    assert differences([base, {**base, "init_from": "/tmp/runs/20261124-101010-mlp"}, older]) == [
        "batch: 32 vs 64",
        "started from: – vs 20261124-101010-mlp",
    ]
    assert differences([base, {**base, "future_field": 1}]) == ["future_field: – vs 1"]
    assert differences([base, {**base, "metrics": ["accuracy", "mae"]}]) == ["metrics: accuracy vs accuracy, mae"]


def test_the_steps_per_execution_note_says_what_auto_becomes_here_fake_tpu(make_panel):
    from tpukit.hardware.jax_devices import JaxRuntime

    panel = make_panel(accelerator="cpu", precision="float32")
    note = panel.form.notes["steps_per_execution"]
    assert "decided when the run starts" in words(note)
    panel.connect()
    assert words(note) == "auto on the CPU: from the model's step time, when the run starts"
    assert 'title="auto on the CPU: up to 32 steps per call while a call stays under 50 ms' in note.value
    # a TPU cannot be here: its hardware path built by hand
    fake_tpu = JaxRuntime(backend="jax", kind="tpu", devices=("TPU_0",), replicas=1, strategy=None)
    panel.form.explain(panel.config.replace(steps_per_epoch=100), runtime=fake_tpu)
    assert words(note) == "auto → 25 on TPU"
    panel.form.explain(panel.config.replace(steps_per_execution=4), runtime=fake_tpu)
    assert note.value == ""


class CurveSink(Sink):
    def show_curves(self, points, epochs):
        super().show_curves(points, epochs)
        self.points, self.epochs = list(points), list(epochs)


def _fit_steps(callback, epochs, steps, first_epoch=0, loss=lambda g: 1.0 / g):
    """Keras' hooks in fit's order; `loss(g)` is global step g's own loss, logged as Keras does: the epoch's
    running mean."""
    callback.set_params({"epochs": epochs, "steps": steps})
    callback.on_train_begin()
    for epoch in range(first_epoch, epochs):
        callback.on_epoch_begin(epoch)
        total = 0.0
        for step in range(steps):
            g = epoch * steps + step + 1
            total += loss(g)
            callback.on_train_batch_begin(step)
            callback.on_train_batch_end(step, {"loss": total / (step + 1), "accuracy": 0.5})
        callback.on_epoch_end(epoch, {"loss": 0.1, "accuracy": 0.5, "val_loss": 0.2, "val_accuracy": 0.4})
    callback.on_train_end()


def test_the_curves_get_every_step_of_a_short_run_and_a_window_of_a_long_one():
    """Not a point per text update: a 40-step run drew a straight line between two points."""
    sink = CurveSink()
    _fit_steps(progress.make_callback(sink, global_batch=8), epochs=2, steps=20)
    assert [g for g, _, _ in sink.points] == list(range(1, 41))
    assert sink.points[9][1] == pytest.approx(1 / 10)  # that step's own loss, not the epoch's running mean
    sink = CurveSink()
    _fit_steps(progress.make_callback(sink, global_batch=8), epochs=3, steps=1000)
    assert len(sink.points) == progress.POINTS and sink.points[-1][0] == 3000


def test_after_resume_in_a_new_kernel_the_kept_epochs_are_their_means_at_their_ends_apart_from_the_line():
    """result.json keeps per-epoch history only: a kept epoch's mean was drawn as the train line's first point, so
    the line fell from 1.37 to 0.5 at the resume step, a jump an unbroken run does not have."""
    from tpukit.ui import plots

    sink = CurveSink()
    earlier = {"loss": [0.9, 0.7], "accuracy": [0.3, 0.5], "val_loss": [0.8, 0.6], "val_accuracy": [0.4, 0.5]}
    _fit_steps(progress.make_callback(sink, global_batch=8, earlier=earlier), epochs=4, steps=10, first_epoch=2)
    assert [g for g, _, _ in sink.points] == list(range(21, 41))  # the line: every new step, and nothing else
    drawn = plots.series(sink.points, sink.epochs)
    assert drawn["loss"][0][0] == 21 and drawn["mean_loss"] == ([10, 20], [0.9, 0.7])
    assert drawn["mean_accuracy"] == ([10, 20], [0.3, 0.5])
    assert drawn["val_loss"] == ([10, 20, 30, 40], [0.8, 0.6, 0.2, 0.2])
    last = sink.progress[-1]
    assert last.global_step == 40 and last.fraction == 1.0
    assert plots.LiveCurves().render(sink.points, sink.epochs)[:4] == b"\x89PNG"


def _stopped(callback, steps, stop_after):
    """A run stopped at step `stop_after` of its second epoch, as Keras ends it: the epoch ends early, with
    validation."""
    callback.set_params({"epochs": 3, "steps": steps})
    callback.on_train_begin()
    for epoch, last in ((0, steps), (1, stop_after)):
        callback.on_epoch_begin(epoch)
        for step in range(last):
            callback.on_train_batch_begin(step)
            callback.on_train_batch_end(step, {"loss": 2.0 - 0.01 * (epoch * steps + step), "accuracy": 0.5})
        callback.on_epoch_end(
            epoch, {"loss": 1.5, "accuracy": 0.5, "val_loss": 1.0 - epoch / 2, "val_accuracy": 0.25 + epoch / 2}
        )
    callback.on_train_end()


def test_a_stop_mid_epoch_draws_no_validation_and_a_resume_in_the_kernel_goes_on_from_the_steps_drawn(tmp_path):
    """The run keeps whole epochs only: the partial epoch's validation (which the status line does not report) is
    not drawn, and a Resume in the same kernel redraws the kept epoch's steps as they were and goes on after them."""
    from tpukit.ui import plots

    sink = CurveSink()
    first = progress.make_callback(sink, global_batch=8)
    _stopped(first, steps=10, stop_after=6)
    assert [g for g, _, _ in sink.points] == list(range(1, 17))  # the steps it ran, the partial epoch's too
    assert sink.epochs == [(10, {"val_loss": 1.0, "val_accuracy": 0.25})]  # validation at whole epochs only
    run_dir = str(tmp_path / "run")
    progress.remember(run_dir, first)
    kept = sink.points[:10]

    sink = CurveSink()
    earlier = {"loss": [1.5], "accuracy": [0.5], "val_loss": [1.0], "val_accuracy": [0.25]}
    resumed = progress.make_callback(sink, global_batch=8, earlier=earlier, before=progress.drawn(run_dir))
    _fit_steps(resumed, epochs=3, steps=10, first_epoch=1)
    assert [g for g, _, _ in sink.points] == list(range(1, 31))  # no gap, no collapsed point, no step twice
    assert sink.points[:10] == kept  # the kept epoch as it was drawn; the redone epoch's first try is gone
    drawn = plots.series(sink.points, sink.epochs)
    assert drawn["mean_loss"] == ([], []) and drawn["val_loss"][0] == [10, 20, 30]
    assert progress.drawn(run_dir).whole_epochs == 1  # until the resumed run is remembered
    progress.remember(run_dir, resumed)
    assert progress.drawn(run_dir).whole_epochs == 3 and len(progress.drawn(run_dir).points) == 30


def test_a_tensorboard_the_panel_started_stops_when_its_kernel_exits(tmp_path):
    """Seen in JupyterLab: after the server shut its kernel down, the panel's TensorBoard went on serving."""
    code = (
        "import json, tpukit\n"
        "from tpukit.ui import context\n"
        f"p = tpukit.panel(tpukit.RunConfig(logdir={str(tmp_path)!r}), display=False, context=context.JUPYTER, "
        "display_fn=lambda *a: None, runs=[])\n"
        "print(json.dumps(p.show_tensorboard()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    url = json.loads(done.stdout.strip().splitlines()[-1])
    port = int(re.search(r"127\.0\.0\.1:(\d+)", url).group(1))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return  # nothing listens there any more
        time.sleep(0.5)
    raise AssertionError(f"TensorBoard still serves {url} after its Python exited")


def test_the_backend_field_says_what_the_kernel_runs_and_a_switch_is_refused_in_one_line(make_panel):
    panel = make_panel(accelerator="cpu")
    assert "backend" in panel.form.widgets and panel.config.backend == "auto"
    panel.form.widgets["backend"].value = "jax"  # this test process runs Keras on TensorFlow
    assert panel.config.backend == "jax"
    assert words(panel.form.notes["backend"]) == "this kernel runs Keras on tensorflow; restart it to use jax"
    assert panel.train(wait=True) is None
    assert "cannot switch to jax" in panel.message and "\n" not in panel.message


@pytest.mark.slow
def test_a_jax_run_from_the_panel_in_a_fresh_kernel(tmp_path):
    """What Colab's TPU runtime does (there JAX is the only backend): the panel connects JAX and trains on it."""
    code = (
        "import json, tpukit\n"
        "from tpukit.ui import context\n"
        f"p = tpukit.panel(tpukit.RunConfig(backend='jax', model='mlp', dataset='digits', epochs=1, "
        f"steps_per_epoch=5, logdir={str(tmp_path)!r}), display=False, context=context.JUPYTER, "
        "display_fn=lambda *a: None, runs=[])\n"
        "r = p.train(wait=True)\n"
        "import numpy as np\n"
        "shape = p.model.predict(np.zeros((2, 8, 8, 1), 'uint8'), verbose=0).shape\n"
        "print(json.dumps({'status': r.status, 'backend': r.config['backend'], 'chip': p.views['chip'].value, "
        "'same': p.runs[-1].model is p.model, 'shape': list(shape)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "completed" and out["backend"] == "jax" and "CPU · jax · 1 replica" in out["chip"]
    assert out["same"] and out["shape"] == [2, 10]  # panel.model on JAX predicts outside the run's scope


def test_a_refused_field_shows_its_error_not_its_note(make_panel):
    panel = make_panel()
    note, error = panel.form.notes["batch_size"], panel.form.errors["batch_size"]
    assert note.layout.display == "" and "global batch" in words(note)
    panel.form.widgets["batch_size"].value = "1.5"
    assert error.layout.display == "" and note.layout.display == "none"
    panel.form.widgets["batch_size"].value = "16"
    assert error.layout.display == "none" and note.layout.display == "" and "global batch 16" in words(note)


def test_compare_is_on_when_only_the_logdir_has_runs(make_panel, tmp_path):
    """A new kernel over a logdir of earlier runs (the CLI's, yesterday's): Compare has something to show."""
    logdir = tmp_path / "earlier"
    panel = make_panel(logdir=logdir)
    assert panel.buttons["compare"].disabled  # no run anywhere yet
    run_dir = directory.new_run_dir(str(logdir), "cli")
    directory.write_json(run_dir / "config.json", panel.config.to_dict())
    records.save_result(records.RunResult(run_dir=str(run_dir), status="completed", config=panel.config.to_dict()))
    panel.controller.refresh()
    assert not panel.buttons["compare"].disabled and panel.runs == []
    assert len(panel.compare()) == 1 and "the 1 run in" in words(panel.views["runs_compared"])
