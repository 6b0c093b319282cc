"""The panel's controller without widgets, and the one progress model the CLI and the panel share.

The controller runs real training on the CPU; the widget-free test blocks ipywidgets in a fresh Python,
so an import of it anywhere on the controller's path fails the test.
"""

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tpukit.observe import meter as progress_model
from tpukit.ui import progress
from tpukit.training import api as training
from tpukit.training import plan
from tpukit.config import RunConfig

REPO = Path(__file__).resolve().parents[2]

CONTROLLER_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.modules["ipywidgets"] = None  # any import of ipywidgets now fails
    from tpukit.ui.controller import Controller, View

    class Recorder(View):
        def __init__(self):
            super().__init__()
            self.said, self.shown = [], []
        def status(self, text, kind="info"):
            self.said.append((kind, text))
        def show_runs(self, rows, notes):
            self.shown.append(("runs", len(rows), notes))
        def controls(self, controls):
            self.shown.append(("controls", controls.disabled["train"], controls.train_off))

    view = Recorder()
    c = Controller({"dataset": "digits", "model": "mlp", "epochs": 2, "batch_size": 32,
                    "logdir": sys.argv[1], "deterministic": True}, view=view, context="none", runs=[])
    c.start()
    out = {}
    out["refused"] = c.propose({"batch_size": "1.5", "epochs": 0})
    out["train_off"] = c.controls().train_off
    try:
        c.train(wait=True)
        out["train_while_refused"] = "ran"
    except Exception as e:
        out["train_while_refused"] = type(e).__name__
    out["accepted"] = c.propose({"batch_size": 16, "epochs": 2})
    out["batch_size"] = c.config.batch_size
    out["window"] = c.capture_profile()
    c.config = {"profile": None}
    result = c.train(wait=True)
    out["status"] = result.status
    out["steps_per_epoch"] = result.steps_per_epoch
    out["progress"] = c.progress.text() if c.progress else None
    out["global_step"] = c.progress.global_step if c.progress else None
    out["controls"] = c.controls().disabled
    out["resume"] = c.controls().resume_tip
    out["message"] = c.message
    out["runs_shown"] = [s for s in view.shown if s[0] == "runs"][-1][1]
    out["ipywidgets"] = sys.modules.get("ipywidgets") is not None
    print("RESULT " + json.dumps(out))
""")


def test_the_controller_trains_without_ipywidgets(tmp_path):
    """Every action of the panel, driven with no widget library importable: refuse, accept, train, record."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TPUKIT_SMOKE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CONTROLLER_SCRIPT, str(tmp_path / "runs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[len("RESULT ") :])
    assert set(out["refused"]) == {"batch_size", "epochs"}, out["refused"]
    assert "batch size must be a whole number" in out["refused"]["batch_size"]
    assert out["train_off"].startswith("Train is off: ") and "epochs" in out["train_off"]
    assert out["train_while_refused"] == "ConfigError"
    assert out["accepted"] == {} and out["batch_size"] == 16
    assert out["window"][0] < out["window"][1]
    assert out["status"] == "completed" and out["message"].startswith("completed:")
    assert out["global_step"] == 2 * out["steps_per_epoch"]  # the progress model counted every step
    assert "epoch 2/2" in out["progress"] and "examples/s" in out["progress"]
    assert out["controls"]["train"] is False and out["controls"]["stop"] is True
    assert out["controls"]["compare"] is False and out["controls"]["reproduce"] is False
    assert "completed" in out["resume"]  # Resume says why it is off: the run is complete
    assert out["runs_shown"] == 1 and out["ipywidgets"] is False
    assert len(done.stdout.splitlines()) == 1, done.stdout  # the result alone: the panel's run writes no text progress


# ---- one place for the run's shape ------------------------------------------------------------------


@pytest.mark.parametrize("replicas, batch, split", [(1, 32, 0.1), (8, 16, 0.1), (2, 64, None), (1, 8, 0.5)])
def test_plan_agrees_with_the_trainer(replicas, batch, split):
    """`plan.make` (before loading) counts the steps the trainer counts on the loaded data."""
    from tpukit.data import pipeline
    from tpukit.data import sources

    config = RunConfig(dataset="digits", model="mlp", batch_size=batch, replicas=replicas, validation_split=split)
    planned = plan.make(config, replicas)
    assert planned.global_batch == batch * replicas == config.global_batch_size
    loaded = sources.prepare("digits", name="digits", seed=config.seed, validation_split=split)
    assert planned.steps_per_epoch == pipeline.steps_per_epoch(len(loaded.train), batch * replicas)
    assert planned.steps_per_epoch == plan.steps_per_epoch(config, len(loaded.train), replicas)
    assert plan.make(config.replace(steps_per_epoch=7), replicas).steps_per_epoch == 7


