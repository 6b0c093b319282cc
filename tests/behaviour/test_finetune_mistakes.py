"""The fine-tuning path's mistakes, each one line from a tpukit error that names the value and the fix, before any run
directory exists (or, for a resume, leaving the run's directory as it was): a preset directory that is incomplete
or damaged, a LoRA rank above the adapted layers' width, images or features handed to a causal language model, no
network for a preset that must be downloaded, a run whose preset directory moved, and a `.json` dataset file (what
was read is said, and a file that wraps its rows in an object is refused).

Real KerasHub and a tiny Gemma preset written by its own `save_to_preset`; only the network is simulated (no network
here: `preset_access.reachable` is injected, the tests' names say so). The same mistakes in a Jupyter-like shell:
`test_the_mistakes_in_a_jupyter_shell_are_the_cell_and_one_line`.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tpukit
from conftest import REPO, save_tiny_gemma
from tpukit import RunConfig
from tpukit.errors import TpukitError

keras_hub = pytest.importorskip("keras_hub")

SMALL = dict(dataset="pydoc", dataset_size=32, sequence_length=32, batch_size=8, epochs=1, validation_split=None)


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory):
    """A tiny Gemma preset with its SentencePiece tokenizer, as save_to_preset writes (its attention 4 wide, its
    feed-forward 8)."""
    path = tmp_path_factory.mktemp("gemma") / "tiny_gemma"
    return save_tiny_gemma(path, num_query_heads=2, hidden_dim=8, intermediate_dim=16)


@pytest.fixture
def nobody(monkeypatch, tmp_path):
    """Nothing downloaded before and no credentials: an empty home directory and caches."""
    for name in ("KAGGLEHUB_CACHE", "HF_HOME", "HF_HUB_CACHE", "KAGGLE_USERNAME", "KAGGLE_KEY", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def _refused(call, error=TpukitError) -> str:
    with pytest.raises(error) as caught:
        call()
    text = str(caught.value)
    assert len(text.splitlines()) == 1 and "Traceback" not in text, text
    return text


def _listing(where) -> dict:
    """Every file under `where`, with its bytes: what a refusal must leave as it was."""
    return {str(p.relative_to(where)): p.read_bytes() for p in sorted(where.rglob("*")) if p.is_file()}


def _no_run_dir(logdir) -> None:
    made = [p for p in logdir.iterdir() if not p.name.startswith(".")] if logdir.exists() else []
    assert not made, f"a run directory was left behind: {made}"


def _train(tmp_path, model, **settings):
    return tpukit.train(RunConfig(model=str(model), logdir=str(tmp_path / "runs"), **{**SMALL, **settings}), verbose=0)


# ---- a preset directory that is incomplete or damaged ----------------------------------------------------------


def _cut(path, name):
    target = path / name
    shutil.rmtree(target) if target.is_dir() else target.unlink()


def _scribble(text):
    return lambda path, name: (path / name).write_text(text)


def _truncate(path, name):
    data = (path / name).read_bytes()
    (path / name).write_bytes(data[: len(data) // 3])  # the HDF5 signature is there; the rest is not


def _sharded(path, name):
    (path / "model.weights.h5").unlink()
    (path / name).write_text(json.dumps({"weight_map": {"embeddings": "model_00000.weights.h5"}}))


@pytest.mark.parametrize(
    "change, name, said",
    [
        (_cut, "model.weights.h5", "is incomplete: it has no model.weights.h5; a preset directory holds config.json"),
        (_cut, "tokenizer.json", "is incomplete: it has no tokenizer.json"),
        (_cut, "assets", "is incomplete: it has no assets/tokenizer/ (the tokenizer's vocabulary)"),
        (_cut, "config.json", "is incomplete: it has no config.json; a preset directory holds"),
        (_scribble('{"module": "keras_hub.src.models'), "config.json", "its config.json is damaged (not JSON: "),
        (_scribble("[1, 2]"), "tokenizer.json", "its tokenizer.json is damaged (a JSON list, where a preset's"),
        (_scribble("weights"), "model.weights.h5", "its model.weights.h5 is damaged (7 bytes that are not an HDF5"),
        (_scribble(""), "model.weights.h5", "its model.weights.h5 is damaged (an empty file)"),
        (_truncate, "model.weights.h5", "its model.weights.h5 is damaged (h5py: "),
        (_sharded, "model.weights.json", "is incomplete: it has no model_00000.weights.h5 (one of the weight files"),
    ],
)
def test_an_incomplete_or_damaged_preset_directory_names_the_file(tmp_path, tiny_gemma, change, name, said):
    preset = tmp_path / "preset"
    shutil.copytree(tiny_gemma, preset)
    change(preset, name)
    text = _refused(lambda: _train(tmp_path, preset))
    assert text.startswith(f"preset {str(preset)!r}") and said in text, text
    assert text.endswith("save it again.") or text.endswith("with save_to_preset."), text
    _no_run_dir(tmp_path / "runs")


def test_a_whole_preset_directory_still_trains_and_a_plain_directory_is_no_preset(tmp_path, tiny_gemma):
    assert _train(tmp_path, tiny_gemma).status == "completed"
    (tmp_path / "plain").mkdir()
    text = _refused(lambda: _train(tmp_path, tmp_path / "plain"))
    assert "the directory has no config.json and no metadata.json, so it is not a preset" in text, text


# ---- a LoRA rank above the adapted layers' width -----------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, width",
    [
        (dict(lora_rank=64), 4),  # the attention's query and value: 4 wide (head_dim)
        (dict(lora_rank=17), 4),
        (dict(lora_rank=40, lora_targets=("ffw_gating",)), 8),  # the feed-forward: the hidden width
        (dict(lora_rank=64, quantize="int8"), 4),  # QLoRA's base
    ],
)
def test_a_lora_rank_above_the_adapted_layers_width_is_one_line(tmp_path, tiny_gemma, settings, width):
    text = _refused(lambda: _train(tmp_path, tiny_gemma, **settings))
    rank = settings["lora_rank"]
    assert text.startswith(f"lora_rank={rank} is more than the adapted layers' own width ({width}): "), text
    assert f"use lora_rank={width} or less" in text, text
    _no_run_dir(tmp_path / "runs")


def test_a_rank_that_is_no_rank_is_refused_by_the_config(tmp_path):
    for rank in (0, -4, 2.5):
        text = _refused(lambda: RunConfig(lora_rank=rank))
        assert "lora_rank" in text and repr(rank) in text, text


# ---- images or features handed to a causal language model ----------------------------------------------------------


@pytest.mark.parametrize(
    "what, data, said",
    [
        (
            "images",
            (np.zeros((16, 8, 8, 1), "float32"), np.zeros(16, "int64")),
            "float32 arrays of shape (8, 8, 1) an example (images, by their shape)",
        ),
        (
            "features",
            (np.zeros((16, 32), "float32"), np.zeros(16, "int64")),
            "float32 arrays of shape (32,) an example:",
        ),
        (
            "named inputs",
            ({"pixels": np.zeros((16, 4), "float32")}, np.zeros(16, "int64")),
            "a dict of inputs ['pixels'] without 'token_ids'",
        ),
    ],
)
def test_arrays_that_are_not_token_ids_to_a_causal_lm_say_it_trains_on_text(tmp_path, tiny_gemma, what, data, said):
    text = _refused(
        lambda: tpukit.train(
            RunConfig(model=str(tiny_gemma), logdir=str(tmp_path / "runs"), **SMALL), data=data, verbose=0
        ),
        tpukit.DataError,
    )
    assert text.startswith(
        f"preset {str(tiny_gemma)!r} is a causal language model, which trains on text, and the data holds "
    ), text
    assert said in text and "give it text (a list of strings" in text, text
    _no_run_dir(tmp_path / "runs")


def test_a_builtin_image_dataset_to_a_causal_lm_is_named(tmp_path, tiny_gemma):
    text = _refused(lambda: _train(tmp_path, tiny_gemma, dataset="digits", dataset_size=None), tpukit.DataError)
    assert "and dataset 'digits' holds uint8 arrays of shape (8, 8, 1) an example (images" in text, text
    assert "model='cnn' for images" in text, text
    _no_run_dir(tmp_path / "runs")


# ---- no network for a preset that must be downloaded -----------------------------------------------------------------


def _offline(monkeypatch, reachable=False):
    from tpukit.models import preset_access

    asked = []
    monkeypatch.setattr(preset_access, "reachable", lambda host: asked.append(host) or reachable)
    return asked


NO_PRESET = (
    "no preset is on this machine (kagglehub's and Hugging Face's caches hold none): where there is a network, load "
    "it and save_to_preset(DIR), bring DIR here and pass model=DIR; or train a zoo model."
)


@pytest.mark.parametrize(
    "source, host",
    [
        ("kaggle://keras/gemma3/keras/gemma3_instruct_1b/3", "www.kaggle.com"),
        ("gemma3_instruct_1b", "www.kaggle.com"),  # a KerasHub name is a Kaggle handle
        ("hf://google/gemma-3-1b-it", "huggingface.co"),
    ],
)
def test_offline_a_preset_to_download_is_cannot_download_at_once_simulated(tmp_path, nobody, source, host):
    asked = _offline(nobody)
    text = _refused(lambda: _train(tmp_path, source))
    assert text == f"cannot download preset {source!r}: no network ({host} cannot be reached); {NO_PRESET}", text
    assert set(asked) == {host}  # asked before KerasHub's downloader (which retries for half a minute)
    _no_run_dir(tmp_path / "runs")


def test_offline_the_line_lists_the_presets_already_on_disk_simulated(tmp_path, nobody, tiny_gemma):
    cache = tmp_path / "kagglehub"
    nobody.setenv("KAGGLEHUB_CACHE", str(cache))
    cached = cache / "models" / "keras" / "gemma" / "keras" / "tiny" / "1"
    shutil.copytree(tiny_gemma, cached)
    hf = tmp_path / "home" / ".cache" / "huggingface" / "hub" / "models--me--tiny" / "snapshots" / "abc"
    shutil.copytree(tiny_gemma, hf)
    _offline(nobody)
    text = _refused(lambda: _train(tmp_path, "kaggle://keras/gemma3/keras/gemma3_instruct_1b/3"))
    assert "no network (www.kaggle.com cannot be reached); presets on this machine: model=" in text, text
    assert repr(str(cached)) in text and repr(str(hf)) in text, text


def test_a_preset_in_kagglehubs_cache_is_loaded_without_asking_the_network_simulated(tmp_path, nobody, tiny_gemma):
    """Offline with the preset's version already in kagglehub's cache: no refusal before KerasHub, which reads it."""
    from tpukit.models import preset_access

    cache = tmp_path / "kagglehub"
    nobody.setenv("KAGGLEHUB_CACHE", str(cache))
    shutil.copytree(tiny_gemma, cache / "models" / "keras" / "gemma3" / "keras" / "gemma3_instruct_1b" / "3")
    handle = "kaggle://keras/gemma3/keras/gemma3_instruct_1b/3"
    assert preset_access.refuse_offline(handle, handle, reach=lambda host: False) is None
    assert preset_access.refuse_offline(handle.replace("gemma3_instruct", "other"), None, lambda h: False)


def test_a_run_of_a_preset_to_download_asks_the_network_once_simulated(tmp_path, nobody, tiny_gemma):
    """The tokenizer and the model both load through the offline check; it is asked once a run (offline with a
    hanging name lookup, each ask can wait its 3 s timeout). The download is simulated: KerasHub's `get_file`
    hands out the tiny preset's files."""
    preset_utils = pytest.importorskip("keras_hub.src.utils.preset_utils")
    asked = _offline(nobody, reachable=True)

    def get_file(preset, path):
        if not (tiny_gemma / path).exists():
            raise FileNotFoundError(f"{path} is not in {preset}")  # as kagglehub says it
        return str(tiny_gemma / path)

    nobody.setattr(preset_utils, "get_file", get_file)
    nobody.setattr("keras_hub.src.tokenizers.tokenizer.get_file", get_file)
    result = _train(tmp_path, "kaggle://keras/gemma/keras/tiny/1")
    assert result.status == "completed", result.message
    assert asked == ["www.kaggle.com"], asked


