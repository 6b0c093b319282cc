"""Preference tuning (DPO, SimPO) of tiny KerasHub presets built offline, SentencePiece (Gemma) and byte-pair (Llama 3):
it learns on held-out pairs on both backends, its loss is the papers' to float32 precision, and a DPO run stops,
resumes, extends, loads, generates and exports as a supervised run does. Each run is a process of its own (Keras'
backend is fixed per process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from hub_support import BUILD, BUILD_BPE, GEMMA_TURNS  # noqa: E402
from preference_support import EAGER, HAND, LEARNS, LIFECYCLE  # noqa: E402


def _python(code, *args, backend="jax", timeout=600):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), "KERAS_BACKEND": backend}
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    """A tiny Gemma preset whose vocabulary has Gemma's turn tokens (its chat template)."""
    path = tmp_path_factory.mktemp("hub") / "tiny_gemma"
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax"}
    subprocess.run([sys.executable, "-c", BUILD, str(path), *GEMMA_TURNS], check=True, env=env, cwd=REPO)
    return path


@pytest.fixture(scope="module")
def llama3(tmp_path_factory):
    """A tiny Llama 3 preset with a byte-level BPE (its header tokens: the Llama 3 chat template)."""
    path = tmp_path_factory.mktemp("hub") / "tiny_llama3"
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax"}
    subprocess.run([sys.executable, "-c", BUILD_BPE, str(path), "llama3"], check=True, env=env, cwd=REPO)
    return path