def test_plan_of_data_it_cannot_count():
    """A tf.data input's length is known only to the run: no steps planned (the panel's axes then grow)."""
    config = RunConfig(dataset="mine", model="mlp")
    assert plan.make(config, 1, data=lambda: None).steps_per_epoch is None


# ---- the progress model ------------------------------------------------------------------------------


class FakeClock:
    """A clock the test moves by hand: the views read the same times."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _drive(callbacks, clock, steps=10, epochs=2, step_s=0.1, first_s=2.0):
    """The hooks Keras' fit calls, in its order, with a first step that compiles."""
    for cb in callbacks:
        cb.set_params({"steps": steps, "epochs": epochs})
        cb.on_train_begin()
    for epoch in range(epochs):
        for cb in callbacks:
            cb.on_epoch_begin(epoch)
        for batch in range(steps):
            for cb in callbacks:
                cb.on_train_batch_begin(batch)
            clock.now += first_s if (epoch, batch) == (0, 0) else step_s
            for cb in callbacks:
                cb.on_train_batch_end(batch, {"loss": 1.0 / (batch + 1), "accuracy": 0.5})
        clock.now += 1.0  # validation: in neither the rate nor the ETA
        for cb in callbacks:
            cb.on_epoch_end(epoch, {"loss": 0.1, "accuracy": 0.5, "val_loss": 0.2})
    for cb in callbacks:
        cb.on_train_end()


def test_the_cli_and_the_panel_read_one_progress_model():
    """ProgressLogger (CLI) and the panel's callback, fed the same steps and clock, report the same rate."""
    from tpukit.training import callbacks
    from tpukit.ui import progress

    clock = FakeClock()
    stream = io.StringIO()
    sink = progress.ProgressRecord()
    cli = callbacks.ProgressLogger(2, 10, stream=stream, clock=clock, global_batch=64)
    panel = progress.make_callback(sink, global_batch=64, clock=clock, text_every=0.0)
    _drive([cli, panel], clock)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("epoch 2/2  step 10/10")
    assert "val_loss 0.2000" in lines[1] and "640 examples/s" in lines[1], lines  # 64 per 0.1 s, validation out
    assert sink.latest.done and sink.latest.examples_per_sec == pytest.approx(640.0)
    assert cli.meter.progress(clock.now).examples_per_sec == pytest.approx(sink.latest.examples_per_sec)
    assert sink.latest.global_step == cli.meter.global_step == 20


def test_the_eta_leaves_out_the_compiling_step_and_validation():
    meter = progress_model.Meter(global_batch=10, steps=10, epochs=2)
    meter.epoch(0, 0.0)
    meter.step(1, 5.0)  # tracing and compiling
    for step in range(2, 6):
        meter.step(step, 5.0 + 0.5 * (step - 1))
    p = meter.progress(now=100.0)  # read late: the ETA is as of the latest step
    assert p.eta_s == pytest.approx(15 * 0.5) and p.examples_per_sec == pytest.approx(20.0)
    assert p.fraction == pytest.approx(5 / 20) and "ETA 8s" in p.text()


def test_a_resumed_run_counts_on_from_its_kept_epochs():
    meter = progress_model.Meter(global_batch=1, steps=10, epochs=3)
    meter.epoch(1, 0.0)  # resumed at the second epoch
    meter.step(4, 1.0)
    assert meter.progress(1.0).global_step == 14


def test_several_steps_per_call_count_every_step():
    """With steps_per_execution > 1 Keras reports once per call, with the last step's index."""
    meter = progress_model.Meter(global_batch=8, steps=12, epochs=1)
    meter.epoch(0, 0.0)
    for last in (4, 8, 12):
        meter.step(last, float(last))
    p = meter.progress(12.0)
    assert p.global_step == 12 and p.examples_per_sec == pytest.approx(8.0)


