"""Mistakes through the Python API: each is one line of a tpukit error, raised before any run directory exists.

Found by a sweep of user mistakes (issue 21): these used to surface as a dataclass TypeError, a
FileNotFoundError, xprof's ValueError, a raw Keras ValueError from inside fit, or "the model factory
returned DataSpec".
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tpukit
from conftest import REPO
from tpukit.config import ConfigError, RunConfig
from usermodels import DATA_MISTAKE_LINES, data_mistakes, images, user_cnn


def _one_line(error) -> str:
    text = str(error)
    assert len(text.splitlines()) == 1 and "Traceback" not in text, text
    return text


def _no_run_dir(logdir: Path) -> None:
    made = [p for p in logdir.rglob("*")] if logdir.exists() else []
    assert not made, f"a run directory (or file) was created: {made}"


@pytest.mark.parametrize(
    "call, field, meant",
    [
        (lambda: RunConfig(epoch=3), "epoch", "epochs"),
        (lambda: RunConfig().replace(bach_size=16), "bach_size", "batch_size"),
        (lambda: RunConfig.from_dict({"learning_rat": 0.1}), "learning_rat", "learning_rate"),
        (lambda: RunConfig.from_json('{"validation_splits": 0.2}'), "validation_splits", "validation_split"),
    ],
)
def test_an_unknown_runconfig_field_names_the_one_it_was_meant_to_be(call, field, meant):
    with pytest.raises(ConfigError) as caught:
        call()
    text = _one_line(caught.value)
    assert text.startswith(f"RunConfig has no field {field!r}; did you mean {meant!r}? Fields: backend, ")


def test_an_unknown_field_with_no_close_name_lists_the_fields():
    with pytest.raises(
        ConfigError,
        match=r"^RunConfig has no field 'colour'\. Fields: backend, .*, init_from, lora_rank, sequence_length, .*, model_parallel, method, preference\.$",
    ):
        RunConfig(colour="red")
    assert RunConfig(epochs=2).epochs == 2 and RunConfig().replace(epochs=4).epochs == 4


@pytest.mark.parametrize(
    "what", ["None", "a number", "a RunResult-like object", "missing", "a file", "its config.json", "a plain directory"]
)
def test_resume_takes_only_the_path_of_a_run_directory(tmp_path, what):
    (tmp_path / "plain").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    arg, said = {
        "None": (
            None,
            "resume() takes the path of a run directory (a str or pathlib.Path, as result.run_dir gives). "
            "Received: None.",
        ),
        "a number": (3, "Received: 3."),
        "a RunResult-like object": (object(), "Received: a object object."),
        "missing": (tmp_path / "gone", f"resume(): {tmp_path / 'gone'} does not exist; expected a run directory"),
        "a file": (tmp_path / "notes.txt", f"resume(): {tmp_path / 'notes.txt'} is a file, not a run directory."),
        "its config.json": (
            str(tmp_path / "run" / "config.json"),
            f"is a file, not a run directory (pass {tmp_path / 'run'}, the directory it is in).",
        ),
        "a plain directory": (tmp_path / "plain", "is not a tpukit run directory (no config.json)"),
    }[what]
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(tpukit.RunDirError) as caught:
        tpukit.resume(arg)
    assert said in _one_line(caught.value)
    with pytest.raises(tpukit.RunDirError) as caught:  # tpukit.load takes the same paths, and says load()
        tpukit.load(arg)
    assert said.replace("resume()", "load()") in _one_line(caught.value)
    assert sorted(tmp_path.rglob("*")) == before  # nothing read into being, nothing written


def _config(tmp_path, **changes):
    return RunConfig(**{"epochs": 1, "batch_size": 8, "logdir": str(tmp_path / "runs"), **changes})


@pytest.mark.parametrize("which", ["validation_data", "test_data"])
def test_validation_and_test_data_are_checked_against_the_model_as_the_training_data_is(tmp_path, which):
    """A width the model cannot take was a raw Keras ValueError from inside fit, after the run directory existed."""
    x, y = images(512)
    narrow = (x[:64, :16, :16], y[:64])
    with pytest.raises(tpukit.DataError) as caught:
        tpukit.train(_config(tmp_path), model=user_cnn, data=(x, y), **{which: narrow})
    text = _one_line(caught.value)
    assert text == (
        f"{which}: the model cannot take this data: it takes examples of shape (32, 32, 3), and these "
        f"have shape (16, 16, 3): give {which} examples of the shape the training data has."
    ), text
    _no_run_dir(tmp_path / "runs")


def test_test_labels_beyond_the_models_classes_are_one_line(tmp_path):
    import keras

    x, y = images(512)
    classes = int(y.max()) + 1

    def fixed_classes():  # its classes fixed, not read from the DataSpec (which counts every split's labels)
        inputs = keras.Input(x.shape[1:])
        return keras.Model(inputs, keras.layers.Dense(classes, activation="softmax")(keras.layers.Flatten()(inputs)))

    with pytest.raises(tpukit.DataError) as caught:
        tpukit.train(_config(tmp_path), model=fixed_classes, data=(x, y), test_data=(x[:64], y[:64] + 10))
    # The same check the training data gets: the label range, before the loss runs (TensorFlow's own error for a
    # label beyond the outputs, cut inside its function name, was the message).
    assert _one_line(caught.value) == (
        f"test_data: the labels run from 10 to {int(y[:64].max()) + 10}, but the model's output has {classes} "
        f"unit(s) for the loss sparse_categorical_crossentropy: give the last layer {int(y[:64].max()) + 11} units "
        "(one per class), or check the labels."
    )
    _no_run_dir(tmp_path / "runs")


# ---- the data mistakes of a user test (issue 42) -------------------------------------------------------------


@pytest.mark.parametrize("mistake", list(DATA_MISTAKE_LINES))
def test_a_data_mistake_is_one_line_that_names_it_and_the_fix(tmp_path, mistake):
    """Each was half a message under a 30-40 line traceback: the label value cut inside TensorFlow's function name
    and advice about Flatten; "the model's output (3,) does not fit the labels (3,)"; the user's factory blamed for
    units=None (one-hot labels gave no num_classes); the probe's 2 examples and an internal keras_tensor name."""
    model, data = data_mistakes()[mistake]
    with pytest.raises(tpukit.DataError) as caught:
        tpukit.train(_config(tmp_path), model=model, data=data)
    text = _one_line(caught.value)
    for said in DATA_MISTAKE_LINES[mistake]:
        assert said in text, text
    for internal in ("keras_tensor", "function_node", "(2, 28, 28)", "Flatten or pooling", "units=None"):
        assert internal not in text, text
    _no_run_dir(tmp_path / "runs")


