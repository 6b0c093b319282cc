"""tpukit.runs.exporting: the formats a trained model goes out in. A real KerasHub model's round trips (a preset and a
Hugging Face folder, loaded back by KerasHub) are in tests/behaviour/test_kerashub_families.py."""

import keras
import pytest

from tpukit.runs import exporting


def test_an_export_to_a_folder_that_holds_something_is_refused_before_anything_is_written(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(exporting.ExportError, match=r"^format: expected one of keras, preset, hf\. Received: format='h5'\.$"):
        exporting.export(model, tmp_path / "m", format="h5")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    model.backbone, model.save_to_preset = model, None  # looks like a KerasHub task to the check that comes first
    with pytest.raises(exporting.ExportError, match=r"it exists and is not an empty folder; choose a new folder\.$"):
        exporting.export(model, full, format="preset")
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
