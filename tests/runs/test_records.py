"""Run directories never collide; results survive as JSON."""

import json
from pathlib import Path

import pytest

from tpukit.runs import directory, records
from tpukit.config import RunConfig


def test_run_dirs_never_overwrite_each_other(tmp_path):
    now = 1_700_000_000.0
    dirs = [directory.new_run_dir(str(tmp_path), "cnn-digits", now=now) for _ in range(3)]
    assert len({d.name for d in dirs}) == 3
    assert dirs[1].name.endswith("-2") and dirs[2].name.endswith("-3")


def test_result_round_trip_listing_and_compare(tmp_path):
    run_dir = directory.new_run_dir(str(tmp_path), "a")
    config = RunConfig(dataset="digits", replicas=2, batch_size=16)
    directory.write_json(run_dir / "config.json", config.to_dict())
    assert records.load(run_dir).status == "running"  # config but no result yet: killed early or running
    result = records.RunResult(run_dir=str(run_dir), status="completed", config=config.to_dict(),
                               history={"loss": [1.0, 0.5]}, final_metrics={"loss": 0.5}, epochs_done=2,
                               examples_per_sec=100.0, step_time_ms=3.0, fingerprint="abc", profile_files=("p",))
    records.save_result(result)
    assert records.load(run_dir) == result
    assert directory.load_config(run_dir) == config
    assert [r.run_dir for r in records.list_runs(str(tmp_path))] == [str(run_dir)]
    row = records.compare([result])[0]
    assert row["global_batch_size"] == 32 and row["loss"] == 0.5
    assert "COMPLETED" in result.summary() and "100 examples/s" in result.summary()
    assert not list(run_dir.glob("*.tmp"))  # atomic writes leave no temp files
    with pytest.raises(FileNotFoundError, match="not a tpukit run directory"):
        records.load(tmp_path / "nope")
    assert json.loads((run_dir / "result.json").read_text())["status"] == "completed"


def test_a_result_keeps_its_model_in_its_slot_never_in_the_record(tmp_path):
    """One result type: the model rides in `model_slot`, a field made for it, out of to_dict, equality and copies."""
    import copy

    model = object()  # any object: the slot does not look inside
    result = records.RunResult(run_dir=str(tmp_path), status="completed", config={"model": "mlp"})
    result.attach_model(model)
    assert result.model is model and result.model_slot.model is model
    assert "model_slot" not in result.to_dict() and "model" not in result.to_dict()
    json.dumps(result.to_dict())
    back = records.RunResult.from_dict(result.to_dict())
    assert back == result and back.model_slot.model is None  # equal records; the model stays in this process
    assert copy.deepcopy(result).model_slot.model is None and "a model" in repr(result.model_slot)
    assert copy.copy(result).model_slot is not result.model_slot


def test_a_damaged_record_is_one_line_and_list_runs_keeps_the_others(tmp_path):
    from tpukit.config import ConfigError, RunConfig

    good = directory.new_run_dir(tmp_path, "good")
    directory.write_json(good / "config.json", RunConfig().to_dict())
    bad = directory.new_run_dir(tmp_path, "bad")
    directory.write_json(bad / "config.json", RunConfig().to_dict())
    (bad / "result.json").write_text('{"status": "comp')  # torn
    with pytest.raises(directory.RunDirError, match="result.json cannot be read") as info:
        records.load(bad)
    assert "\n" not in str(info.value)
    listed = {Path(r.run_dir).name.split("-", 2)[-1]: r for r in records.list_runs(tmp_path)}
    assert listed["good"].status == "running"
    assert listed["bad"].status == "failed" and "damaged" in listed["bad"].message
    (good / "config.json").write_text("[]")
    with pytest.raises(ConfigError, match="config.json: RunConfig.from_json: expected a JSON object"):
        directory.load_config(good)


def test_a_result_shows_its_summary_in_a_notebook_and_a_short_repr_elsewhere():
    from IPython.lib.pretty import pretty

    result = records.RunResult(run_dir="runs/a", status="completed", epochs_done=2, fingerprint="ab12",
                               config={"model": "mlp", "dataset": "digits", "epochs": 2},
                               history={"loss": [0.5, 0.25] * 500})
    assert repr(result) == "RunResult(status='completed', epochs_done=2, run_dir='runs/a', fingerprint='ab12')"
    assert pretty(result) == result.summary() and "COMPLETED: mlp on digits, 2/2 epochs" in pretty(result)


def test_a_summary_says_why_mfu_is_not_reported():
    from tpukit.training.ending import _mfu

    _, how = _mfu(1e9, 200.0, 1e11, "XLA cost analysis")
    result = records.RunResult(run_dir="runs/a", status="completed", epochs_done=1, examples_per_sec=200.0,
                               step_time_ms=5.0, flops_source=how, config={"model": "mlp", "dataset": "digits",
                                                                             "epochs": 1})
    line = next(l for l in result.summary().splitlines() if l.startswith("MFU not reported: "))
    assert "200.0 GFLOP/s" in line and "cpu_probe.json" in line


def test_a_recording_writes_each_epoch_with_what_was_measured_and_keeps_whole_epochs(tmp_path):
    """The record of a run while it trains: the recorder adds epochs, each write reads the measures."""
    from tpukit.runs.records import Recording

    run_dir = directory.new_run_dir(str(tmp_path), "rec")
    directory.write_json(run_dir / "config.json", RunConfig().to_dict())
    notes, speed = ["jit_compile: auto"], {"examples_per_sec": None}
    record = Recording(run_dir, {"loss": [2.0]}, notes, config=RunConfig().to_dict(), parent="elsewhere")
    record.measure(lambda: dict(speed))
    speed["examples_per_sec"] = 10.0
    record.add_epoch({"epoch": 1, "loss": 1.0, "val_loss": 1.5})  # a metric the first epoch lacked
    notes.append("early stopping")
    on_disk = records.load(run_dir)
    assert on_disk.status == "running" and on_disk.epochs_done == 2 and on_disk.examples_per_sec == 10.0
    assert on_disk.history == {"loss": [2.0, 1.0], "val_loss": [None, 1.5]} and on_disk.parent == "elsewhere"
    record.add_epoch({"epoch": 2, "val_loss": 1.2})
    assert record.history == {"loss": [2.0, 1.0, None], "val_loss": [None, 1.5, 1.2]}
    record.keep_epochs(1)
    ended = record.save("stopped", "stopped on request", cause="stopped on request")
    assert ended == records.load(run_dir) and ended.history == {"loss": [2.0], "val_loss": [None]}
    assert ended.final_metrics == {"loss": 2.0, "val_loss": None} and ended.notes == tuple(notes)


def test_answer_on_a_run_of_a_model_that_is_no_preset_is_one_line_naming_the_model():
    from tpukit.models.modeling import ModelError

    for model in ("mlp", "<object>"):
        result = records.RunResult(run_dir="r", status="completed", config={"model": model})
        with pytest.raises(ModelError, match=rf"^answer\(\) is for a fine-tuned KerasHub preset, and this run trained "
                           rf"model='{model}': call the model itself \(result\.model\)\.$"):
            result.answer("Hi")


def test_a_run_stopped_after_its_last_epoch_is_not_told_it_resumes_from_a_later_one():
    """The panel said "Resume continues it from epoch 2 of 1" for a one-epoch run stopped after that epoch."""
    assert records._yes("r", "stopped", 3, 20).reason == "Resume continues it from epoch 4 of 20."
    assert records._yes("r", "stopped", 1, 1).reason == "Resume finishes it from its last epoch (1 of 1), which was kept."