def test_one_hot_labels_give_the_spec_their_classes_so_a_factory_can_read_them():
    import numpy as np

    from tpukit.data import sources

    x, y = np.zeros((30, 4), "float32"), np.arange(30) % 3
    for one_hot in (np.eye(3, dtype="float32")[y], np.eye(3, dtype="int64")[y]):  # an int one-hot was 2 classes
        assert sources.prepare((x, one_hot), name="x").spec.num_classes == 3
    several = np.eye(3)[y] + np.eye(3)[(y + 1) % 3]  # multi-label rows are no one-hot: no class count
    assert sources.prepare((x, several), name="x").spec.num_classes is None


def test_a_factory_that_fails_on_num_classes_none_is_told_why(tmp_path):
    import numpy as np

    from usermodels import readme_build

    x, y = np.zeros((200, 20), "float32"), (np.arange(200) % 3).astype("float32")
    with pytest.raises(tpukit.ModelError) as caught:
        tpukit.train(_config(tmp_path), model=readme_build, data=(x, y))
    assert _one_line(caught.value).endswith(
        "units=None (spec.num_classes is None: tpukit counts classes from integer or one-hot labels, and y holds "
        "float32 values; for class labels pass y.astype(int))"
    ), caught.value
    _no_run_dir(tmp_path / "runs")