def test_kagglehub_missing_with_the_network_there_says_install_it_simulated(tmp_path, nobody):
    """KerasHub fetches Kaggle's files through kagglehub; without it (not Colab's case) its ImportError was read as
    'its tokenizer did not load'."""
    preset_utils = pytest.importorskip("keras_hub.src.utils.preset_utils")
    _offline(nobody, reachable=True)
    nobody.setattr(preset_utils, "kagglehub", None, raising=False)

    def get_file(preset, path):
        raise ImportError(
            "`from_preset()` requires the `kagglehub` package. Please install with `pip install kagglehub`."
        )

    nobody.setattr(preset_utils, "get_file", get_file)
    nobody.setattr("keras_hub.src.tokenizers.tokenizer.get_file", get_file)
    for source in ("kaggle://keras/gemma3/keras/gemma3_instruct_1b/3", "gemma3_instruct_1b"):
        text = _refused(lambda: _train(tmp_path, source))
        assert text == (
            f"cannot download preset {source!r}: kagglehub is not installed (KerasHub fetches www.kaggle.com's "
            "files through it): pip install kagglehub, then run again."
        ), text
    _no_run_dir(tmp_path / "runs")


# ---- resuming a run whose preset directory moved ---------------------------------------------------------------------


@pytest.fixture
def moved(tmp_path, tiny_gemma):
    """A completed run of a preset directory, and a stopped one, whose directory then moved: (runs, old, new)."""
    import threading

    import keras

    old, new = tmp_path / "preset", tmp_path / "elsewhere" / "preset"
    shutil.copytree(tiny_gemma, old)
    done = _train(tmp_path, old)
    stop = threading.Event()

    class StopAfterOneStep(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            stop.set()

    config = RunConfig(model=str(old), logdir=str(tmp_path / "runs"), **{**SMALL, "epochs": 2, "name": "cut"})
    cut = tpukit.train(config, callbacks=[StopAfterOneStep()], stop=stop, verbose=0)
    assert (done.status, cut.status) == ("completed", "stopped")
    new.parent.mkdir()
    shutil.move(old, new)
    return done, cut, old, new


def test_resuming_a_run_whose_preset_moved_says_where_it_was_and_leaves_the_run_as_it_was(moved, tmp_path):
    done, cut, old, new = moved
    runs = tmp_path / "runs"
    before = _listing(runs)
    for run in (done.run_dir, cut.run_dir):
        epochs = 2 if run == done.run_dir else None
        text = _refused(lambda: tpukit.resume(run, epochs=epochs, verbose=0))
        assert text == (
            f"{run} was trained from the preset directory {str(old)!r}, which is no longer there (moved or "
            "deleted): put it back there, or say where it is now: resume(run_dir, model=DIR), or --resume RUN "
            "--model DIR."
        ), text
        text = _refused(lambda: tpukit.resume(run, epochs=epochs, model=str(tmp_path / "nowhere"), verbose=0))
        assert text.endswith(f"Received: model={str(tmp_path / 'nowhere')!r}, no such directory."), text
    assert _listing(runs) == before  # nothing of either run changed, no new run directory


def test_a_moved_preset_resumes_from_where_it_is_now_and_the_run_records_it(moved, tmp_path):
    done, cut, old, new = moved
    extended = tpukit.resume(done.run_dir, epochs=2, model=str(new), verbose=0)
    assert extended.status == "completed" and extended.config["model"] == str(new)
    assert f"the preset directory moved from {old} to {new}: the run trains from there" in extended.notes
    finished = tpukit.resume(cut.run_dir, model=str(new), verbose=0)
    assert finished.status == "completed" and finished.run_dir == cut.run_dir
    with open(os.path.join(cut.run_dir, "config.json")) as f:
        assert json.load(f)["model"] == str(new)  # config.json and result.json agree: a later resume reads them
    text = _refused(lambda: tpukit.resume(cut.run_dir, epochs=3, model=str(old), verbose=0))
    assert "trained the model" in text and "start a new run" in text, text


def test_the_cli_resumes_a_moved_preset_with_model(moved, tmp_path):
    done, cut, old, new = moved
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    base = [sys.executable, "-m", "tpukit", "train", "--resume", cut.run_dir]
    gone = subprocess.run(base, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert gone.returncode == 1, gone.stderr[-2000:]  # the run's state, not a typed value: exit 1
    assert f"which is no longer there (moved or deleted)" in gone.stderr.splitlines()[-1], gone.stderr[-2000:]
    assert "Traceback" not in gone.stderr
    found = subprocess.run(base + ["--model", str(new)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert found.returncode == 0, found.stderr[-2000:]


# ---- a .json dataset file -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows, read",
    [
        ([{"text": "the help topics " * 4}] * 12, "one JSON array of 12 rows, read as documents (every token a label)"),
        (["a string is a document " * 3] * 10, "one JSON array of 10 rows, read as documents"),
        ([{"prompt": "what is it?", "response": "a topic"}] * 9, "one JSON array of 9 rows, read as conversations"),
    ],
)
def test_a_json_array_dataset_says_what_it_held_and_how_it_was_read(tmp_path, tiny_gemma, rows, read):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    said = []
    config = RunConfig(model=str(tiny_gemma), logdir=str(tmp_path / "runs"), **{**SMALL, "dataset": str(path)})
    result = tpukit.train(config, verbose=0, announce=said.append)
    line = f"data: {path} holds {read}"
    assert any(n.startswith(line) for n in result.notes), result.notes
    assert any(s.startswith(line) for s in said), said  # said before training (the CLI prints it on stderr)


def test_a_jsonl_file_says_it_was_read_a_row_a_line(tmp_path, tiny_gemma):
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps({"text": f"row {i} of the help topics"}) for i in range(8)))
    result = _train(tmp_path, tiny_gemma, dataset=str(path))
    assert f"data: {path} holds JSON Lines: 8 rows, read as documents (every token a label)" in result.notes


@pytest.mark.parametrize("key", ["data", "train"])
def test_a_json_object_that_wraps_its_rows_is_refused_with_the_key(tmp_path, tiny_gemma, key):
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"version": 2, key: [{"text": "a row"}] * 5}))
    text = _refused(lambda: _train(tmp_path, tiny_gemma, dataset=str(path)), tpukit.DataError)
    assert text == (
        f"{path} holds one JSON object whose {key!r} is a list of 5 rows; a dataset file holds one JSON array of rows "
        f"or a row a line (JSONL): pass the rows themselves, data=json.load(open({str(path)!r}))[{key!r}], or write "
        "them as JSONL."
    ), text
    _no_run_dir(tmp_path / "runs")


