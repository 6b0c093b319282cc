"""Where a gated preset's credentials are (`tpukit.models.credentials`), in each form kagglehub and huggingface_hub
read. Colab's Secrets are faked (a reader that raises Colab's error classes by name), and so is a kagglehub login
(its config module's attribute): neither exists here. The home folder is a temporary one."""

import os
import sys
import types

import pytest

from conftest import unset_env

from tpukit.models import credentials

SECRET = "0123456789abcdef"


class NotebookAccessError(Exception):
    """Colab's: the secret exists, and this notebook was not given access to it."""


class SecretNotFoundError(Exception):
    """Colab's: no secret of that name."""


def fake_colab_secrets(values, denied=()):
    def read(name):
        if name in denied:
            raise NotebookAccessError(name)
        if name not in values:
            raise SecretNotFoundError(name)
        return values[name]

    return read


@pytest.fixture
def home(monkeypatch, tmp_path):
    unset_env(monkeypatch, *credentials.VARIABLES)  # credentials.use writes them
    monkeypatch.delitem(sys.modules, "kagglehub.config", raising=False)
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def test_each_form_kaggle_credentials_take_is_found_and_named_without_its_value(home, monkeypatch):
    none = fake_colab_secrets({})
    assert not credentials.find("kaggle", colab_secret=none, home=str(home))
    (home / ".kaggle").mkdir()
    (home / ".kaggle" / "access_token").write_text(SECRET)
    assert credentials.find("kaggle", colab_secret=none, home=str(home)).where == "~/.kaggle/access_token"
    (home / ".kaggle" / "access_token").unlink()
    (home / ".kaggle" / "kaggle.json").write_text('{"username": "someone", "key": "%s"}' % SECRET)
    assert credentials.find("kaggle", colab_secret=none, home=str(home)).where == "~/.kaggle/kaggle.json"
    monkeypatch.setitem(sys.modules, "kagglehub.config", types.SimpleNamespace(_kaggle_credentials=("someone", SECRET)))
    assert credentials.find("kaggle", home=str(home)).where == "kagglehub.login() in this session"
    monkeypatch.setenv("KAGGLE_API_TOKEN", SECRET)
    found = credentials.find("kaggle", home=str(home))
    assert found.where == "KAGGLE_API_TOKEN in the environment"
    assert found.describe() == "Kaggle credentials: KAGGLE_API_TOKEN in the environment" and SECRET not in repr(found)


def test_colab_secrets_are_found_put_where_kagglehub_looks_and_a_secret_without_access_is_named(home, monkeypatch):
    secrets = fake_colab_secrets({"KAGGLE_USERNAME": "someone", "KAGGLE_KEY": SECRET})
    found = credentials.find("kaggle", colab_secret=secrets, home=str(home))
    assert found.where == "Colab Secrets (KAGGLE_USERNAME, KAGGLE_KEY)" and SECRET not in found.describe()
    for name in found.secrets:  # empty, and restored to absent after the test: use() writes os.environ itself
        monkeypatch.setenv(name, "")
    credentials.use(found, colab_secret=secrets)
    assert os.environ["KAGGLE_KEY"] == SECRET and os.environ["KAGGLE_USERNAME"] == "someone"
    for name in found.secrets:
        monkeypatch.setenv(name, "")
    denied = fake_colab_secrets({"KAGGLE_USERNAME": "someone", "KAGGLE_KEY": SECRET}, denied=("KAGGLE_KEY",))
    found = credentials.find("kaggle", colab_secret=denied, home=str(home))
    assert not found and found.describe().startswith(
        "no Kaggle credentials (Colab Secrets has KAGGLE_KEY, and this notebook has no access to it: switch on "
        "Notebook access beside it in the key panel): set KAGGLE_API_TOKEN"
    )


def test_hugging_face_tokens_are_found_in_the_environment_the_token_file_and_colab_secrets(home, monkeypatch):
    none = fake_colab_secrets({})
    assert (
        credentials.find("hf", colab_secret=none, home=str(home))
        .describe()
        .startswith("no Hugging Face credentials: set HF_TOKEN")
    )
    (home / ".cache" / "huggingface").mkdir(parents=True)
    (home / ".cache" / "huggingface" / "token").write_text(SECRET)
    assert credentials.find("hf", colab_secret=none, home=str(home)).where == "~/.cache/huggingface/token"
    (home / ".cache" / "huggingface" / "token").unlink()
    found = credentials.find("hf", colab_secret=fake_colab_secrets({"HF_TOKEN": SECRET}), home=str(home))
    assert found.where == "Colab Secrets (HF_TOKEN)" and found.secrets == ("HF_TOKEN",)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    assert credentials.find("hf", colab_secret=none, home=str(home)).where == "HF_TOKEN in the environment"
