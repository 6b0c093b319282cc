"""A preset that cannot be had is one line that says what to do: no network, no credentials, terms not accepted, a
sequence longer than the model takes, a Keras too old for the installed KerasHub.

There is no network here, so every download is simulated (the test's name says so): KerasHub's own `from_preset`
runs, and only its file fetch (`preset_utils.get_file`, what calls kagglehub or huggingface_hub) raises what those
libraries raise. Credentials are taken out of the environment and the home directory is a temporary one.
"""

import os
import socket

import pytest

from conftest import save_tiny_gemma, unset_env

from tpukit import RunConfig
from tpukit.models import credentials, pretrained, preset_access
from tpukit.models.modeling import ModelError

keras_hub = pytest.importorskip("keras_hub")
preset_utils = pytest.importorskip("keras_hub.src.utils.preset_utils")

GEMMA = "kaggle://keras/gemma3/keras/gemma3_instruct_1b"


@pytest.fixture
def nobody(monkeypatch, tmp_path):
    """No credentials anywhere: none in the environment, an empty home directory."""
    unset_env(monkeypatch, *credentials.VARIABLES)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def _download_fails(monkeypatch, error, reachable=True):
    """KerasHub's file fetch raises `error`, as kagglehub or huggingface_hub would; the hub answers or not."""

    def get_file(preset, path):
        raise error

    monkeypatch.setattr(preset_utils, "get_file", get_file)
    monkeypatch.setattr(preset_access, "reachable", lambda host: reachable)


def _refused(source, **config):
    with pytest.raises(ModelError) as info:
        pretrained.Preset(source).build(RunConfig(model=source, **config))
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_no_network_while_downloading_a_kaggle_preset_is_one_line_simulated(nobody):
    import requests

    try:
        raise socket.gaierror(-3, "Temporary failure in name resolution")
    except socket.gaierror as cause:
        error = requests.exceptions.ConnectionError(
            "HTTPSConnectionPool(host='www.kaggle.com', port=443): Max retries exceeded with url: /api/v1/models/"
            'keras/gemma3/keras/gemma3_instruct_1b/download/config.json (Caused by NameResolutionError("Failed to '
            "resolve 'www.kaggle.com' ([Errno -3] Temporary failure in name resolution)\"))"
        )
        error.__cause__ = cause
    _download_fails(nobody, error)
    assert _refused(GEMMA) == (
        f"cannot download preset {GEMMA!r}: no network (www.kaggle.com cannot be reached); no preset is on this "
        "machine (kagglehub's and Hugging Face's caches hold none): where there is a network, load it and "
        "save_to_preset(DIR), bring DIR here and pass model=DIR; or train a zoo model."
    )


def test_a_failed_fetch_with_the_hub_unreachable_is_no_network_too_simulated(nobody):
    # huggingface_hub offline: KerasHub turns its LocalEntryNotFoundError into "has no config.json"
    _download_fails(nobody, FileNotFoundError("`config.json` doesn't exist"), reachable=False)
    assert "cannot download preset 'hf://google/gemma': no network (huggingface.co cannot" in _refused(
        "hf://google/gemma"
    )


def test_a_gated_kaggle_preset_without_credentials_names_the_variables_and_the_terms_page_simulated(nobody):
    # Kaggle's 403, as KerasHub 0.32 reports it: a file "not accessible", which check_file_exists reads as missing
    _download_fails(
        nobody,
        FileNotFoundError(
            "`config.json` is not accessible in preset directory. If this model is "
            "gated, accept its terms on kaggle.com and retry."
        ),
    )
    message = _refused("gemma3_instruct_1b")  # a KerasHub name: its Kaggle handle gives the page
    assert message == (
        "preset 'gemma3_instruct_1b' was refused without credentials, as gated models (Gemma, Llama) are: set "
        "KAGGLE_API_TOKEN (Kaggle > Settings > API > Create New Token), or KAGGLE_USERNAME and KAGGLE_KEY; on Colab "
        "add them to Secrets (the key icon) with Notebook access on; or call kagglehub.login(); and accept the "
        "model's terms at https://www.kaggle.com/models/keras/gemma3 with that account."
    )


