"""Pretrained models: a KerasHub preset trains through train() like any model, with LoRA, on JAX, offline.

No registry package ships Gemma weights, so each test builds a tiny Gemma (keras-hub's own test size) with a
SentencePiece tokenizer trained here on the help topics, at the backbone's vocabulary, and saves it with
`save_to_preset`: `from_preset` then loads it through the same loader as a Kaggle or Hugging Face download. Nothing
here calls `from_preset` on a remote name. Keras fixes its backend at import, so training runs in a JAX process.
"""

import dataclasses
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

pytest.importorskip("keras_hub")
pytest.importorskip("sentencepiece")
pytest.importorskip("jax")

from hub_support import BUILD, QLORA, REMAT, RESUME, SHARDED, TRAIN, VOCABULARY  # noqa: E402


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax"}


def _python(code, *args, timeout=300, env=None):
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**_env(), **(env or {})},
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A tiny Gemma preset directory (vocabulary 256, 7,696 parameters), saved once for the module."""
    path = tmp_path_factory.mktemp("hub") / "tiny_gemma"
    _python(BUILD, path)
    return path


@pytest.mark.slow
def test_a_preset_fine_tunes_with_lora_through_train_on_jax(preset, tmp_path):
    secrets = {"KAGGLE_KEY": "kaggle-key-never-written-7f3a", "HF_TOKEN": "hf_token_never_written_9c1e"}
    out = json.loads(_python(TRAIN, preset, tmp_path, env=secrets).strip().splitlines()[-1])
    for path in (p for p in tmp_path.rglob("*") if p.is_file()):  # the run, and JAX's compilation cache beside it
        assert not any(v.encode() in path.read_bytes() for v in secrets.values()), f"{path} holds a credential"
    assert out["status"] == "completed", out["message"]
    assert out["backend"] == "jax" and out["model"] == str(preset)
    loss = out["loss"]
    assert len(loss) == 3 and loss[-1] < loss[0] - 0.02, loss  # the loss falls on the help topics
    assert f"train: loss {loss[-1]:.4f}, perplexity {math.exp(loss[-1]):.4f}" in out["summary"], out["summary"]
    # only the adapters trained: every other weight is the preset's, bit for bit, and stays bfloat16
    assert out["changed"] == [] and out["frozen_dtypes"] == ["bfloat16"]
    assert len(out["lora"]) == 8  # a and b, for query and value, in 2 layers
    assert all(trainable and dtype == "float32" for trainable, dtype, _ in out["lora"].values())
    assert all(biggest > 0 for path, (_, _, biggest) in out["lora"].items() if path.endswith("lora_kernel_b"))
    model_note = next(n for n in out["notes"] if n.startswith("model: "))
    assert (
        f"KerasHub preset {preset} (GemmaCausalLM), LoRA rank 4: 704 of 7,696 parameters train (9.1%), "
        "frozen weights in bfloat16; compiled by tpukit: adam at learning rate 0.01"
    ) in model_note, model_note
    assert any(n.startswith("text: 79 documents") and "padding" in n for n in out["notes"]), out["notes"]
    assert out["recorded_notes"] == out["notes"]  # result.json keeps them
    assert not out["tensorflow_for_text"]
    # a sample before and after: the prompt is the first words of the training text, each continuation greedy
    samples = out["samples"]
    assert set(samples) == {"prompt", "before", "after"} and samples["prompt"] and samples["before"] != samples["after"]
    assert out["recorded_samples"] == samples
    assert re.search(r"\n[\d,]+ tokens/s \([\d,]+ examples/s, [\d.]+ ms/step", out["summary"]), out["summary"]
    assert (
        f"sample: {samples['prompt']!r} continued\n  before {samples['before']!r}\n  after  {samples['after']!r}"
        in out["summary"]
    ), out["summary"]
    # MFU on the LoRA basis: forward, activation gradients, and weight gradients for the adapters only
    counted, how, forward = out["flops"]
    assert counted == round((2 + 704 / 7696) * forward) and forward > 0
    assert how.endswith(
        "; LoRA basis: 2.09x the forward pass (the frozen weights get no gradient; 9.15% of the weights train)"
    ), how


@pytest.mark.slow
def test_remat_and_gradient_accumulation_apply_to_a_preset_and_auto_changes_nothing_on_the_cpu(preset, tmp_path):
    out = json.loads(_python(REMAT, preset, tmp_path).strip().splitlines()[-1])
    remat, default = out["remat"], out["default"]
    assert remat["status"] == default["status"] == "completed"
    assert remat["remat"] == [True, True] and remat["accumulation"] == 2 and remat["config"] == [True, 2]
    assert default["remat"] == [False, False] and default["accumulation"] is None
    assert default["config"] == ["auto", "auto"]
    assert remat["checkpointed"] and not default["checkpointed"]  # the blocks recompute in the backward pass
    for run in (remat, default):
        assert run["loads"] == 1 and run["compiles"] == 1, run  # remat included: one from_preset, one compile by tpukit
        assert all(np.isfinite(run["loss"])), run["loss"]
        (line,) = [n for n in run["notes"] if n.startswith("memory: about ")]
        assert line.endswith("; no device limit here (the CPU trains in host memory)"), line
    assert "remat on" in next(n for n in remat["notes"] if n.startswith("memory: "))


@pytest.mark.slow
def test_a_preset_fine_tunes_on_tensorflow_too(preset, tmp_path):
    """This pytest process runs Keras on TensorFlow: the same preset, fed by tf.data."""
    import keras

    import tpukit

    assert keras.backend.backend() == "tensorflow"
    config = tpukit.RunConfig(
        model=str(preset),
        dataset="pydoc",
        dataset_size=256,
        sequence_length=32,
        batch_size=16,
        epochs=3,
        learning_rate=1e-2,
        backend="tensorflow",
        replicas=1,
        validation_split=None,
        logdir=str(tmp_path),
    )
    result = tpukit.train(config, verbose=0)
    assert result.status == "completed", result.message
    loss = result.history["loss"]
    assert loss[-1] < loss[0] - 0.02, loss
    # the samples, generated by KerasHub's tf.function, and the panel's line after the run says them
    samples = result.samples
    assert samples["before"] != samples["after"] and f"sample: {samples['prompt']!r}" in result.summary()
    from tpukit.ui.controller import Controller

    # export: the adapters merged into float32 kernels (a bfloat16 merge would round small updates away)
    import keras_hub
    import numpy as np

    exported = keras.saving.load_model(result.export(tmp_path / "merged.keras").keras_path)
    assert {str(w.dtype) for w in exported.weights} == {"float32"} and len(exported.weights) == 20
    assert exported.generate(samples["prompt"], max_length=24).startswith(samples["prompt"])  # its tokenizer came too
    base = keras_hub.models.CausalLM.from_preset(str(preset), dtype="bfloat16", preprocessor=None)
    for layer in [l for l in result.model.backbone._flatten_layers() if getattr(l, "lora_enabled", False)]:
        path = layer._kernel.path
        (kernel,) = [np.asarray(w.numpy(), "float32") for w in base.weights if w.path == path]
        update = (layer.lora_alpha / layer.lora_rank) * np.matmul(
            np.asarray(layer.lora_kernel_a.numpy(), "float32"), np.asarray(layer.lora_kernel_b.numpy(), "float32")
        )
        (merged,) = [w.numpy() for w in exported.weights if w.path == path]
        assert np.abs(update).max() > 0 and np.allclose(merged, kernel + update, rtol=0, atol=1e-7), path
    controller = Controller({"logdir": str(tmp_path)}, context="none", runs=[])
    controller._record(result)
    assert controller.message.endswith(
        f"{samples['prompt']!r} continued: before {samples['before']!r}, after {samples['after']!r}"
    ), controller.message
    assert os.path.isfile(os.path.join(result.run_dir, "adapters.lora.h5"))
    assert sum(w.trainable for w in result.model.weights) == 8


@pytest.mark.slow
def test_the_users_prompt_response_pairs_from_a_jsonl_file_fine_tune_a_preset(preset, tmp_path):
    """This pytest process runs Keras on TensorFlow; the text is tokenized with the preset's own SentencePiece model."""
    import numpy as np

    import tpukit
    from tpukit.data import text, user_text
    from tpukit.models import pretrained

    rows = [{"prompt": d.split("\n", 1)[0][:80], "response": d[:400]} for d in text.pydoc_topics().documents[:40]]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tpukit.RunConfig(
        model=str(preset),
        sequence_length=32,
        batch_size=16,
        epochs=2,
        learning_rate=1e-2,
        backend="tensorflow",
        replicas=1,
        validation_split=None,
        logdir=str(tmp_path / "runs"),
    )
    result = tpukit.train(config, data=str(path), verbose=0)
    assert result.status == "completed", result.message
    assert result.config["dataset"] == str(path)
    (note,) = [n for n in result.notes if n.startswith("text: 40 conversations")]
    assert "prompt tokens are no label (the loss sees the responses only)" in note, note
    assert "written in plain (no chat template" in note  # this tiny Gemma's vocabulary has no <start_of_turn>
    assert result.samples["prompt"] == rows[0]["prompt"] and result.samples["after"], result.samples  # on TensorFlow
    # the labels the loss saw: each prompt's tokens are NO_LABEL, the ids the preset's tokenizer gives
    encoder = pretrained.Preset(str(preset)).encoder(32)
    packed = text.tokenize(user_text.read_jsonl(str(path)), encoder)
    first_prompt = encoder.encode([rows[0]["prompt"] + "\n"])[0]
    assert packed.arrays.y[0, : len(first_prompt)].tolist() == [text.NO_LABEL] * len(first_prompt)
    assert (packed.arrays.y != text.NO_LABEL).sum() > 0 and np.isfinite(result.history["loss"]).all()


