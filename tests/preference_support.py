"""What the preference-tuning tests run in their own processes (tests/models/test_preference.py, and Colab's CPU set in
tests/behaviour/test_colab_sets.py): preference pairs made so that one answer is preferred, and scripts that tune a
tiny preset on them. Importing this module imports no framework.
"""


def pairs(start: int, stop: int):
    """Preference pairs on Python's help topics `start` to `stop`: the same words after "Yes:" (chosen) and "No:"
    (rejected), so what is preferred is one token, and held-out pairs (other topics) show whether it was learned."""
    from pydoc_data.topics import topics

    out = []
    for name in sorted(topics)[start:stop]:
        words = " ".join(topics[name].split()[:4])
        out.append({"prompt": f"About {name}?", "chosen": f"Yes: {words}", "rejected": f"No: {words}"})
    return out


# Tunes the preset at sys.argv[1] by method sys.argv[3] on 48 pairs, with 16 held-out pairs as validation data, on the
# backend Keras was given: the history, the held-out pairs' reference scores as the run kept them, notes. One JSON line.
LEARNS = """
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import numpy as np
import keras
import tpukit
from preference_support import pairs

preset, logdir, method = sys.argv[1], sys.argv[2], sys.argv[3]
loss = (sys.argv[4:] or [None])[0]
config = tpukit.RunConfig(model=preset, method=method, sequence_length=48, batch_size=8, epochs=3, learning_rate=1e-2,
                          replicas=1, logdir=logdir, seed=3, sample_prompt="")
result = tpukit.train(config, data=pairs(0, 48), validation_data=pairs(48, 64), verbose=0)
kept = os.path.join(result.run_dir, "reference.npz")
reference = {k: v.tolist() for k, v in np.load(kept).items()} if os.path.exists(kept) else None
print(json.dumps({"status": result.status, "message": result.message, "backend": keras.backend.backend(),
                  "history": result.history, "notes": list(result.notes), "reference": reference,
                  "tokens_per_sec": result.tokens_per_sec, "flops_source": result.flops_source,
                  "adapters": sorted({str(w.dtype) for w in result.model.weights if "lora_kernel" in w.path}),
                  "modules": sorted(m for m in ("tensorflow", "tensorflow_text") if m in sys.modules),
                  "summary": result.summary()}))
"""

# The scores of PairScores and the method's loss on the preset at sys.argv[1], against NumPy's from the causal LM's
# own logits: log-probabilities summed (DPO) or averaged (SimPO) over the answers' tokens only. One JSON line.
HAND = """
import json, sys
import numpy as np
import keras, keras_hub
from tpukit.data import pairs as data_pairs
from tpukit.models import preference, pretrained

preset = sys.argv[1]
source = pretrained.Preset(preset)
rows = [{"prompt": "What is a list?", "chosen": "A mutable sequence.", "rejected": "A number."},
        {"prompt": "What is a tuple?", "chosen": "An immutable sequence of items.", "rejected": "Nothing at all."}]
packed, _ = data_pairs.tokenize(data_pairs.from_named_rows(enumerate(rows), "hand", "hand"),
                                     source.encoder(40))
x = packed.arrays.x
model = keras_hub.models.CausalLM.from_preset(preset, preprocessor=None)
logits = np.asarray(model({"token_ids": x["token_ids"].reshape(-1, 40),
                           "padding_mask": x["padding_mask"].reshape(-1, 40)}), "float64")
shifted = logits - logits.max(-1, keepdims=True)
logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
labels = x["labels"].reshape(-1, 40)
token = np.where(labels >= 0, np.take_along_axis(logp, np.maximum(labels, 0)[..., None], -1)[..., 0], 0.0)
summed, counted = token.sum(-1).reshape(-1, 2), (labels >= 0).sum(-1).reshape(-1, 2)
encoder = source.encoder(40)
out = {"counted": counted.tolist(), "answers": [], "cases": {}}
for r in range(4):  # the labelled positions: the answer's tokens and its end of turn, nothing of the prompt
    lab = labels[r][labels[r] >= 0].tolist()
    out["answers"].append([encoder.decode(lab[:-1]), lab[-1] == encoder.special("<end_of_turn>")])
reference = summed + np.array([[0.3, -0.2], [-0.5, 0.4]])  # any reference: the loss must use all four numbers
for name, beta, gamma in (("dpo", 0.1, 0.0), ("simpo", 2.0, 1.0)):
    method = preference.Method(name, beta, gamma, "start" if name == "dpo" else None)
    scores = np.asarray(preference.pair_scores(model, method.mean)(x), "float64")
    want = summed / counted if method.mean else summed
    if method.mean:
        margin = beta * (want[:, 0] - want[:, 1])
        y_true = np.zeros_like(want)
    else:
        margin = beta * ((want[:, 0] - reference[:, 0]) - (want[:, 1] - reference[:, 1]))
        y_true = reference
    hand = np.log1p(np.exp(-(margin - gamma)))
    got = np.asarray(method.loss(y_true.astype("float32"), scores.astype("float32")), "float64")
    out["cases"][name] = {"scores": float(np.abs(scores - want).max()), "scale": float(np.abs(want).max()),
                          "loss": float(np.abs(got - hand).max()), "loss_value": hand.tolist(),
                          "margin": margin.tolist()}
print(json.dumps(out))
"""

