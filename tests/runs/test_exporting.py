"""tpukit.runs.exporting: the formats a trained model goes out in. A real KerasHub model's round trips (a preset and a
Hugging Face folder, loaded back by KerasHub) are in tests/behaviour/test_kerashub_families.py."""

import os
from pathlib import Path

import keras
import pytest

from conftest import unset_env

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


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """No credentials anywhere the hubs' libraries look: the environment and the token files under a fresh home."""
    from tpukit.models import credentials

    unset_env(monkeypatch, *credentials.VARIABLES)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home" / "hf"))


def _tiny_kerashub_model():
    keras_hub = pytest.importorskip("keras_hub")
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    )
    model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    backbone.enable_lora(2)
    return model


def test_an_upload_to_hugging_face_sends_the_merged_preset_with_the_token_from_the_environment_simulated(
    no_credentials, monkeypatch
):
    """The preset goes to KerasHub's real `upload_preset`; only huggingface_hub's calls to the network are faked."""
    import huggingface_hub

    model = _tiny_kerashub_model()
    with pytest.raises(exporting.ExportError) as refused:
        exporting.export(model, "hf://someone/tiny-gpt2", format="preset")
    assert str(refused.value).startswith("cannot upload to hf://someone/tiny-gpt2: no Hugging Face credentials: set HF_TOKEN")
    with pytest.raises(exporting.ExportError, match=r"what KerasHub uploads is a preset: export\(\.\.\., format='preset'\)"):
        exporting.export(model, "hf://someone/tiny-gpt2")

    sent = {}

    def upload_folder(repo_id, folder_path):
        sent.update(repo=repo_id, files=sorted(p.name for p in Path(folder_path).iterdir()))
        sent["token"] = os.environ.get("HF_TOKEN")

    monkeypatch.setattr(huggingface_hub, "create_repo", lambda repo_id, exist_ok: type("Url", (), {"repo_id": repo_id}))
    monkeypatch.setattr(huggingface_hub, "file_exists", lambda repo_id, filename: True)
    monkeypatch.setattr(huggingface_hub, "upload_folder", upload_folder)
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    done = exporting.export(model, "hf://someone/tiny-gpt2", format="preset")
    assert sent["repo"] == "someone/tiny-gpt2" and sent["token"] == "hf_not_a_real_token"
    assert {"config.json", "metadata.json", "model.weights.h5", "task.json"} <= set(sent["files"]), sent
    assert done.note.startswith("uploaded the KerasHub preset to hf://someone/tiny-gpt2 (its LoRA adapters merged, ")
    assert "hf_not_a_real_token" not in done.note and "HF_TOKEN" in done.note  # the variable named, not its value

    def refuse(repo_id, folder_path):
        raise PermissionError("403 Forbidden: you cannot write to someone/tiny-gpt2")

    monkeypatch.setattr(huggingface_hub, "upload_folder", refuse)
    with pytest.raises(exporting.ExportError, match=r"^hf://someone/tiny-gpt2 refused the upload: PermissionError: 403"):
        exporting.export(model, "hf://someone/tiny-gpt2", format="preset")