def test_calls_reported_out_of_order_still_time_the_run():
    """Keras runs async-safe step hooks in a thread pool on JAX: two calls' reports can reach the meter out of order.
    One that read the clock first but lost the race is the run's first step after all; one that ran late is not."""
    raced = progress_model.Meter(global_batch=10, steps=40, epochs=1)
    raced.epoch(0, 0.0)
    raced.step(40, 2.0)
    raced.step(20, 1.0)  # read its clock at 1.0, reached the meter second
    assert raced.run_rate() == pytest.approx(20 * 10 / 1.0) and raced.first_step_end() == 1.0
    late = progress_model.Meter(global_batch=10, steps=40, epochs=1)
    late.epoch(0, 0.0)
    late.step(40, 2.0)
    late.step(20, 3.0)  # its hook ran after the later one's: its time says nothing of when step 20 ended
    assert late.run_rate() is None and late.first_step_end() == 2.0 and late.global_step == 40


def test_the_curves_show_each_steps_loss_not_the_epochs_running_mean():
    """Keras logs running means that restart every epoch; the curve shows each step's own loss, so a steadily
    falling loss draws no jump where an epoch begins."""
    from tpukit.ui import progress

    sink = progress.ProgressRecord()
    callback = progress.make_callback(sink, global_batch=8, clock=FakeClock())
    callback.set_params({"steps": 5, "epochs": 2})
    callback.on_train_begin()
    true_loss = [1.0 - 0.05 * g for g in range(10)]
    for epoch in range(2):
        callback.on_epoch_begin(epoch)
        for batch in range(5):
            seen = true_loss[epoch * 5 : epoch * 5 + batch + 1]
            callback.on_train_batch_begin(batch)
            callback.on_train_batch_end(batch, {"loss": sum(seen) / len(seen), "accuracy": 0.25})
        callback.on_epoch_end(epoch, {"loss": sum(true_loss[epoch * 5 : epoch * 5 + 5]) / 5})
    callback.on_train_end()
    points, _ = sink.curves
    assert [p[0] for p in points] == list(range(1, 11))
    assert [p[1] for p in points] == pytest.approx(true_loss)
    assert [p[2] for p in points] == pytest.approx([0.25] * 10)


def test_the_runs_table_and_chart_show_a_regression_models_own_validation_metric():
    """A user's regression model has no accuracy: the table shows its val MAE, the chart plots it (not zeros)."""
    from tpukit.ui import plots, tables

    rows = [
        {
            "run": "r1",
            "status": "completed",
            "model": "m",
            "dataset": "d",
            "batch_size": 8,
            "replicas": 1,
            "val_loss": 0.5,
            "val_mae": 0.25,
            "examples_per_sec": 100.0,
        },
        {
            "run": "r2",
            "status": "completed",
            "model": "m",
            "dataset": "d",
            "batch_size": 8,
            "replicas": 1,
            "val_loss": 0.4,
            "val_mae": 0.2,
            "examples_per_sec": 120.0,
        },
    ]
    html_table = tables.runs(rows)
    assert "mae 0.25" in html_table and "mae 0.2<" in html_table and "validation" in html_table
    assert tables.validation_key({"val_loss": 1.0}) == "val_loss"
    assert tables.validation_key({"val_accuracy": 0.5, "val_loss": 1.0}) == "val_accuracy"
    assert tables.validation_key({"loss": 1.0}) is None
    assert plots.runs_chart(rows).startswith(b"\x89PNG")


def test_stop_is_off_once_training_has_ended_while_the_profile_is_shown(tmp_path):
    """A profiled run shows its summary and starts TensorBoard after training: Stop is off by then (a person
    would press it on a finished run)."""
    from tpukit.ui.controller import Controller, View

    seen = []

    class Watch(View):
        def profile(self, summary=None, text="", kind="info"):
            seen.append((controller.running, controller.controls().disabled["stop"], controller.stop()))

    controller = Controller(
        {
            "dataset": "digits",
            "model": "mlp",
            "epochs": 1,
            "batch_size": 32,
            "profile": (2, 4),
            "logdir": str(tmp_path),
        },
        view=Watch(),
        context="none",
        runs=[],
        auto_tensorboard=False,
    )
    result = controller.train(wait=True)
    assert result.status == "completed" and result.profile_files
    assert seen and seen[0] == (True, True, False)  # still busy showing it, Stop off, a stop does nothing
    assert controller.message.startswith("Nothing to stop")