def _learned(out, beta=0.1):
    """Held-out pairs: the chosen answer's reward above the rejected one's for most of them, the margin growing; for
    DPO the margin is beta ((c - c_ref) - (r - r_ref)) of the held-out means, the rejected answers' scores in it
    (`test_the_scores_and_the_losses_are_the_papers_to_float32_precision` checks the loss itself)."""
    assert out["status"] == "completed", out["message"]
    history = out["history"]
    assert history["val_reward_accuracy"][-1] >= 0.75, history
    assert history["val_reward_margin"][-1] > history["val_reward_margin"][0] > 0, history
    assert history["loss"][-1] < history["loss"][0], history["loss"]
    if out["reference"] is not None:  # DPO: the kept reference of the held-out pairs
        held_out = out["reference"]["validation"]
        chosen, rejected = (sum(r[i] for r in held_out) / len(held_out) for i in (0, 1))
        margin = beta * ((history["val_logp_chosen"][-1] - chosen) - (history["val_logp_rejected"][-1] - rejected))
        assert history["val_reward_margin"][-1] == pytest.approx(margin, rel=1e-3, abs=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_dpo_learns_which_answer_is_preferred_on_held_out_pairs(gemma, tmp_path, backend):
    out = _python(LEARNS, gemma, tmp_path, "dpo", backend=backend)
    assert out["backend"] == backend
    _learned(out)
    notes = out["notes"]
    assert any(n.startswith("preferences: 48 pairs") and "Gemma's chat template" in n for n in notes), notes
    assert (
        "reference: DPO (beta 0.1) against the model as the run starts; its log-probabilities scored once before "
        "training by the same model, no second copy" in notes
    ), notes
    assert len(out["reference"]["train"]) == 48 and len(out["reference"]["validation"]) == 16
    assert "reward_accuracy" in out["summary"] and "perplexity" not in out["summary"]
    assert "per pair: two sequences, chosen and rejected" in out["flops_source"], out["flops_source"]
    assert out["tokens_per_sec"] > 0  # two rows of 48 tokens a pair


@pytest.mark.slow
def test_simpo_learns_without_a_reference_on_a_byte_pair_family(llama3, tmp_path):
    out = _python(LEARNS, llama3, tmp_path, "simpo")
    _learned(out)
    assert out["reference"] is None and "reference: none (SimPO is reference-free)" in out["notes"]
    assert any("Llama 3's chat template" in n for n in out["notes"]), out["notes"]


@pytest.mark.slow
def test_dpo_learns_on_a_byte_pair_family(llama3, tmp_path):
    _learned(_python(LEARNS, llama3, tmp_path, "dpo"))


def test_the_scores_and_the_losses_are_the_papers_to_float32_precision(gemma):
    out = _python(HAND, gemma)
    # the labels are each answer and its end-of-turn token, nothing of the prompt or the template's header
    assert out["answers"] == [
        ["A mutable sequence.", True],
        ["A number.", True],
        ["An immutable sequence of items.", True],
        ["Nothing at all.", True],
    ]
    for name, case in out["cases"].items():
        assert case["scores"] <= 2e-6 * max(1.0, case["scale"]), (name, case)  # summed (DPO) or mean (SimPO)
        assert case["loss"] <= 1e-6, (name, case)
    # the reference moves DPO's margins: -0.05 is beta (0.1) x ((c - (c + 0.3)) - (r - (r - 0.2)))
    assert out["cases"]["dpo"]["margin"] == pytest.approx([-0.05, 0.09], abs=1e-9)


def test_scoring_the_reference_runs_the_compiled_step_never_an_eager_pass_of_the_model(gemma, tmp_path):
    """Keras' predict_on_batch runs the whole model eagerly, at every call, while one of its layers is unbuilt (the
    preset's preprocessor, kept for generate): at 1 B parameters that pass cost more than the batch it scores."""
    out = _python(EAGER, gemma, tmp_path)
    assert out["status"] == "completed"
    assert "eager" not in out["calls"] and "traced" in out["calls"], out["calls"]


@pytest.mark.slow
def test_a_dpo_run_stops_resumes_extends_loads_generates_and_exports(gemma, tmp_path):
    out = _python(LIFECYCLE, gemma, tmp_path, timeout=900)
    assert (
        out["status"]
        == ["completed", "stopped", "completed", "completed", "completed", "completed"] + ["completed"] * 2
    ), out["status"]
    whole, resumed, extended, loaded = out["fingerprints"]
    assert whole == resumed == extended == loaded  # the same adapters by every path
    assert out["cut"] == 1
    assert "reference.npz" in out["files"] and "adapters.lora.h5" in out["files"]
    same_cut, same_extension, same_chain = out["kept"]
    assert same_cut and same_extension  # a resume and an extension compare with the reference their run started from
    assert not same_chain  # SFT, then DPO: the reference is the fine-tuned model, not the preset
    assert any(n.startswith("init_from: started from the final weights of") for n in out["chained_notes"])
    assert all(isinstance(s, str) for s in out["said"]) and out["said"][0] == out["said"][1]
    assert set(out["samples"]) == {"prompt", "before", "after"}
    assert max(out["exported"].values()) < 1e-5 and set(out["exported"]) == {"preset", "hf", "keras"}, out["exported"]
    history, (qlora_note,) = out["qlora"]
    assert history["loss"][-1] < history["loss"][0] and "QLoRA rank 4" in qlora_note and "int8" in qlora_note
    assert out["config"]["method"] == "dpo"


MISMATCH = """
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import tpukit
from preference_support import pairs

preset, logdir = sys.argv[1], sys.argv[2]
said = []
for method, data in (("sft", pairs(0, 8)), ("dpo", ["plain text, no pairs"] * 8)):
    config = tpukit.RunConfig(model=preset, method=method, sequence_length=48, batch_size=4, epochs=1, logdir=logdir)
    try:
        tpukit.train(config, data=data, verbose=0)
        said.append(None)
    except tpukit.TpukitError as e:
        said.append([type(e).__name__, str(e)])
print(json.dumps({"said": said, "left": os.listdir(logdir) if os.path.isdir(logdir) else []}))
"""


def test_pairs_for_a_supervised_run_and_text_for_a_preference_run_are_one_line_and_leave_no_run(gemma, tmp_path):
    out = _python(MISMATCH, gemma, tmp_path / "runs")
    (sft_kind, sft), (dpo_kind, dpo) = out["said"]
    assert "holds preference pairs (a chosen and a rejected answer), and method='sft' learns a text's next " in sft
    assert "set method='dpo' (or 'simpo')" in sft and sft_kind == "ModelError"
    assert dpo.startswith("method='dpo' learns which of two answers is preferred, and dataset '<strings>' holds no ")
    assert dpo_kind == "DataError" and out["left"] == []


def test_the_readme_s_sft_then_dpo_chain_runs_as_written(gemma, tmp_path):
    """README's two calls, as they stand there, beside a preset directory `./my_preset` and the two files."""
    import re

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Preference tuning (DPO, SimPO)") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    (tmp_path / "my_preset").symlink_to(gemma)
    from preference_support import pairs

    rows = pairs(0, 80)
    (tmp_path / "chat.jsonl").write_text(
        "".join(json.dumps({"prompt": r["prompt"], "response": r["chosen"]}) + "\n" for r in rows)
    )
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(runs) == 2 and runs[0].endswith("my_preset-chat.jsonl") and runs[1].endswith("my_preset-pairs.jsonl")
    record = json.loads((tmp_path / "runs" / runs[1] / "result.json").read_text())
    assert record["status"] == "completed" and record["config"]["init_from"].endswith(runs[0])


def test_the_panel_offers_the_method_trains_dpo_and_charts_its_reward_accuracy(gemma, tmp_path):
    from preference_support import PANEL

    out = _python(PANEL, gemma, tmp_path / "runs")
    assert out["method"] == "dpo" and out["status"] == "completed", out
    assert "dpo" in str(out["options"]) and "simpo" in str(out["options"])
    assert out["title"] == "reward accuracy"  # the right chart beside the loss: not exp(DPO's loss) as perplexity
    assert len(out["validation"]) == 1, out  # the Runs table's figure for the run
    assert "DPO (beta 0.1) against the model as the run starts" in out["notes"]["sequence_length"], out["notes"]


@pytest.mark.slow
def test_dpo_splits_each_copy_of_the_model_over_two_devices(tmp_path):
    """A tiny Gemma of 2 key-value heads (a model axis of 2 divides what its layout map splits)."""
    from preference_support import SPLIT

    preset = tmp_path / "tiny_gemma_kv2"
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax"}
    build = BUILD.replace("num_key_value_heads=1", "num_key_value_heads=2")
    subprocess.run([sys.executable, "-c", build, str(preset), *GEMMA_TURNS], check=True, env=env, cwd=REPO)
    out = _python(SPLIT, preset, tmp_path / "runs")
    assert out["status"] == "completed", out["message"]
    assert out["config"] == [4, 2], out  # 4 devices, each copy of the model over 2: two copies of the batch
    assert out["history"]["reward_accuracy"][-1] > 0.5 and out["samples"]["after"] is not None, out
