"""train() and resume(): what they refuse before reading or writing anything."""

import pytest

from tpukit.config import ConfigError
from tpukit.training.api import resume


@pytest.mark.parametrize("settings", [dict(lora_rank=8), dict(learning_rate=1e-4, batch_size=16), dict(lr=0.1)])
def test_a_setting_passed_to_resume_is_one_line_not_a_type_error(settings, tmp_path):
    with pytest.raises(ConfigError) as info:
        resume(tmp_path / "a_run", **settings)
    given = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    assert str(info.value) == (
        f"resume() continues {tmp_path / 'a_run'} with the settings it was started with, so "
        f"{given} would be ignored; only epochs=N extends a completed run. To change them, "
        "start a new run: train(config.replace(...))."
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("other", ["cnn", "preset"])
def test_resume_with_another_model_is_one_line_and_leaves_no_run_directory(other, tmp_path):
    from tpukit.config import RunConfig
    from tpukit.models import pretrained
    from tpukit.runs import directory

    run = directory.new_run_dir(str(tmp_path), "mlp-digits")
    directory.write_json(run / "config.json", RunConfig(model="mlp", dataset="digits", epochs=1).to_dict())
    model = "cnn" if other == "cnn" else pretrained.Preset(str(tmp_path / "some_preset"))
    named = "cnn" if other == "cnn" else str(tmp_path / "some_preset")
    with pytest.raises(ConfigError) as info:
        resume(run, epochs=2, model=model)
    assert str(info.value).startswith(f"resume(model={named!r}): {run} trained the model 'mlp', and a resume")
    assert sorted(p.name for p in tmp_path.iterdir()) == [run.name]  # nothing new beside the run