def test_kaggle_refusing_with_credentials_says_accept_the_terms_simulated(nobody):
    nobody.setenv("KAGGLE_USERNAME", "someone")
    nobody.setenv("KAGGLE_KEY", "0123456789abcdef")
    import requests

    error = requests.exceptions.HTTPError(
        "403 Client Error: Forbidden for url: https://www.kaggle.com/api/v1/models/"
        "keras/gemma3/keras/gemma3_instruct_1b/3/download/config.json"
    )
    _download_fails(nobody, error)
    message = _refused(GEMMA)
    assert message == (
        f"preset {GEMMA!r}: www.kaggle.com refused the download with your credentials (403): accept "
        "the model's terms at https://www.kaggle.com/models/keras/gemma3 with the same account, then "
        "run again."
    )
    assert "0123456789abcdef" not in message
    # KerasHub 0.32 drops the 403 (check_file_exists): the line then names both possible fixes
    _download_fails(nobody, FileNotFoundError("`config.json` is not accessible in preset directory"))
    assert _refused(GEMMA).endswith(
        "gave none of its files with your credentials: accept the model's terms at "
        "https://www.kaggle.com/models/keras/gemma3 if it is gated, or check the name "
        "(KerasHub's names: keras_hub.models.CausalLM.presets)."
    )


def test_a_gated_hugging_face_preset_without_a_token_names_hf_token_simulated(nobody):
    _download_fails(
        nobody,
        RuntimeError(
            "401 Client Error. Cannot access gated repo for url "
            "https://huggingface.co/google/gemma-3-1b-it/resolve/main/config.json."
        ),
    )
    message = _refused("hf://google/gemma-3-1b-it")
    assert "set HF_TOKEN (huggingface.co > Settings > Access Tokens); on Colab add it to Secrets" in message
    assert message.endswith(
        "accept the model's terms at https://huggingface.co/google/gemma-3-1b-it with that account."
    )


def test_a_failure_that_is_not_the_download_keeps_kerashubs_words(nobody, tmp_path):
    _download_fails(nobody, ValueError("something else entirely"))
    assert (
        _refused(GEMMA) == f"preset {GEMMA!r} did not load as a causal language model: ValueError: something else "
        "entirely"
    )


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A tiny GPT-2 preset (learned positions: max_sequence_length 16), saved with KerasHub's save_to_preset."""
    path = tmp_path_factory.mktemp("gpt2") / "tiny_gpt2"
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=8, num_layers=1, num_heads=1, hidden_dim=4, intermediate_dim=8, max_sequence_length=16
    )
    keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None).save_to_preset(str(path))
    return str(path)


def test_a_sequence_longer_than_the_presets_positions_is_one_line(tiny_gpt2):
    assert _refused(tiny_gpt2, sequence_length=32) == (
        f"RunConfig.sequence_length=32 is longer than preset {tiny_gpt2!r} takes: its backbone's max_sequence_length "
        "is 16; use sequence_length=16 or less."
    )


def test_keras_older_than_the_installed_kerashub_declares_is_one_line_simulated(monkeypatch, tiny_gpt2):
    from importlib import metadata

    hub = metadata.version("keras-hub")
    assert preset_access.keras_too_old_here() is None  # this install is consistent
    assert preset_access.keras_too_old(["keras>=3.15", "numpy"], "3.15.1", hub) is None
    real = preset_access.installed_version
    monkeypatch.setattr(preset_access, "installed_version", lambda name: "3.13.2" if name == "keras" else real(name))
    assert _refused(tiny_gpt2) == (
        f"keras-hub {hub} needs keras>=3.15 and keras 3.13.2 is installed: pip install 'keras>=3.15' and restart "
        "Python (on Colab's TPU runtime: tpukit.colab.setup(hub=True), first in a fresh runtime)."
    )


def test_where_a_preset_downloads_from_and_its_terms_page():
    assert preset_access.hub_of(GEMMA) == preset_access.hub_of("gemma3_instruct_1b") == "kaggle"
    assert preset_access.hub_of("hf://google/gemma-3-1b-it") == "hf"
    assert preset_access.hub_of("/") is None and preset_access.hub_of("gs://bucket/preset") is None
    assert (
        preset_access.terms_page("kaggle://google/gemma/keras/gemma_2b_en/2")
        == "https://www.kaggle.com/models/google/gemma"
    )
    assert preset_access.terms_page("some_name") == "https://www.kaggle.com/models?query=some_name"


