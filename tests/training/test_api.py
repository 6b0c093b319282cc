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