def _python(code: str, **env) -> dict:
    """Run `code` in a fresh process (tests/ importable, TensorFlow's INFO lines off); its last stdout line is JSON."""
    full = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    full.update(TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]), **env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=full)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_data_mistakes_are_the_same_one_line_on_jax(tmp_path):
    """JAX runs the same checks (its loss takes a label beyond the outputs without a word: the range check catches
    it); Keras fixes its backend at import, so this runs in a fresh process."""
    pytest.importorskip("jax")
    said = _python(
        f"""
import json, keras, tpukit, usermodels
lines = {{}}
for mistake, (model, data) in usermodels.data_mistakes().items():
    config = tpukit.RunConfig(backend="jax", epochs=1, batch_size=8, logdir={str(tmp_path / "runs")!r})
    try:
        tpukit.train(config, model=model, data=data)
    except tpukit.DataError as e:
        lines[mistake] = str(e)
print(json.dumps({{"backend": keras.backend.backend(), "lines": lines}}))
""",
        KERAS_BACKEND="jax",
    )
    assert said["backend"] == "jax" and set(said["lines"]) == set(DATA_MISTAKE_LINES)
    for mistake, text in said["lines"].items():
        assert "\n" not in text
        for part in DATA_MISTAKE_LINES[mistake]:
            assert part in text, text
    _no_run_dir(tmp_path / "runs")


def test_in_jupyter_a_one_line_error_shows_the_users_lines_not_tpukits_frames(tmp_path):
    """IPython draws an exception that has `_render_traceback_` as the lines it returns (ipykernel sends them as the
    cell's error): the cell's line and the message, with a model factory's own error above, and none of tpukit's
    frames nor a library's; `%xmode Verbose` still shows them all."""
    preset = tmp_path / "preset"  # a whole preset directory KerasHub reads, whose vocabulary SentencePiece refuses
    (preset / "assets" / "tokenizer").mkdir(parents=True)
    backbone = {"module": "keras_hub.src.models.gemma.gemma_backbone", "class_name": "GemmaBackbone", "config": {}}
    (preset / "config.json").write_text(json.dumps({**backbone, "registered_name": "keras_hub>GemmaBackbone"}))
    (preset / "metadata.json").write_text(json.dumps({"keras_version": "3.15.1", "parameter_count": 1}))
    tokenizer = {"module": "keras_hub.src.models.gemma.gemma_tokenizer", "class_name": "GemmaTokenizer"}
    tokenizer.update(config={"proto": None}, registered_name="keras_hub>GemmaTokenizer")
    (preset / "tokenizer.json").write_text(json.dumps(tokenizer))
    (preset / "assets" / "tokenizer" / "vocabulary.spm").write_bytes(b"not a SentencePiece model")
    (preset / "model.weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n")
    said = _python(f"""
import contextlib, io, json
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance(colors="nocolor")
shell.run_cell("import tpukit, usermodels\\n"
               "model, data = usermodels.data_mistakes()['images (n, 28, 28) into Input((784,))']\\n"
               "config = tpukit.RunConfig(epochs=1, batch_size=8, logdir={str(tmp_path / "runs")!r})")
shown = {{}}
for name, cell in [
        ("data", "result = tpukit.train(config, model=model, data=data)"),
        ("factory", "def build():\\n    raise RuntimeError('no GPU in my notebook')\\n\\n"
                    "result = tpukit.train(config, model=build, data=data)"),
        ("library", "result = tpukit.train(tpukit.RunConfig(model={str(tmp_path / "preset")!r}, dataset='pydoc', "
                    "logdir={str(tmp_path / "runs")!r}))"),
        ("verbose", "%xmode Verbose\\nresult = tpukit.train(config, model=model, data=data)")]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        shell.run_cell(cell)
    shown[name] = out.getvalue()
print(json.dumps(shown))
""")
    data, factory, library, verbose = said["data"], said["factory"], said["library"], said["verbose"]
    assert "----> 1 result = tpukit.train(config, model=model, data=data)" in data, data
    assert data.rstrip().endswith(
        "DataError: the model cannot take this data: it takes examples of shape (784,), "
        "and the data's have shape (28, 28): reshape the data (x.reshape(len(x), 784)), or "
        "build the model for (28, 28): keras.Input((28, 28)) followed by "
        "keras.layers.Flatten()."
    ), data
    assert len(data.strip().splitlines()) <= 8, data
    assert "----> 2     raise RuntimeError('no GPU in my notebook')" in factory, factory
    assert "RuntimeError: no GPU in my notebook" in factory and "The above exception was the direct cause" in factory
    assert factory.rstrip().endswith(
        "ModelError: the model factory '__main__:build' raised RuntimeError: no GPU in my notebook"
    ), factory
    # a cause raised inside a library (KerasHub, reading a preset without its tokenizer) is in the line, not above it
    assert f"preset {str(tmp_path / 'preset')!r}: its tokenizer did not load: " in library.splitlines()[-1], library
    assert "direct cause" not in library and len(library.strip().splitlines()) <= 6, (
        library
    )  # the cell's line, the line
    for shown in (data, factory, library):
        assert "tpukit/" not in shown and "IPython/" not in shown and "interactiveshell" not in shown, shown
        assert "site-packages" not in shown and "functools" not in shown, shown
    assert "tpukit/models/modeling.py" in verbose and "tpukit/training/run.py" in verbose, verbose
    _no_run_dir(tmp_path / "runs")


