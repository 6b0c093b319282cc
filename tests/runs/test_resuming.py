"""A resume is decided once, from the run's directory and the arguments: extend, go on, or one line why not."""

import pytest

from tpukit.config import ConfigError, RunConfig
from tpukit.runs import directory, records, resuming


def _run(tmp_path, status="completed", epochs_done=2, **settings):
    run_dir = directory.new_run_dir(tmp_path, "r")
    config = RunConfig(dataset="digits", model="mlp", epochs=2, **settings)
    directory.write_json(run_dir / "config.json", config.to_dict())
    records.save_result(
        records.RunResult(run_dir=str(run_dir), status=status, config=config.to_dict(), epochs_done=epochs_done)
    )
    return run_dir, config


def test_a_completed_run_is_extended_only_by_more_epochs(tmp_path):
    run_dir, config = _run(tmp_path)
    decided = resuming.decide(run_dir, epochs=5)
    assert decided.extends and decided.config == config.replace(epochs=5) and decided.previous.epochs_done == 2
    for epochs in (None, 2):
        with pytest.raises(directory.RunDirError, match=f"completed run \\(2 epochs\\).*Received: epochs={epochs}"):
            resuming.decide(run_dir, epochs=epochs)


def test_each_refusal_is_the_first_mistake_in_one_line(tmp_path):
    run_dir, _ = _run(tmp_path)
    with pytest.raises(ConfigError, match="batch_size=8 would be ignored") as e:
        resuming.decide(tmp_path / "nowhere", settings={"batch_size": 8})  # the arguments before the directory
    assert e.value.field == "batch_size"
    with pytest.raises(directory.NotARunDir):
        resuming.decide(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="trained the model 'mlp'"):
        resuming.decide(run_dir, epochs=5, model="cnn")
    resuming.decide(run_dir, epochs=5, model="mlp")  # its own name is no mistake
    edited = RunConfig(dataset="digits", model="mlp", epochs=2, seed=7)
    directory.write_json(run_dir / "config.json", edited.to_dict())
    with pytest.raises(directory.RunDirError, match="disagree on seed"):
        resuming.decide(run_dir, epochs=5)


def test_a_stopped_run_without_a_backup_says_there_is_nothing_to_go_on_from(tmp_path):
    run_dir, _ = _run(tmp_path, status="stopped", epochs_done=0)
    with pytest.raises(directory.RunDirError, match=str(run_dir)) as e:
        resuming.decide(run_dir)
    assert "\n" not in str(e.value)