# On JAX, DPO on the preset at sys.argv[1]: a run uninterrupted, one stopped in its second epoch and resumed, an
# extension of a shorter one, QLoRA (int8), `load` and generate, export as a preset and as Hugging Face files, and
# the chain SFT then DPO (`init_from`). One JSON line.
LIFECYCLE = """
import json, os, sys, threading
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import numpy as np
import keras_hub
import tpukit
from preference_support import pairs
from run_support import CallAt

preset, logdir = sys.argv[1], sys.argv[2]
data = pairs(0, 48)
config = tpukit.RunConfig(model=preset, method="dpo", sequence_length=48, batch_size=8, epochs=3, learning_rate=1e-2,
                          replicas=1, logdir=logdir, seed=3, validation_split=0.25, steps_per_execution=1,
                          sample_prompt="About assert?")
whole = tpukit.train(config.replace(name="whole"), data=data, verbose=0)
stop = threading.Event()
cut = tpukit.train(config.replace(name="cut"), data=data, verbose=0, stop=stop, callbacks=[CallAt(6, stop.set)])
resumed = tpukit.resume(cut.run_dir, data=data, verbose=0)
short = tpukit.train(config.replace(name="short", epochs=1), data=data, verbose=0)
extended = tpukit.resume(short.run_dir, epochs=3, data=data, verbose=0)
loaded = tpukit.load(whole.run_dir)
said = [whole.answer("About assert?"), loaded.answer("About assert?"),
        loaded.model.generate("About", max_length=16)]
x = {"token_ids": np.arange(64, dtype="int32").reshape(2, 32) % 200 + 4, "padding_mask": np.ones((2, 32), "int32")}
from tpukit.runs import saving
want = np.asarray(saving.float32_copy(whole.model, merge=True)(x), "float32")  # what export writes: merged, float32
exported = {}
for format in ("preset", "hf"):
    path = os.path.join(logdir, f"export-{format}")
    whole.export(path, format=format)
    back = keras_hub.models.CausalLM.from_preset(path, preprocessor=None)
    exported[format] = float(np.abs(np.asarray(back(x), "float32") - want).max() / np.abs(want).max())
keras_file = os.path.join(logdir, "dpo.keras")
whole.export(keras_file)
import keras
exported["keras"] = float(np.abs(np.asarray(keras.saving.load_model(keras_file)(x), "float32") - want).max()
                          / np.abs(want).max())
qlora = tpukit.train(config.replace(name="qlora", quantize="int8", epochs=2), data=data, verbose=0)
sft = tpukit.train(config.replace(name="sft", method="sft", epochs=1),
                   data=[{"prompt": p["prompt"], "response": p["chosen"]} for p in data], verbose=0)
chained = tpukit.train(config.replace(name="chained", init_from=sft.run_dir, epochs=1), data=data, verbose=0)
def kept(run):
    return {k: v.tolist() for k, v in np.load(os.path.join(run.run_dir, "reference.npz")).items()}
print(json.dumps({"status": [r.status for r in (whole, cut, resumed, short, extended, qlora, sft, chained)],
                  "fingerprints": [whole.fingerprint, resumed.fingerprint, extended.fingerprint,
                                   tpukit.fingerprint(loaded.model)],
                  "cut": cut.epochs_done, "files": sorted(os.listdir(whole.run_dir)),
                  "kept": [kept(whole) == kept(cut), kept(short) == kept(extended), kept(whole) == kept(chained)],
                  "said": said, "samples": whole.samples, "exported": exported, "history": whole.history,
                  "qlora": [qlora.history, [n for n in qlora.notes if n.startswith("model: ")]],
                  "chained_notes": list(chained.notes), "config": loaded.config}))
"""