def test_a_model_that_is_not_keras_is_named_as_such(tmp_path):
    """tpukit called anything callable as a factory, and said it 'returned DataSpec'."""
    import keras

    x, y = images(512)

    class Estimator:  # a scikit-learn-like model: not callable
        def fit(self, x, y):
            return self

    class Echo:  # a callable that is no factory: it hands its argument back
        def __call__(self, spec):
            return spec

    cases = [
        (Estimator(), "Received: a test_api_errors.Estimator object, which is not a Keras model"),
        (Echo(), "returned its argument, the DataSpec: a test_api_errors.Echo object is not a Keras model"),
        (keras.layers.Dense(4), "model=: Dense is a Keras layer, not a model; wrap it"),
        ("no_such_model", None),
    ]
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        pass
    else:
        cases.append(
            (
                LogisticRegression(),
                "a sklearn.linear_model._logistic.LogisticRegression object, which is not a Keras model",
            )
        )
    for model, said in cases:
        if said is None:
            with pytest.raises(tpukit.RegistryError):
                tpukit.train(_config(tmp_path), model=model, data=(x, y))
            continue
        with pytest.raises(tpukit.ModelError) as caught:
            tpukit.train(_config(tmp_path), model=model, data=(x, y))
        assert said in _one_line(caught.value), caught.value
    _no_run_dir(tmp_path / "runs")


def test_the_errors_the_readme_lists_are_exported():
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    listed = re.search(r"One-line errors\.\*\* Bad input raises tpukit's own errors \(([^)]*)\)", readme).group(1)
    names = re.findall(r"`(\w+)`", listed)
    assert {
        "ConfigError",
        "DataError",
        "ModelError",
        "RegistryError",
        "RunDirError",
        "ConnectError",
        "ProfileError",
    } <= set(names)
    for name in names:
        base = Exception if name in ("ConnectError", "TpukitError") else ValueError
        assert issubclass(getattr(tpukit, name), base), name


def test_every_error_the_engine_raises_is_importable_from_tpukit():
    """A user catches `tpukit.ExportError`, not `tpukit.runs.saving.ExportError`: every exception class the engine
    defines (ui/ keeps its own, the panel catches them; teaching's stop a notebook's self-check) is exported, and
    is the same class."""
    import importlib
    import inspect
    import pkgutil

    found = {}
    for info in pkgutil.walk_packages(tpukit.__path__, "tpukit."):
        if info.name.startswith(("tpukit.ui", "tpukit.cli", "tpukit.__main__", "tpukit.teaching")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, Exception)
                and not issubclass(value, Warning)
                and not name.startswith("_")
                and value.__module__ == info.name
            ):
                found[name] = value
    assert {"ExportError", "ConfigError", "RestoreError"} <= set(found)
    missing = sorted(name for name in found if name not in tpukit.__all__)
    assert not missing, f"not exported from tpukit: {missing}"
    assert all(getattr(tpukit, name) is cls for name, cls in found.items())


