"""Every KerasHub causal LM family, byte-pair ones included: tiny GPT-2, Llama 3 and Qwen presets, built offline with
a byte-level BPE trained on the help topics (`hub_support.BUILD_BPE`), fine-tune with LoRA through train(), tokenized
by the preset's own KerasHub tokenizer, as its own preprocessor tokenizes (the preset, the tokenizer, the data and
the run together, so a behaviour test).
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

from hub_support import BUILD_BPE, FAMILIES  # noqa: E402

# Builds the preset of family sys.argv[3] at sys.argv[1] (one process: Keras loads once), fine-tunes it on the help
# topics, and sets its own preprocessor's ids for a sentence beside tpukit's.
TRAIN = (
    BUILD_BPE.replace("sys.argv[2]", "sys.argv[3]")
    + """
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
"""
)


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
@pytest.mark.parametrize("family", FAMILIES)
def test_a_byte_pair_family_fine_tunes_with_its_own_tokenizer(family, tmp_path):
    out = json.loads(_python(TRAIN, tmp_path / family, tmp_path / "runs", family).strip().splitlines()[-1])
    assert out["status"] == "completed", out["message"]
    assert out["model"] == {"gpt2": "GPT2CausalLM", "llama3": "Llama3CausalLM", "qwen": "QwenCausalLM"}[family]
    ours, theirs = out["ids"]
    assert ours == theirs[: len(ours)] and len(ours) > 5  # the family's own tokenizer, as its preprocessor runs it
    assert out["decoded"] == "The import statement binds a name, and 'del' unbinds it."
    loss = out["loss"]  # random tiny weights: the adapters on query and value move it little, but every epoch
    assert loss[2] < loss[1] < loss[0] and loss[2] < loss[0] - 0.005, loss
    assert out["adapters"] == ["float32"]
    samples = out["samples"]
    assert samples["prompt"] == "The import statement" and samples["before"] != samples["after"], samples
