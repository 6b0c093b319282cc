"""Every KerasHub causal LM family, byte-pair ones included: tiny Gemma (SentencePiece), GPT-2, Llama 3 and Qwen
presets, built offline (`hub_support.BUILD`, and `BUILD_BPE` with a byte-level BPE trained on the help topics),
fine-tune with LoRA through train(), tokenized by the preset's own KerasHub tokenizer, as its own preprocessor
tokenizes; then on conversations (`messages`), written in the family's chat template, the loss on the assistant's
tokens only (the preset, the tokenizer, the data and the run together, so a behaviour test).
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

pytest.importorskip("keras_hub")
pytest.importorskip("tokenizers")
pytest.importorskip("jax")

from hub_support import BUILD, BUILD_BPE, FAMILIES, GEMMA_TURNS  # noqa: E402

# What builds each family's tiny preset at sys.argv[1] (sys.argv[3] names the family).
BUILDS = {
    "gemma": BUILD.replace("specials=sys.argv[2:]", f"specials={list(GEMMA_TURNS)!r}"),
    **{family: BUILD_BPE.replace("sys.argv[2]", "sys.argv[3]") for family in FAMILIES},
}
TEMPLATES = {"gemma": "Gemma", "gpt2": "plain", "llama3": "Llama 3", "qwen": "ChatML"}

# Fine-tunes the preset at sys.argv[1] (one process: Keras loads once) on the help topics, and sets its own
# preprocessor's ids for a sentence beside tpukit's; then on conversations, and sets the first one's row beside the
# template's ids, the labels the loss sees, and the samples.
TRAIN = """
import json, sys
import numpy as np
import keras, keras_hub
import tpukit
from tpukit.models import pretrained

preset, logdir = sys.argv[1], sys.argv[2]
sentence = "The import statement binds a name, and 'del' unbinds it."
encoder = pretrained.Preset(preset).encoder(64)
own = keras_hub.models.CausalLMPreprocessor.from_preset(preset, sequence_length=64)
x, _, _ = own([sentence])
theirs = [int(i) for i, m in zip(np.asarray(x["token_ids"][0]), np.asarray(x["padding_mask"][0])) if m]
ours = ([encoder.bos_id] if own.add_start_token and encoder.bos_id is not None else []) + encoder.encode([sentence])[0]
config = tpukit.RunConfig(model=preset, dataset="pydoc", dataset_size=128, sequence_length=32, batch_size=16,
                          epochs=3, learning_rate=1e-1, lora_rank=4, validation_split=None, logdir=logdir, seed=3,
                          sample_prompt="The import statement")
result = tpukit.train(config, verbose=0)
print(json.dumps({"status": result.status, "message": result.message, "loss": result.history["loss"],
                  "model": type(result.model).__name__, "samples": result.samples,
                  "ids": [ours, theirs[: len(ours) + 1]], "decoded": encoder.decode(encoder.encode([sentence])[0]),
                  "adapters": sorted({str(w.dtype) for w in result.model.weights if "lora_kernel" in w.path})}))

from tpukit.data import sources, text
documents = text.pydoc_topics().documents[:48]
rows = [{"messages": [{"role": "system", "content": "Answer as the Python docs do."},
                      {"role": "user", "content": d.split(chr(10), 1)[0][:60]},
                      {"role": "assistant", "content": d[:200]}]} for d in documents]
chat = tpukit.train(config.replace(epochs=2, sample_prompt=None, dataset_size=None), data=rows, verbose=0)
first = tuple((m["role"], m["content"]) for m in rows[0]["messages"])
(ids,), (trained,) = encoder.conversation_ids([first])
arrays = sources.prepare(rows, name="<text>", encoder=lambda: pretrained.Preset(preset).encoder(32),
                         validation_split=None).train
row, labels = arrays.x["token_ids"][0].tolist(), arrays.y[0].tolist()
template = encoder.template
print(json.dumps({"status": chat.status, "loss": chat.history["loss"], "notes": chat.notes, "samples": chat.samples,
                  "row": row, "labels": labels, "ids": ids[:33], "trained": trained[:33],
                  "specials": [encoder.special(t) in ids for t in template.specials], "template": template.name,
                  "answer": encoder.decode([i for i, t in zip(ids, trained) if t]),
                  "end": encoder.special(template.end.token) if template.end else encoder.eos_id,
                  "last": [i for i, t in zip(ids, trained) if t][-1], "prompt": encoder.decode(ids[: trained.index(True)]),
                  "content": rows[0]["messages"][2]["content"],
                  "answered": chat.answer(rows[0]["messages"][1]["content"], max_new_tokens=24)}))