def _classes_defined_in_tpukit():
    """Every class each tpukit module defines (its own, not the ones it imports)."""
    import importlib
    import inspect
    import pkgutil

    for info in pkgutil.walk_packages(tpukit.__path__, "tpukit."):
        if info.name == "tpukit.__main__":
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == info.name:
                yield value


def test_every_error_and_warning_tpukit_defines_derives_from_its_one_base():
    """One base to catch and to sort by: every exception class derives from TpukitError (Terminated is SIGTERM's
    stop, a KeyboardInterrupt), every warning from TpukitWarning; each keeps its builtin base for old excepts."""
    from tpukit.errors import TpukitError, TpukitWarning

    errors = warnings_ = 0
    for cls in _classes_defined_in_tpukit():
        if issubclass(cls, Warning):
            assert issubclass(cls, TpukitWarning), cls
            warnings_ += 1
        elif issubclass(cls, Exception):
            assert issubclass(cls, TpukitError), cls
            errors += 1
        elif issubclass(cls, BaseException):
            assert issubclass(cls, KeyboardInterrupt), cls
    assert errors >= 20 and warnings_ >= 4
    assert issubclass(tpukit.ConfigError, ValueError) and issubclass(tpukit.ConnectError, RuntimeError)


def test_the_cli_and_the_panel_sort_errors_by_the_one_base_class():
    """The CLI's one-line report imports one error class, and bad input (exit 2) is the error's own attribute."""
    import inspect

    from tpukit.cli import main
    from tpukit.errors import TpukitError
    from tpukit.ui import jobs

    explain = inspect.getsource(main._explain)
    assert "from tpukit.errors import TpukitError, one_line" in explain and explain.count("import") == 1
    assert "__module__" not in inspect.getsource(jobs)
    bad = [c for c in _classes_defined_in_tpukit() if issubclass(c, TpukitError) and c.bad_input]
    assert {c.__name__ for c in bad} == {
        "ConfigError",
        "RegistryError",
        "DataError",
        "ModelError",
        "ExportError",
        "NotARunDir",
    }


def test_config_errors_carry_their_facts_as_attributes():
    """The panel and the CLI render an error's field, value and choices from attributes, never from its sentence."""
    from tpukit.config import ConfigError, RunConfig
    from tpukit.precision import CHOICES as PRECISIONS
    from tpukit.training.plan import resolve_steps_per_execution

    with pytest.raises(ConfigError) as bad_batch:
        RunConfig(batch_size=0)
    assert (bad_batch.value.field, bad_batch.value.value) == ("batch_size", 0) and bad_batch.value.expected
    with pytest.raises(ConfigError) as bad_precision:
        RunConfig(precision="bf16")
    assert bad_precision.value.field == "precision" and bad_precision.value.choices == tuple(PRECISIONS)
    with pytest.raises(ConfigError) as unknown:
        RunConfig(epoch=3)
    assert unknown.value.field is None and unknown.value.value == "epoch" and "epochs" in unknown.value.choices
    assert unknown.value.expected == "'epochs'"
    from tpukit.hardware.runtime import TensorFlowRuntime

    cpu = TensorFlowRuntime(backend="tensorflow", kind="cpu", devices=("/device:CPU:0",), replicas=1, strategy=None)
    with pytest.raises(ConfigError) as not_a_divisor:
        resolve_steps_per_execution(7, cpu, steps_per_epoch=12)
    assert not_a_divisor.value.field == "steps_per_execution" and not_a_divisor.value.value == 7
    assert not_a_divisor.value.choices == (1, 2, 3, 4, 6, 12, "auto")