# ---- the same in a Jupyter-like shell ---------------------------------------------------------------------------------


def test_the_mistakes_in_a_jupyter_shell_are_the_cell_and_one_line(tmp_path, tiny_gemma):
    """IPython shows tpukit's errors by their `_render_traceback_`: the cell's line and the message, no chained
    traceback of KerasHub's or h5py's, none of tpukit's frames."""
    broken, wrapped = tmp_path / "broken", tmp_path / "export.json"
    shutil.copytree(tiny_gemma, broken)
    (broken / "model.weights.h5").write_text("weights")
    wrapped.write_text(json.dumps({"data": [{"text": "a row"}] * 3}))
    runs = str(tmp_path / "runs")
    cells = {
        "damaged": f"tpukit.train(tpukit.RunConfig(model={str(broken)!r}, logdir={runs!r}, dataset='pydoc'))",
        "rank": f"tpukit.train(tpukit.RunConfig(model={str(tiny_gemma)!r}, lora_rank=64, logdir={runs!r}, "
        "dataset='pydoc', dataset_size=64, batch_size=8, sequence_length=32))",
        "images": f"tpukit.train(tpukit.RunConfig(model={str(tiny_gemma)!r}, logdir={runs!r}, sequence_length=32), "
        "data=(np.zeros((16, 8, 8, 1), 'float32'), np.zeros(16, 'int64')))",
        "offline": f"tpukit.train(tpukit.RunConfig(model='gemma3_instruct_1b', logdir={runs!r}, dataset='pydoc'))",
        "json": f"tpukit.train(tpukit.RunConfig(model={str(tiny_gemma)!r}, logdir={runs!r}, dataset={str(wrapped)!r}))",
        "resume": f"tpukit.resume({str(tmp_path / 'runs' / 'none')!r})",
    }
    code = f"""
import contextlib, io, json
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance(colors="nocolor")
shell.run_cell("import numpy as np, tpukit\\nfrom tpukit.models import preset_access\\n"
               "preset_access.reachable = lambda host: False")
shown = {{}}
for name, cell in {cells!r}.items():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        shell.run_cell(cell)
    shown[name] = out.getvalue()
print(json.dumps(shown))
"""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    last = {
        "damaged": "RegistryError: preset " + repr(str(broken)) + ": its model.weights.h5 is damaged",
        "rank": "ModelError: lora_rank=64 is more than the adapted layers' own width",
        "images": "DataError: preset " + repr(str(tiny_gemma)) + " is a causal language model, which trains on text",
        "offline": "ModelError: cannot download preset 'gemma3_instruct_1b': no network (www.kaggle.com cannot",
        "json": f"DataError: {wrapped} holds one JSON object whose 'data' is a list of 3 rows",
        "resume": "NotARunDir: resume(): ",
    }
    for name, said in shown.items():
        lines = said.strip().splitlines()
        assert lines[-1].startswith(last[name]), (name, said)
        assert "direct cause" not in said and "During handling" not in said, (name, said)
        assert "tpukit/" not in said and "site-packages" not in said and len(lines) <= 6, (name, said)
    assert not (tmp_path / "runs").exists() or not [p for p in (tmp_path / "runs").iterdir() if p.name[0] != "."]