# export: a KerasHub preset and a Hugging Face folder, each loaded back by KerasHub, against the merged model
import os
from tpukit.runs import saving
x = {"token_ids": arrays.x["token_ids"][:2], "padding_mask": arrays.x["padding_mask"][:2]}
merged = np.asarray(saving.float32_copy(chat.model, merge=True)(x), dtype="float32")
base = np.asarray(keras_hub.models.CausalLM.from_preset(preset, preprocessor=None)(x), dtype="float32")
exported = {}
for form in ("preset", "hf"):
    where = os.path.join(logdir, "exported-" + form)
    note = chat.export(where, format=form).note
    back = keras_hub.models.CausalLM.from_preset(where, preprocessor=None, dtype="float32")
    logits = np.asarray(back(x), dtype="float32")
    exported[form] = [note, sorted(os.listdir(where)), float(np.abs(logits - merged).max()),
                      float(np.abs(logits - base).max())]
print(json.dumps(exported))
"""


def _python(code, *args, backend="jax"):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{REPO}"}
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "KERAS_BACKEND": backend},
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("family", ("gemma", *FAMILIES))
def test_a_family_fine_tunes_with_its_own_tokenizer_and_on_conversations_in_its_chat_template(family, tmp_path):
    lines = _python(BUILDS[family] + TRAIN, tmp_path / family, tmp_path / "runs", family).strip().splitlines()
    out, chat, exported = (json.loads(line) for line in lines[-3:])
    assert out["status"] == "completed", out["message"]
    assert (
        out["model"]
        == {
            "gemma": "GemmaCausalLM",
            "gpt2": "GPT2CausalLM",
            "llama3": "Llama3CausalLM",
            "qwen": "QwenCausalLM",
        }[family]
    )
    ours, theirs = out["ids"]
    assert ours == theirs[: len(ours)] and len(ours) > 5  # the family's own tokenizer, as its preprocessor runs it
    assert out["decoded"] == "The import statement binds a name, and 'del' unbinds it."
    loss = out["loss"]  # random tiny weights: the adapters on query and value move it little, but every epoch
    assert loss[2] < loss[1] < loss[0] and loss[2] < loss[0] - 0.005, loss
    assert out["adapters"] == ["float32"]
    samples = out["samples"]
    assert samples["prompt"] == "The import statement" and samples["before"] != samples["after"], samples

    # conversations: the family's template (its special tokens, as ids), the assistant's tokens the only labels
    assert chat["status"] == "completed" and chat["template"] == TEMPLATES[family]
    assert all(chat["specials"])  # each of the template's special tokens, by its id
    (note,) = [n for n in chat["notes"] if n.startswith("text: 48 conversations")]
    assert f"written in {TEMPLATES[family]}" in note and "prompt tokens are no label" in note, note
    ids, trained = chat["ids"], chat["trained"]
    assert chat["row"] == ids[:32]  # a conversation starts its own row
    no = -1  # text.NO_LABEL
    assert chat["labels"] == [i if t else no for i, t in zip(ids[1:33], trained[1:33])]
    assert chat["answer"].startswith(chat["content"][:20]) and chat["last"] == chat["end"]  # and its end of turn
    role = {"gemma": "model", "gpt2": ""}.get(family, "assistant")  # the assistant's header: no label either
    assert "Answer as the Python docs do." in chat["prompt"] and role in chat["prompt"][-30:], chat["prompt"]
    loss = chat["loss"]
    assert loss[1] < loss[0], loss
    samples = chat["samples"]  # the first conversation's question, answered in the template
    assert samples["prompt"] == 'The "assert" statement'[:60] and samples["before"] != samples["after"], samples
    assert chat["answered"] == samples["after"]  # result.answer(), as the run's sample was written

    # exported as a KerasHub preset and for Hugging Face, the adapters merged: KerasHub loads each back, and its
    # logits are the merged model's (the base preset's differ)
    for form, files in (
        ("preset", {"config.json", "metadata.json", "model.weights.h5"}),
        ("hf", {"config.json", "model.safetensors"}),
    ):
        note, listed, to_merged, to_base = exported[form]
        assert "the LoRA adapters merged into the kernels, float32" in note and files <= set(listed), (note, listed)
        assert to_merged < 1e-5 < 1e-3 < to_base, (form, to_merged, to_base)