# The panel (headless, JAX) on the preset at sys.argv[1] set to DPO: the method from its dropdown, Train, the right
# chart's figure, the Runs table's validation figure, the settings' notes. One JSON line.
PANEL = """
import html, json, os, re, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import tpukit
from preference_support import pairs
from tpukit.ui import context

preset, logdir = sys.argv[1], sys.argv[2]
config = tpukit.RunConfig(model=preset, sequence_length=48, batch_size=8, epochs=2, learning_rate=1e-2,
                          logdir=logdir, sample_prompt="", seed=3)
panel = tpukit.panel(config, data=pairs(0, 48), display=False, context=context.JUPYTER, runs=[],
                     display_fn=lambda *a: None)
panel.form.widgets["method"].value = "dpo"  # as a person picks it from the dropdown
notes = {name: panel.form.notes[name].value for name in ("model", "lora_rank", "sequence_length")}
result = panel.train(wait=True)
curves = panel._progress_view.curves
table = html.unescape(panel.views["runs"].value)
print(json.dumps({"method": panel.config.method, "options": [str(o) for o in panel.form.widgets["method"].options],
                  "status": result.status if result else panel.message, "title": curves.acc_ax.get_title(),
                  "validation": re.findall(r">(reward accuracy [0-9.]+%)<", table), "notes": notes,
                  "message": panel.message}))
panel.close()
"""

# DPO on the preset at sys.argv[1] over 4 simulated CPU devices, each copy of the model split over 2 of them by its
# backbone's layout map (model_parallel=2), against the same run on one device. One JSON line.
SPLIT = """
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import tpukit
from preference_support import pairs

preset, logdir = sys.argv[1], sys.argv[2]
config = tpukit.RunConfig(model=preset, method="dpo", sequence_length=48, batch_size=8, epochs=2, learning_rate=1e-2,
                          replicas=4, model_parallel=2, logdir=logdir, seed=3, sample_prompt="About assert?",
                          backend="jax")
split = tpukit.train(config, data=pairs(0, 48), verbose=0)
print(json.dumps({"status": split.status, "message": split.message, "history": split.history,
                  "notes": [n for n in split.notes if n.startswith(("strategy", "model_parallel", "reference"))],
                  "samples": split.samples, "config": [split.config["replicas"], split.config["model_parallel"]]}))
"""

# A DPO run of the preset at sys.argv[1] (logdir sys.argv[2]) on JAX that records each call of the pair scorer:
# whether its inputs were concrete arrays (an eager pass of the whole model), traced (a compiled step) or Keras'
# symbolic tensors (a build, no computation). One JSON line.
EAGER = """
import json, sys, os
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import jax
import keras
import tpukit
from tpukit.models import preference
from preference_support import pairs

calls = []
made = preference.pair_scores

def recording(model, mean):
    scorer = made(model, mean)
    call = type(scorer).call
    def recorded(self, inputs, training=False):
        x = inputs["token_ids"]
        calls.append("traced" if isinstance(x, jax.core.Tracer) else "symbolic" if keras.KerasTensor in type(x).__mro__
                     else "eager")
        return call(self, inputs, training)
    type(scorer).call = recorded
    return scorer

preference.pair_scores = recording
config = tpukit.RunConfig(model=sys.argv[1], method="dpo", sequence_length=48, batch_size=8, epochs=1,
                          logdir=sys.argv[2], sample_prompt="")
result = tpukit.train(config, data=pairs(0, 32), verbose=0)
print(json.dumps({"status": result.status, "calls": calls}))
"""