def test_kerashub_loading_tensorflow_keeps_its_banners_out_of_a_jax_cell(tmp_path):
    """KerasHub (0.26 on Colab's CPU/GPU runtime, 0.32 here) imports TensorFlow when it loads, wherever TensorFlow is
    installed, on any backend, and TensorFlow's oneDNN banner landed in a JAX notebook's cell in red. A plain
    `import keras_hub` beside it shows the banner (so this test can fail)."""
    import subprocess
    import sys

    from conftest import REPO

    pytest.importorskip("tensorflow")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    said = {}
    for how, code in (
        ("tpukit", "from tpukit.models import pretrained; pretrained._keras_hub()"),
        ("plain", "import keras_hub"),
    ):
        code += "\nimport sys; print('tensorflow' in sys.modules)"
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            env={**env, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO)},
        )
        assert done.returncode == 0 and done.stdout.split()[-1] == "True", done.stderr[-2000:]
        said[how] = done.stderr
    assert "oneDNN" in said["plain"]
    assert "oneDNN" not in said["tpukit"] and "absl::InitializeLog" not in said["tpukit"], said["tpukit"]


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory):
    """A tiny Gemma preset with its tokenizer (a SentencePiece model of 256 pieces trained on the help topics)."""
    return save_tiny_gemma(tmp_path_factory.mktemp("gemma") / "tiny_gemma")


@pytest.mark.parametrize("where", ["downloaded", "on disk", "colab cache"])
def test_a_kaggle_preset_says_whether_it_was_downloaded_on_disk_or_served_by_colabs_cache_simulated(
    nobody, tmp_path, tiny_gemma, where
):
    """kagglehub's fetch is simulated: it copies the tiny preset's files to where kagglehub or Colab's cache mount
    would hold them, and KerasHub's own from_preset loads them from there."""
    import shutil

    cache, mount = tmp_path / "kagglehub", tmp_path / "kaggle-input"
    nobody.setenv("KAGGLEHUB_CACHE", str(cache))
    nobody.setenv("COLAB_CACHE_MOUNT_FOLDER", str(mount))
    nobody.setenv("KAGGLE_API_TOKEN", "never-written")
    local = cache / "models" / "keras" / "gemma3" / "keras" / "gemma3_instruct_1b" / "3"
    served = mount / "gemma3" / "keras" / "gemma3_instruct_1b" / "3"
    if where == "on disk":
        shutil.copytree(tiny_gemma, local)
    if where == "colab cache":
        shutil.copytree(tiny_gemma, served)

    def get_file(preset, path):
        folder = served if where == "colab cache" else local
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / path).exists():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(tiny_gemma / path, folder / path)
        return str(folder / path)

    nobody.setattr(preset_utils, "get_file", get_file)
    nobody.setattr("keras_hub.src.tokenizers.tokenizer.get_file", get_file)  # imported there by name
    nobody.setattr(preset_access, "reachable", lambda host: True)  # the simulated download needs Kaggle
    _, said = pretrained.Preset(GEMMA + "/3").build(RunConfig(model=GEMMA + "/3", lora_rank=None))
    expected = {
        "downloaded": f"downloaded from Kaggle into {local.parent}",
        "on disk": f"its files were on disk already ({local.parent}, kagglehub's cache): nothing downloaded",
        "colab cache": f"served from Colab's Kaggle cache ({mount}): nothing downloaded",
    }[where]
    assert said.endswith("; Kaggle credentials: KAGGLE_API_TOKEN in the environment; " + expected), said


def test_the_panel_offers_kerashubs_preset_names_without_importing_keras():
    """The model field lists KerasHub's causal LM presets; reading them must not fix the backend before Connect."""
    import subprocess
    import sys

    from conftest import REPO

    code = (
        "import sys, tpukit.models.pretrained; from tpukit import registry; "
        "offered = registry.offered('model'); print(offered[:3], 'keras' in sys.modules, 'keras_hub' in sys.modules); "
        "print(sorted(n for n in offered if n in ('gemma3_instruct_1b', 'llama3.2_1b', 'qwen2.5_0.5b_en', "
        "'gpt2_base_en')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    first, listed = out.stdout.strip().splitlines()
    assert first == "('mlp', 'cnn', 'resnet') False False", first  # the zoo first; no Keras, no KerasHub imported
    assert listed == "['gemma3_instruct_1b', 'gpt2_base_en', 'llama3.2_1b', 'qwen2.5_0.5b_en']", listed