def test_two_tensorboard_opens_at_once_start_one_server(tmp_path):
    """A profiled run's job opens TensorBoard while the person opens its section: one server, not two."""
    import threading

    from tpukit.observe import tensorboard as tb
    from tpukit.ui.controller import Controller

    (tmp_path / "runs").mkdir()
    controller = Controller({"logdir": str(tmp_path / "runs")}, context="jupyter", runs=[])
    urls = []
    threads = [threading.Thread(target=lambda: urls.append(controller.show_tensorboard())) for _ in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert len(urls) == 2 and urls[0] and urls[0] == urls[1]
        assert len(tb.running(str(tmp_path / "runs"))) == 1
    finally:
        controller.close()
        for instance in tb.running(str(tmp_path / "runs")):
            tb.stop(instance)


def test_a_runs_row_says_whether_its_model_loads_and_load_model_says_why_not(tmp_path):
    """A run kept in memory loads; one read from a directory without weights says so in its row and in one line."""
    from tpukit.runs import directory, records
    from tpukit.ui.controller import Controller, NoRunError, View

    class Recorder(View):
        shown = None

        def show_runs(self, rows, notes):
            self.shown = (rows, notes)

    empty = directory.new_run_dir(str(tmp_path), "empty")
    directory.write_json(empty / "config.json", RunConfig().to_dict())
    records.save_result(records.RunResult(run_dir=str(empty), status="stopped", config=RunConfig().to_dict()))
    kept = records.RunResult(run_dir=str(tmp_path / "kept"), status="completed", config=RunConfig().to_dict())
    kept.attach_model(object())  # a model trained in this kernel
    view = Recorder()
    c = Controller(RunConfig(logdir=str(tmp_path)), view=view, context="none", runs=[records.load(empty), kept])
    c.render_runs()
    rows, notes = view.shown
    assert [row["model_loads"] for row in rows] == [False, True]
    assert [row["model_saved"] for row in rows] == [False, False]  # kept in memory: tpukit.load could not
    assert "no model to load" in notes[0] and "no model" not in notes[1]
    assert "model in this kernel only" in notes[1] and "tpukit.load" in notes[1]
    assert c.controls().disabled["load_model"] is False
    with pytest.raises(directory.RunDirError, match="holds no weights"):
        c.load_model(0)
    assert c.load_model() is kept.model and c.model is kept.model  # the latest that loads
    c.start_from(1)
    assert c.config.init_from == kept.run_dir
    with pytest.raises(NoRunError, match="No run #7"):
        c.export(7)


def test_a_refusal_is_worded_from_the_errors_facts_never_from_its_message():
    """Errors as data (issue 20): the sentence under a field comes from the error's `.field`, `.value`,
    `.expected` and `.detail`; a message worded differently says the same under the field."""
    from tpukit.config import ConfigError
    from tpukit.runs.records import RunResult
    from tpukit.ui import messages, resumable

    with pytest.raises(ConfigError) as refused:
        RunConfig(precision="fp8")
    assert messages.plain(refused.value) == (
        "precision must be one of 'auto', 'float32', 'mixed_bfloat16', 'mixed_float16'; received 'fp8'."
    )
    reworded = ConfigError(
        "Nicht erlaubt.", field="precision", value="fp8", expected="one of 'auto', 'float32'", detail=None
    )
    assert messages.field_of(reworded) == "precision"
    assert messages.plain(reworded) == "precision must be one of 'auto', 'float32'; received 'fp8'."
    with pytest.raises(ConfigError) as too_big:
        RunConfig(dataset="digits", batch_size=64).check_examples(100, 2)
    assert messages.plain(too_big.value).startswith("batch size: dataset 'digits' has 100 training examples")
    assert messages.field_of(ValueError("no field named")) is None
    assert messages.plain(ValueError("no field named")) == "no field named"

    stopped = RunResult(
        run_dir="r",
        status="stopped",
        config={},
        cause="interrupted (KeyboardInterrupt)",
        message="interrupted (KeyboardInterrupt); resume continues from the last whole epoch",
    )
    assert resumable.without_promise(stopped) == "interrupted (KeyboardInterrupt)"
    failed = RunResult(run_dir="r", status="failed", config={}, message="ValueError: bad")
    assert resumable.without_promise(failed) == "ValueError: bad"


# ---- the status line: the phase a run is in --------------------------------------------------------------------


def _phases(status, clock, meter, epochs=(0, 1), steps=(1, 19, 36)):
    """Feed `status` what the panel's callback reports for a run: fit begins, then a few steps of each epoch."""
    for epoch in epochs:
        meter.epoch(epoch, clock.now)
        status.show_progress(meter.progress(clock.now))  # the report at the epoch's first step's start
        if epoch == epochs[0]:
            clock.now += 41.6  # the first step traces and compiles
            status.tick()
        for step in steps:
            clock.now += 0.1
            meter.step(step, clock.now)
            status.show_progress(meter.progress(clock.now))


def test_the_status_line_names_the_phase_from_the_progress_model():
    """Building, the first step with its seconds (a tick, as the controller's ticker gives it), epoch and step,
    the end of training; no "Starting…" once steps run."""
    from tpukit.ui.phases import RunStatus

    clock, said = FakeClock(), []
    status = RunStatus(progress.ProgressRecord(), said.append, "cnn-mnist5k", clock, ticking=True)
    status.building()  # at the click
    clock.now += 3.4
    status.tick()
    status.start("cnn-mnist5k", False, 2.5)  # the job: connected, still building
    meter = progress_model.Meter(global_batch=64, steps=36, epochs=2)
    _phases(status, clock, meter)
    status.show_progress(meter.progress(clock.now, done=True))  # fit ended
    status.finish(_Result())
    status.tick()  # a late tick says nothing once the run has ended
    assert said == [
        "Starting cnn-mnist5k: building the model and the input pipeline…",
        "Starting cnn-mnist5k: building the model and the input pipeline… (3 s so far)",
        "First step of cnn-mnist5k: tracing and compiling the model…",
        "First step of cnn-mnist5k: tracing and compiling the model… (41 s so far)",
        "Training cnn-mnist5k: epoch 1/2, step 1/36",
        "Training cnn-mnist5k: epoch 1/2, step 19/36",
        "Training cnn-mnist5k: epoch 1/2, step 36/36",
        "Training cnn-mnist5k: epoch 2/2, step 0/36",
        "Training cnn-mnist5k: epoch 2/2, step 1/36",
        "Training cnn-mnist5k: epoch 2/2, step 19/36",
        "Training cnn-mnist5k: epoch 2/2, step 36/36",
        "Trained cnn-mnist5k: saving the weights and the record…",
    ]
    assert status.latest is status.sink.latest and status.latest.done  # the progress view got every report


class _Result:
    status, examples_per_sec, message, epochs_done, config = "completed", 640.0, "", 2, {"epochs": 2}


def test_a_resume_says_where_it_resumes_and_a_stop_is_said_until_the_run_ends():
    from tpukit.ui.phases import RunStatus

    clock, said = FakeClock(), []
    status = RunStatus(
        progress.ProgressRecord(), said.append, "cnn-mnist5k", clock, resumed_from=2, ticking=False
    )  # Colab: no ticker, so no seconds that would never move
    status.start("cnn-mnist5k", True, 2.5)
    assert status.sink.line == "Resuming cnn-mnist5k from epoch 2: building the model and the input pipeline…"
    meter = progress_model.Meter(global_batch=64, steps=36, epochs=3)
    _phases(status, clock, meter, epochs=(1,), steps=(1, 19))
    status.stopping()
    clock.now += 0.1
    meter.step(20, clock.now)
    status.show_progress(meter.progress(clock.now))  # the step in flight: still stopping
    status.show_progress(meter.progress(clock.now, done=True))
    assert said == [
        "Resuming cnn-mnist5k from epoch 2: building the model and the input pipeline…",
        "Resuming cnn-mnist5k from epoch 2: first step: tracing and compiling the model…",
        "Resumed cnn-mnist5k from epoch 2: epoch 2/3, step 1/36",
        "Resumed cnn-mnist5k from epoch 2: epoch 2/3, step 19/36",
        "Stopping cnn-mnist5k after the current step…",
    ]
    extended = RunStatus(progress.ProgressRecord(), said.append, "cnn-mnist5k", clock, resumed_from=4, extends_to=5)
    assert extended.lead() == "Extending cnn-mnist5k to 5 epochs, from epoch 4"


def test_the_panels_status_goes_through_the_phases_of_a_train_a_stop_and_a_resume(tmp_path):
    """Through the controller, with real training: each status line the view is told, in order. The view presses
    Stop when it is told of the second epoch, as a person would; the resume then says where it resumes."""
    import time

    from tpukit.ui.controller import Controller, View

    class Recorder(View):
        def __init__(self):
            super().__init__()
            self.said = []

        def status(self, text, kind="info"):
            self.said.append(text)
            if "epoch 2/2" in text and text.startswith("Training") and controller.running:
                controller.stop()

    view = Recorder()
    # Small batches, one step per call, and a clock 100 times faster than the wall: the progress reports (at
    # most every 0.5 s of the clock, and while they cost under 0.25% of the time) come every few steps.
    controller = Controller(
        {
            "dataset": "digits",
            "model": "mlp",
            "epochs": 2,
            "batch_size": 8,
            "steps_per_execution": 1,
            "logdir": str(tmp_path),
        },
        view=view,
        context="none",
        runs=[],
        clock=lambda: 100 * time.perf_counter(),
    )
    name = controller.config.run_name
    stopped = controller.train(wait=True)
    assert stopped.status == "stopped" and stopped.epochs_done == 1, view.said
    steps = stopped.steps_per_epoch
    assert view.progress_sink.total_steps == 2 * steps  # the axes span the run as Keras counts it, planned once
    points, epochs = view.progress_sink.curves
    assert points[-1][0] > steps  # it stopped in the second epoch: the curve has the steps it ran
    assert [g for g, _ in epochs] == [steps] and set(epochs[0][1]) == {"val_loss", "val_accuracy"}  # whole only
    assert epochs[0][1]["val_accuracy"] == pytest.approx(stopped.final_metrics["val_accuracy"])  # as the status says
    kept = [p for p in points if p[0] <= steps]
    trained, view.said = view.said, []
    resumed = controller.resume(wait=True)
    assert resumed.status == "completed", view.said
    points, epochs = view.progress_sink.curves
    stride = points[0][0]
    assert [p[0] for p in points] == list(range(stride, 2 * steps + 1, stride))  # no gap, no collapsed point
    assert points[: len(kept)] == kept  # the kept epoch as it was drawn, then the redone one
    assert [g for g, _ in epochs] == [steps, 2 * steps] and all(
        set(logs) <= {"val_loss", "val_accuracy"} for _, logs in epochs
    )

    def phases(said):
        kinds = [re.sub(r"step \d+/\d+$", "step S/T", re.sub(r"… \(\d+ s so far\)$", "…", line)) for line in said]
        kinds = [k.split(":")[0] + ":" if k.startswith(("Connecting", "stopped", "completed")) else k for k in kinds]
        return [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]

    assert phases(trained) == [
        "Connecting:",
        f"Starting {name}: building the model and the input pipeline…",
        f"First step of {name}: tracing and compiling the model…",
        f"Training {name}: epoch 1/2, step S/T",
        f"Training {name}: epoch 2/2, step S/T",
        f"Stopping {name} after the current step…",
        "stopped:",
    ], trained
    assert phases(view.said) == [
        f"Resuming {name} from epoch 2: building the model and the input pipeline…",
        f"Resuming {name} from epoch 2: first step: tracing and compiling the model…",
        f"Resumed {name} from epoch 2: epoch 2/2, step S/T",
        f"Trained {name}: saving the weights and the record…",
        "completed:",
    ], view.said
    first = next(i for i, line in enumerate(trained) if line.startswith("Training"))
    assert not [line for line in trained[first:] + view.said if "Starting" in line]  # gone once steps run


def test_the_panels_progress_line_says_why_a_completed_run_ended_before_its_last_epoch():
    from tpukit.runs.records import RunResult
    from tpukit.ui import progress

    early = RunResult(
        run_dir="r",
        status="completed",
        config={"epochs": 3},
        epochs_done=2,
        message="early stopping after epoch 2 (no val_loss gain); restored the weights of epoch 1",
    )
    assert progress.ended_early(early) == f" ({early.message})"
    import dataclasses

    assert progress.ended_early(dataclasses.replace(early, epochs_done=3)) == ""