@pytest.mark.slow
def test_credentials_in_the_environment_are_written_nowhere_in_the_run_directory(preset, tmp_path, monkeypatch):
    """KAGGLE_KEY and HF_TOKEN are what a Colab user sets to download a gated preset: no file of the run holds them."""
    import uuid

    import tpukit

    secrets = {name: f"{name.lower()}-{uuid.uuid4().hex}" for name in ("KAGGLE_USERNAME", "KAGGLE_KEY", "HF_TOKEN")}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    config = tpukit.RunConfig(
        model=str(preset),
        dataset="pydoc",
        dataset_size=64,
        sequence_length=16,
        batch_size=16,
        epochs=2,
        backend="tensorflow",
        replicas=1,
        logdir=str(tmp_path),
        profile=(1, 2),
    )
    result = tpukit.train(config, verbose=0)
    assert result.status == "completed", result.message
    files = [p for p in (tmp_path).rglob("*") if p.is_file()]
    assert len(files) >= 4 and any(p.name == "result.json" for p in files)  # config, result, adapters, events, trace
    for path in files:
        content = path.read_bytes()
        for name, value in secrets.items():
            assert value.encode() not in content, f"{path} holds {name}"


@pytest.mark.slow
def test_adapters_alone_are_kept_resume_reproduces_them_and_load_brings_them_back(preset, tmp_path):
    out = json.loads(_python(RESUME, preset, tmp_path).strip().splitlines()[-1])
    assert out["cut"] == ["stopped", 1]
    assert out["resumed"] == out["whole"]  # bit for bit: the adapters and the frozen weights
    # the final weights are the adapters alone (Keras' save_weights would merge them into the bfloat16 kernels,
    # and load() would then differ from the trained model)
    assert "adapters.lora.h5" in out["files"] and "model.weights.h5" not in out["files"]
    assert out["adapters_bytes"] < out["preset_bytes"] / 4
    # an epoch backup holds the adapters (and the optimizer's state), not the frozen weights, which the preset holds
    backup = out["backup"]
    assert len(backup) >= 8 and all("lora_kernel" in path or "float" not in dtype for path, dtype in backup), backup
    assert sum("lora_kernel" in path for path, _ in backup) == 8
    assert out["loaded"] == out["whole"] and out["lora_loaded"] == 8
    before, after = out["said"]
    assert before == after and len(before) > 10, out["said"]  # load() then generate says what the trained model said
    trained, loaded = out["talks"]  # result.model.generate("text") and load()'s, as on any KerasHub task
    assert trained == loaded and trained.startswith("The import statement") and trained.endswith(before), out["talks"]
    whole, cut, resumed = out["samples"]
    assert resumed["before"] == cut["before"] == whole["before"]  # the resume kept the stopped run's "before"
    assert resumed["after"] == whole["after"]  # the same adapters write the same text
    # a completed run keeps its adapters' optimizer state too: extending it to 3 epochs gives the 3-epoch run's adapters
    status, fingerprint, files = out["extended"]
    assert "adapters.state.npz" in files and status == "completed" and fingerprint == out["whole"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_qlora_keeps_the_projections_quantized_learns_resumes_to_the_same_adapters_and_exports_them_merged(
    preset, tmp_path, mode
):
    out = json.loads(_python(QLORA, preset, tmp_path, mode, timeout=600).strip().splitlines()[-1])
    assert out["status"] == ["completed", "stopped", "completed"], out
    # int4 kernels are stored two values to an int8 (packed by Keras)
    assert out["kernels"] == ["int8"] and out["adapters"] == ["float32"] and out["loaded_kernels"] == ["int8"], out
    loss = out["loss"]
    assert loss[-1] < loss[0] - 0.02, loss  # the adapters learn over the quantized base, as over a bfloat16 one
    whole, resumed, loaded = out["fingerprints"]
    assert resumed == whole and loaded == whole  # resume and load() rebuild the same quantized base and adapters
    (model,) = [n for n in out["notes"] if n.startswith("model:")]
    assert "frozen weights in bfloat16 (the projections' kernels in " + mode in model, model
    # int8: each kernel and a scale per output; int4: the kernel's values counted, not its packed bytes, with Keras'
    # scales (per output on Keras 3.13; per group of 128 inputs, with zero points and group indices, from 3.15)
    counted = int(re.search(r"704 of ([\d,]+) parameters train", model).group(1).replace(",", ""))
    assert counted == 7_872 if mode == "int8" else 7_696 < counted < 1.1 * 7_696, model  # 3.15: 8,272
    # exported as floats, the adapters merged into the dequantized kernels: KerasHub loads back what was merged,
    # which is the trained model up to the rounding of its activations (to int8), and not the preset's base
    assert out["exported"] == {"preset": 0.0, "hf": 0.0} and out["exported_dtypes"] == ["float32"], out
    assert out["quantized_vs_merged"] < 0.05 * out["scale"] < out["base_vs_merged"], out


@pytest.mark.slow
def test_the_cli_fine_tunes_a_preset(preset, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpukit",
            "train",
            "--backend",
            "jax",
            "--model",
            str(preset),
            "--dataset",
            "pydoc",
            "--dataset-size",
            "64",
            "--sequence-length",
            "16",
            "--lora-rank",
            "2",
            "--batch-size",
            "16",
            "--epochs",
            "1",
            "--validation-split",
            "none",
            "--logdir",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "completed" and out["model"] == str(preset) and out["dataset"] == "pydoc"
    assert out["run_dir"].endswith("-tiny_gemma-pydoc")
    assert os.path.isfile(os.path.join(out["run_dir"], "adapters.lora.h5"))
    config = json.load(open(os.path.join(out["run_dir"], "config.json")))
    assert (config["lora_rank"], config["sequence_length"]) == (2, 16)


def test_preset_names_resolve_without_loading_or_downloading(preset):
    from tpukit import registry
    from tpukit.models import pretrained

    for name in (
        str(preset),
        "kaggle://keras/gemma3/keras/gemma3_instruct_1b",
        "hf://google/gemma-3-1b-it",
        "gemma3_instruct_1b",
    ):
        entry = registry.entry("model", name)
        assert entry.target == pretrained.Preset(name) and entry.description == f"KerasHub preset {name}"
    with pytest.raises(registry.RegistryError, match="the directory has no config.json"):
        pretrained.named(str(preset.parent))  # a directory, but not a preset's: said, not "unknown model"
    assert pretrained.named("gemma_but_not_a_preset") is None


def test_a_tokenizer_larger_than_the_backbone_is_one_line_naming_both_sizes(preset, tmp_path):
    import shutil

    from tpukit import RunConfig
    from tpukit.data import text
    from tpukit.models import pretrained
    from tpukit.models.modeling import ModelError

    wrong = tmp_path / "wrong_vocabulary"
    shutil.copytree(preset, wrong)
    larger = text.train_sentencepiece(text.pydoc_topics().documents, VOCABULARY + 64)
    (wrong / "assets" / "tokenizer" / "vocabulary.spm").write_bytes(larger)
    with pytest.raises(ModelError) as info:
        pretrained.Preset(str(wrong)).build(RunConfig(model=str(wrong)))
    message = str(info.value)
    assert "\n" not in message and message == (
        f"preset {str(wrong)!r}: its tokenizer has {VOCABULARY + 64} tokens, and the backbone's embedding only "
        f"{VOCABULARY}: ids past it cannot be embedded; use a tokenizer of at most {VOCABULARY} tokens."
    )


def test_a_prompt_longer_than_generates_max_length_is_one_line(preset):
    from tpukit.models import pretrained
    from tpukit.models.modeling import ModelError

    with pytest.raises(
        ModelError,
        match=r"^the prompt is \d+ tokens, and generate's max_length=4 leaves it no room: "
        r"give a max_length above \d+\.$",
    ):
        pretrained.Preset(str(preset)).generate(None, "The import statement binds names in a module", max_length=4)


def test_an_unknown_model_name_says_presets_are_taken_too():
    from tpukit import registry

    with pytest.raises(registry.RegistryError) as info:
        registry.entry("model", "gemma9_nonexistent")
    message = str(info.value)
    assert "\n" not in message and "a KerasHub preset directory, kaggle://, hf:// or a KerasHub preset name" in message
    assert message.endswith("Received: model='gemma9_nonexistent'.")


@pytest.mark.parametrize("where", ["missing", "empty", "file"])
def test_a_preset_path_that_is_not_a_preset_directory_says_what_is_missing(where, preset, tmp_path):
    from tpukit import registry

    path = {"missing": tmp_path / "no_such", "empty": tmp_path, "file": preset / "config.json"}[where]
    with pytest.raises(registry.RegistryError) as info:
        registry.entry("model", str(path))
    said = {
        "missing": "no such directory",
        "empty": "the directory has no config.json and no metadata.json",
        "file": "is a file, not a directory",
    }[where]
    assert str(info.value).startswith(f"model={str(path)!r}") and said in str(info.value), info.value
    assert "save_to_preset writes" in str(info.value) and "\n" not in str(info.value)


def test_a_misspelled_keras_hub_preset_name_gets_the_nearest():
    from tpukit import registry

    with pytest.raises(
        registry.RegistryError,
        match=r"^unknown model 'gemma3_instruct_1bb': did you mean KerasHub's "
        r"preset 'gemma3_instruct_1b'\?",
    ):
        registry.entry("model", "gemma3_instruct_1bb")


def test_the_cli_takes_a_preset_with_its_lora_rank_and_sequence_length(preset):
    from tpukit.cli import main

    args = main._parser().parse_args(
        ["train", "--model", str(preset), "--dataset", "pydoc", "--lora-rank", "8", "--sequence-length", "256"]
    )
    config = main._config_from(args)
    assert (config.model, config.dataset, config.lora_rank, config.sequence_length) == (str(preset), "pydoc", 8, 256)
    assert main._config_from(main._parser().parse_args(["train", "--lora-rank", "none"])).lora_rank is None


def test_lora_targets_and_alpha_reach_the_adapted_layers(preset):
    """Adapters on the named layers only, each scaling its update by alpha / rank, and the note says so."""
    from tpukit import RunConfig
    from tpukit.models import pretrained

    config = RunConfig(model=str(preset), lora_rank=2, lora_alpha=8, lora_targets=["query"])
    model, note = pretrained.Preset(str(preset)).build(config)
    adapted = [layer for layer in model.backbone._flatten_layers() if getattr(layer, "lora_enabled", False)]
    assert [layer.name for layer in adapted] == ["query", "query"]  # 2 decoder layers; value keeps no adapter
    assert all(layer.lora_rank == 2 and layer.lora_alpha == 8 for layer in adapted)
    adapters = sum(math.prod(w.shape) for layer in adapted for w in (layer.lora_kernel_a, layer.lora_kernel_b))
    assert sum(math.prod(w.shape) for w in model.trainable_weights) == adapters
    assert f"LoRA rank 2, alpha 8: {adapters:,} of " in note, note
    default, note = pretrained.Preset(str(preset)).build(RunConfig(model=str(preset)))
    assert (
        sorted({layer.name for layer in default.backbone._flatten_layers() if getattr(layer, "lora_enabled", 0)})
        == ["query", "value"]
        and "LoRA rank 4: 704 of 7,696" in note
    )


def test_lora_targets_that_match_no_layer_are_one_line_naming_those_that_do(preset):
    from tpukit import RunConfig
    from tpukit.models import pretrained
    from tpukit.models.modeling import ModelError

    with pytest.raises(ModelError) as info:
        pretrained.Preset(str(preset)).build(RunConfig(model=str(preset), lora_targets=("qkv",)))
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        f"preset {str(preset)!r}: no layer is named qkv, so LoRA adapted none; layers that take adapters: "
    )
    assert "query" in message and "value" in message


def test_the_cli_takes_lora_alpha_and_targets():
    from tpukit.cli import main

    config = main._config_from(
        main._parser().parse_args(["train", "--lora-alpha", "16", "--lora-targets", "query, value,ffw_gating"])
    )
    assert (config.lora_alpha, config.lora_targets) == (16.0, ("query", "value", "ffw_gating"))
    assert (main._config_from(main._parser().parse_args(["train"])).lora_targets) is None


def test_the_panel_shows_a_preset_with_its_lora_and_text_settings_and_hides_them_for_other_models(preset, tmp_path):
    import html
    import re

    import tpukit
    from tpukit import RunConfig

    def note(field):
        return html.unescape(re.sub(r"<[^>]+>", "", panel.form.notes[field].value))

    panel = tpukit.panel(RunConfig(model=str(preset), dataset="pydoc", logdir=str(tmp_path)), display=False, runs=[])
    try:
        form = panel.form
        assert form.widgets["model"].value == str(preset)
        assert note("model").startswith(f"KerasHub preset {preset}; memory: about ") and note("model").endswith(
            "; Connect compares it with the device's"
        ), note("model")
        assert form.rows["lora_rank"].layout.display == form.rows["sequence_length"].layout.display == ""
        assert note("lora_rank") == (
            "LoRA adapters of rank 4 (alpha = rank) on the attention's query and value; "
            "the other weights frozen, in bfloat16"
        )
        assert note("sequence_length") == "text in rows of 128 tokens, each document starting its own"
        form.widgets["lora_rank"].value = "8"
        form.widgets["sequence_length"].value = "256"
        assert (panel.config.lora_rank, panel.config.sequence_length) == (8, 256)
        assert "rank 8" in note("lora_rank") and "rows of 256 tokens" in note("sequence_length")
        form.widgets["quantize"].value = "int8"  # QLoRA, from its dropdown: none or int8
        assert panel.config.quantize == "int8" and note("lora_rank").endswith("frozen, quantized to int8 (QLoRA)")
        form.widgets["quantize"].value = "none"
        form.widgets["lora_rank"].value = ""  # none: every weight trains
        assert panel.config.lora_rank is None and note("lora_rank") == "every weight trains, in the run's precision"
        form.widgets["model"].value = "mlp"
        assert {form.rows[name].layout.display for name in ("lora_rank", "sequence_length", "quantize")} == {"none"}
        form.widgets["model"].value = str(preset)  # typed into the model field, as a person would
        assert panel.config.model == str(preset) and form.rows["lora_rank"].layout.display == ""
        assert note("model").startswith(f"KerasHub preset {preset}; memory: about ")
        form.widgets["model"].value = str(preset / "missing")  # a typo: one line under the field, the config kept
        assert panel.config.model == str(preset) and "no such directory" in panel.controller.problems["model"]
    finally:
        panel.close()


def test_the_memory_estimate_from_a_presets_files_is_the_one_its_built_model_gets(preset):
    """The panel estimates before anything loads (config.json, metadata.json); a run, from the built model."""
    from tpukit import RunConfig
    from tpukit.models import memory, pretrained

    backbone = json.loads((preset / "config.json").read_text())
    parameters = json.loads((preset / "metadata.json").read_text())["parameter_count"]
    shape = memory.backbone_shape(backbone["class_name"], backbone["config"])
    assert shape.feedforward == backbone["config"]["intermediate_dim"] // 2  # Gemma's gates halve it
    source = pretrained.Preset(str(preset))
    for rank, upcast in ((4, False), (4, True), (None, False)):
        model, _ = source.build(RunConfig(model=str(preset), lora_rank=rank))
        settings = dict(batch_size=16, sequence_length=32, device=memory.GIB, upcast=upcast)
        assert source.shape(model) == shape
        built = memory.estimate(model, shape, **settings)
        assert memory.estimate_unbuilt(shape, parameters, lora_rank=rank, **settings) == built, (rank, upcast)


@pytest.mark.slow
def test_on_8_devices_model_parallel_lays_each_weight_out_as_the_presets_layout_map_says(tmp_path):
    preset = tmp_path / "tiny_gemma_kv2"
    _python(BUILD.replace("num_key_value_heads=1", "num_key_value_heads=2"), preset)
    out = json.loads(_python(SHARDED, preset, tmp_path / "runs").strip().splitlines()[-1])
    assert out["status"] == "completed", out["message"]
    assert out["strategy"].startswith(
        "keras.distribution.ModelParallel over 8 CPU devices, a mesh of batch 4 x "
        "model 2: the weights laid out by GemmaBackbone (KerasHub "
    ), out["strategy"]
    assert out["replicas"] == 4 and out["global_batch"] == 16  # the batch axis: 4 per replica x 4
    laid = {path: (got, want) for path, (got, want, mapped) in out["shardings"].items() if mapped}
    assert len(laid) == 1 + 2 * 7, sorted(laid)  # the embedding; per layer q, k, v, output, gating x2, linear
    assert all(got == want for got, want in laid.values()), {p: v for p, v in laid.items() if v[0] != v[1]}
    assert any("model" in got for got, _ in laid.values())
    others = [got for path, (got, want, mapped) in out["shardings"].items() if not mapped]
    assert others and all(set(got) == {None} for got in others)  # norms and LoRA adapters: on every device


def test_model_parallel_on_tensorflow_or_not_dividing_the_devices_is_one_line():
    from tpukit.config import ConfigError
    from tpukit.hardware.jax_devices import JaxRuntime
    from tpukit.hardware.runtime import Runtime

    tf_runtime = Runtime(backend="tensorflow", kind="cpu", devices=("cpu:0",), replicas=1, strategy=None)
    assert tf_runtime.for_model(None, 1) == (tf_runtime, None)
    with pytest.raises(
        ConfigError,
        match=r"^RunConfig.model_parallel: splitting a model over devices is Keras' JAX "
        r"distribution .* Received: model_parallel=2\.$",
    ):
        tf_runtime.for_model(None, 2)
    jax_runtime = JaxRuntime(
        backend="jax", kind="cpu", devices=tuple(f"cpu:{i}" for i in range(8)), replicas=8, strategy=None
    )
    with pytest.raises(ConfigError) as info:
        jax_runtime.for_model(None, 3)
    assert str(info.value) == (
        "RunConfig.model_parallel: expected one of [1, 2, 4, 8] (a divisor of this process's 8 CPU devices, over "
        "which one copy of the model is split). Received: model_parallel=3."
    )
    two_processes = dataclasses.replace(jax_runtime, workers=2)  # 4 devices each: a copy is split within one
    with pytest.raises(ConfigError) as info:
        two_processes.for_model(None, 8)
    assert str(info.value) == (
        "RunConfig.model_parallel: expected one of [1, 2, 4] (a divisor of each of the 2 processes' 4 CPU "
        "devices, over which one copy of the model is split). Received: model_parallel=8."
    )


def test_a_model_without_a_layout_map_trains_data_parallel_and_the_note_says_so():
    """Gemma 3 has no get_layout_map in KerasHub 0.32: its layout_map gives None, and the run says what it did."""
    from tpukit.hardware.jax_devices import JaxRuntime

    class Gemma3Like:
        def layout_map(self, mesh):
            assert tuple(mesh.shape) == (4, 2) and tuple(mesh.axis_names) == ("batch", "model")
            return None, "Gemma3Backbone (KerasHub 0.32.0)"

    import keras

    class Mesh:  # the DataParallel strategy's mesh, as JaxRuntime keeps it: 8 devices
        devices = __import__("numpy").array(keras.distribution.list_devices() * 8)[:8]

    runtime = JaxRuntime(
        backend="jax",
        kind="cpu",
        devices=tuple(f"cpu:{i}" for i in range(8)),
        replicas=8,
        strategy=type("DataParallel", (), {"device_mesh": Mesh})(),
    )
    assert runtime.for_model(Gemma3Like(), 2) == (
        runtime,
        "model_parallel=2: Gemma3Backbone (KerasHub 0.32.0) has no "
        "layout map, so the model trains with data parallelism "
        "over all 8 devices",
    )


def test_the_adapter_file_is_under_5_percent_of_the_base_models_weights(tmp_path):
    """At a size where HDF5's own overhead no longer dominates (2.3 M parameters; the tiny Gemma's files are mostly
    overhead), the run's final weights file of a rank-4 LoRA run against the preset's weights."""
    from tpukit import RunConfig
    from tpukit.models import pretrained
    from tpukit.runs import model_state

    preset = tmp_path / "gemma_2m"
    _python(
        BUILD.replace("num_layers=2", "num_layers=4")
        .replace("hidden_dim=16", "hidden_dim=256")
        .replace("intermediate_dim=32", "intermediate_dim=1024")
        .replace("head_dim=4", "head_dim=64"),
        preset,
    )
    model, note = pretrained.Preset(str(preset)).build(RunConfig(model=str(preset)))
    assert model_state.adapters_only(model)
    model_state.save_final(model, tmp_path / "adapters.lora.h5")
    ratio = os.path.getsize(tmp_path / "adapters.lora.h5") / os.path.getsize(preset / "model.weights.h5")
    assert ratio < 0.05, (ratio, note)  # measured: 1.3% (118 kB of 9.3 MB)
