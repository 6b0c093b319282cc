"""The Keras backend choice (`tpukit.backend`): a KERAS_BACKEND the user set wins over "auto" (issue 42).

The in-process tests fake "no Keras loaded yet" (this process runs Keras on TensorFlow) and set the environment;
the subprocess ones run `python -m tpukit` as a user would, with KERAS_BACKEND set before Python starts.
"""

import json
import os

import pytest

from conftest import run_cli, unset_env
from tpukit import backend
from tpukit.cli import launch

NO_TPU = lambda: None  # noqa: E731  (tpu_needs_jax: no TPU that only JAX can drive)


def _tpu_never_asked():
    raise AssertionError("a KERAS_BACKEND the user set decides without asking about the TPU")


@pytest.fixture
def fresh(monkeypatch):
    """No Keras loaded yet, no KERAS_BACKEND and no tpukit mark; `fresh(value)` sets the user's KERAS_BACKEND."""
    monkeypatch.setattr(backend, "loaded", lambda: None)
    unset_env(monkeypatch, backend.ENV, backend.WROTE)  # select() writes both

    def user_sets(value):
        monkeypatch.setenv(backend.ENV, value)

    return user_sets


@pytest.mark.parametrize("name", ["jax", "tensorflow"])
def test_the_users_keras_backend_wins_over_auto_and_says_it_came_from_the_environment(fresh, name):
    fresh(name)
    assert backend.choose("auto", _tpu_never_asked) == (name, f"KERAS_BACKEND={name} in the environment")
    assert backend.choose(name, _tpu_never_asked)[0] == name  # asked for by name, and the environment agrees


def test_without_keras_backend_auto_decides_as_before(fresh):
    assert backend.choose("auto", NO_TPU)[0] == ("tensorflow" if backend.installed("tensorflow") else "jax")
    assert backend.choose("auto", lambda: "a TPU VM without TensorFlow") == ("jax", "a TPU VM without TensorFlow")
    fresh("")  # Keras ignores an empty KERAS_BACKEND: so does tpukit
    assert backend.choose("auto", lambda: "a TPU VM") == ("jax", "a TPU VM")


def test_asking_for_the_other_backend_than_keras_backend_fails_in_one_line_naming_both(fresh):
    fresh("jax")
    with pytest.raises(backend.BackendError) as e:
        backend.choose("tensorflow", NO_TPU)
    message = str(e.value)
    assert "\n" not in message
    assert "'tensorflow' was asked for" in message and "KERAS_BACKEND=jax in the environment" in message
    assert "ask for 'jax' or 'auto'" in message


@pytest.mark.parametrize("requested", ["auto", "tensorflow"])
def test_a_keras_backend_tpukit_does_not_run_fails_in_one_line_naming_it_and_the_choices(fresh, requested):
    fresh("torch")
    with pytest.raises(backend.BackendError) as e:
        backend.choose(requested, NO_TPU)
    message = str(e.value)
    assert "\n" not in message and "KERAS_BACKEND=torch" in message and "Choices: tensorflow, jax" in message


def test_keras_backend_set_after_keras_loaded_another_fails_in_one_line(fresh, monkeypatch):
    fresh("jax")
    monkeypatch.setattr(backend, "loaded", lambda: "tensorflow")
    with pytest.raises(backend.BackendError, match=r"already loaded with the tensorflow backend.*KERAS_BACKEND=jax"):
        backend.choose("auto", NO_TPU)


def test_tpukits_own_write_is_not_taken_for_the_users(fresh):
    """select() writes KERAS_BACKEND and marks it: a later choice in this process (or one it starts) is still free."""
    backend.select("jax")
    assert os.environ[backend.ENV] == "jax" and os.environ[backend.WROTE] == "jax"
    assert backend.from_environment() is None
    assert "environment" not in backend.choose("auto", lambda: "a TPU VM")[1]
    assert backend.choose("tensorflow", NO_TPU) == ("tensorflow", "set by the config")  # not refused


def test_a_users_keras_backend_that_select_agrees_with_stays_the_users(fresh):
    fresh("jax")
    backend.select("jax")
    assert backend.WROTE not in os.environ
    assert backend.choose("auto", _tpu_never_asked) == ("jax", "KERAS_BACKEND=jax in the environment")


def test_a_user_who_changes_keras_backend_after_tpukit_wrote_one_is_heard(fresh):
    backend.select("jax")
    fresh("tensorflow")  # e.g. os.environ["KERAS_BACKEND"] = "tensorflow" in a notebook, before connecting
    assert backend.choose("auto", _tpu_never_asked) == ("tensorflow", "KERAS_BACKEND=tensorflow in the environment")


def test_launch_defaults_to_the_users_keras_backend_and_marks_its_workers(fresh):
    assert launch.command_for(["train"]) == ["train", "--backend", "jax"]
    fresh("tensorflow")
    assert launch.command_for(["train", "--backend", "auto"]) == ["train", "--backend", "tensorflow"]
    assert launch.command_for(["train", "--backend", "jax"]) == ["train", "--backend", "jax"]  # named: launch sets it
    env = launch.worker_env("jax", 0, 2, [1234])
    assert env[backend.ENV] == env[backend.WROTE] == "jax"  # the worker's backend is its --backend, not the user's


def test_the_panels_backend_note_names_keras_backend(fresh):
    from tpukit.ui.form import _backend_note

    fresh("jax")
    assert _backend_note("auto") == "Keras will run on jax: KERAS_BACKEND=jax in the environment"
    assert _backend_note("tensorflow").startswith("KERAS_BACKEND=jax in the environment: choose jax or auto")


# ---- as a user runs it: KERAS_BACKEND set before Python starts -----------------------------------------------


def test_cli_train_runs_jax_when_keras_backend_says_so_and_says_why(tmp_path):
    pytest.importorskip("jax")
    done = run_cli(
        "train",
        "--dataset",
        "digits",
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--steps-per-epoch",
        "2",
        "--logdir",
        str(tmp_path),
        "--json",
        timeout=240,
        env={"KERAS_BACKEND": "jax", backend.WROTE: ""},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["backend"] == "jax" and out["status"] == "completed"
    assert "Connected: CPU (jax;" in done.stderr
    assert "Backend: jax (KERAS_BACKEND=jax in the environment)" in done.stderr.splitlines()


def test_cli_asking_for_tensorflow_under_keras_backend_jax_fails_in_one_line(tmp_path):
    done = run_cli(
        "train",
        "--backend",
        "tensorflow",
        "--dataset",
        "digits",
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--logdir",
        str(tmp_path),
        timeout=120,
        env={"KERAS_BACKEND": "jax", backend.WROTE: ""},
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "'tensorflow' was asked for" in lines[0] and "KERAS_BACKEND=jax in the environment" in lines[0]


def test_doctor_names_a_keras_backend_tpukit_does_not_run():
    done = run_cli("doctor", timeout=120, env={"KERAS_BACKEND": "torch", backend.WROTE: ""})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0].startswith("cannot connect: KERAS_BACKEND=torch in the environment")
    assert "Choices: tensorflow, jax" in done.stdout and "Versions: python" in done.stdout
