"""What the pretrained-model tests run in their own processes: a tiny Gemma preset built offline, and a LoRA fine-tune
of it through tpukit.train() (tests/models/test_pretrained.py; tests/behaviour/test_colab_sets.py in Colab's TPU set,
after `tpukit.colab.setup(hub=True)`). Plain strings: importing this module imports no framework.
"""

VOCABULARY = 256

# Builds the tiny preset at sys.argv[1] (any backend); sys.argv[2:], where given, are special tokens its vocabulary
# has (Gemma's turn tokens, for chat).
BUILD = f"""
import sys
import keras, keras_hub
from tpukit.data import text

keras.utils.set_random_seed(0)  # the same tiny Gemma in every session: the loss tests see the same start

proto = text.train_sentencepiece(text.pydoc_topics().documents, {VOCABULARY}, specials=sys.argv[2:])
tokenizer = keras_hub.models.GemmaTokenizer(proto=proto)
backbone = keras_hub.models.GemmaBackbone(vocabulary_size={VOCABULARY}, num_layers=2, num_query_heads=4,
                                          num_key_value_heads=1, hidden_dim=16, intermediate_dim=32, head_dim=4)
preprocessor = keras_hub.models.GemmaCausalLMPreprocessor(tokenizer, sequence_length=32)
keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=preprocessor).save_to_preset(sys.argv[1])
"""

# Builds a tiny byte-pair preset of the family sys.argv[2] (gpt2, llama3, qwen) at sys.argv[1]: a byte-level BPE of
# VOCABULARY tokens trained on the help topics with `tokenizers`, the family's special tokens first, its chat
# template's among them (any backend).
FAMILIES = ("gpt2", "llama3", "qwen")
GEMMA_TURNS = ("<start_of_turn>", "<end_of_turn>")  # what a Gemma vocabulary has for its chat template
BUILD_BPE = f"""
import sys
import keras, keras_hub
from tpukit.data import text

keras.utils.set_random_seed(0)
where, family = sys.argv[1], sys.argv[2]
specials = {{"gpt2": ["<|endoftext|>"], "qwen": ["<|endoftext|>"],
            "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                       "<|eot_id|>"]}}[family]
specials += {{"qwen": ["<|im_start|>", "<|im_end|>"]}}.get(family, [])  # ChatML's turns, as Qwen's vocabulary has them
vocabulary, merges = text.train_byte_pair(text.pydoc_topics().documents, {VOCABULARY}, specials=specials)
size = dict(vocabulary_size=len(vocabulary), num_layers=2, hidden_dim=16, intermediate_dim=32)
if family == "gpt2":
    size["intermediate_dim"] = 64  # GPT-2's 4 x hidden, which KerasHub's loader of a Hugging Face GPT-2 assumes
    tokenizer = keras_hub.models.GPT2Tokenizer(vocabulary=vocabulary, merges=merges)
    backbone = keras_hub.models.GPT2Backbone(num_heads=4, max_sequence_length=64, **size)
    task, preprocessor = keras_hub.models.GPT2CausalLM, keras_hub.models.GPT2CausalLMPreprocessor
elif family == "llama3":
    tokenizer = keras_hub.models.Llama3Tokenizer(vocabulary=vocabulary, merges=merges)
    backbone = keras_hub.models.Llama3Backbone(num_query_heads=4, num_key_value_heads=2, **size)
    task, preprocessor = keras_hub.models.Llama3CausalLM, keras_hub.models.Llama3CausalLMPreprocessor
else:
    tokenizer = keras_hub.models.QwenTokenizer(vocabulary=vocabulary, merges=merges)
    backbone = keras_hub.models.QwenBackbone(num_query_heads=4, num_key_value_heads=2, **size)
    task, preprocessor = keras_hub.models.QwenCausalLM, keras_hub.models.QwenCausalLMPreprocessor
task(backbone=backbone, preprocessor=preprocessor(tokenizer, sequence_length=32)).save_to_preset(where)
"""

# Trains the preset at sys.argv[1] through tpukit.train() on the help topics, then compares its weights with the
# preset's: one JSON line.
TRAIN = """
import json, sys
import numpy as np
import keras, keras_hub
import tpukit

preset, logdir = sys.argv[1], sys.argv[2]
config = tpukit.RunConfig(model=preset, dataset="pydoc", dataset_size=256, sequence_length=32, batch_size=16,
                          epochs=3, learning_rate=1e-2, backend="jax", replicas=1, validation_split=None,
                          logdir=logdir, seed=3)
result = tpukit.train(config, verbose=0)
before = keras_hub.models.CausalLM.from_preset(preset, dtype="bfloat16", preprocessor=None)
was = {w.path: np.asarray(w.numpy(), dtype="float32") for w in before.weights}
changed, lora, frozen_dtypes = [], {}, set()
for w in result.model.weights:
    now = np.asarray(w.numpy(), dtype="float32")
    if "lora_kernel" in w.path:
        lora[w.path] = [w.trainable, str(w.dtype), float(np.abs(now).max())]
    else:
        frozen_dtypes.add(str(w.dtype))
        if not np.array_equal(now, was[w.path]):
            changed.append(w.path)
record = json.load(open(f"{result.run_dir}/result.json"))
from tpukit.models import flops
sample = {"token_ids": np.zeros((8, 32), "int32"), "padding_mask": np.ones((8, 32), "int32")}
forward = flops._jax_forward(result.model, sample) / 8
print(json.dumps({"status": result.status, "message": result.message, "loss": result.history["loss"],
                  "notes": list(result.notes), "recorded_notes": record.get("notes"), "changed": changed,
                  "lora": lora, "frozen_dtypes": sorted(frozen_dtypes), "model": result.config["model"],
                  "backend": keras.backend.backend(), "tensorflow_for_text": "tensorflow_text" in sys.modules,
                  "flops": [record["flops_per_example"], record["flops_source"], forward],
                  "samples": result.samples, "recorded_samples": record.get("samples"), "summary": result.summary()}))
"""

# A LoRA fine-tune of the preset at sys.argv[1] with held-out text, on the backend Keras was given (KERAS_BACKEND, or
# TensorFlow where it is installed, as in Colab): the adapters' dtypes and the validation loss per epoch. One JSON line.
LEARNS = """
import json, sys
import numpy as np
import keras
import tpukit
from tpukit.runs import saving

preset, logdir, quantize = sys.argv[1], sys.argv[2], (sys.argv[3:] or [None])[0]
config = tpukit.RunConfig(model=preset, dataset="pydoc", dataset_size=256, sequence_length=32, batch_size=16,
                          epochs=3, learning_rate=1e-2, replicas=1, validation_split=0.25, logdir=logdir, seed=3,
                          sample_prompt="", quantize=quantize)
result = tpukit.train(config, verbose=0)
out = {"status": result.status, "message": result.message, "backend": keras.backend.backend(),
       "val_loss": result.history["val_loss"], "notes": list(result.notes),
       "adapters": sorted({str(w.dtype) for w in result.model.weights if "lora_kernel" in w.path}),
       "frozen": sorted({str(w.dtype) for w in result.model.weights if not w.trainable})}
if quantize and result.status == "completed":  # what export writes: the adapters merged into the dequantized base
    x = {"token_ids": np.arange(64, dtype="int32").reshape(2, 32) % 200 + 4, "padding_mask": np.ones((2, 32), "int32")}
    want = np.asarray(result.model(x), "float32")
    merged = np.asarray(saving.float32_copy(result.model, merge=True)(x), "float32")
    out["merged_vs_quantized"] = float(np.abs(merged - want).max() / np.abs(want).max())
print(json.dumps(out))
"""

# A run stopped in its second epoch and resumed, against the same run uninterrupted; then load() of the latter.
RESUME = """
import json, os, sys, threading
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import numpy as np
import tpukit
from run_support import CallAt
from tpukit.training import determinism

preset, logdir = sys.argv[1], sys.argv[2]
config = tpukit.RunConfig(model=preset, dataset="pydoc", dataset_size=256, sequence_length=32, batch_size=16,
                          epochs=3, learning_rate=1e-2, backend="jax", replicas=1, validation_split=None,
                          logdir=logdir, seed=3, steps_per_execution=4)
whole = tpukit.train(config.replace(name="whole"), verbose=0)
stop = threading.Event()
cut = tpukit.train(config.replace(name="cut"), verbose=0, stop=stop, callbacks=[CallAt(5, stop.set)])  # step 20 of 48
(state,) = [os.path.join(cut.run_dir, "backup", f) for f in os.listdir(os.path.join(cut.run_dir, "backup"))
            if f.endswith(".state.npz")]
with np.load(state) as stored:
    backup = [[path, dtype] for key, path, dtype, shape, bits in json.loads(str(stored["__meta__"])) if key[0] == "m"]
resumed = tpukit.resume(cut.run_dir, verbose=0)
short = tpukit.train(config.replace(name="short", epochs=1), verbose=0)
extended = tpukit.resume(short.run_dir, epochs=3, verbose=0)  # a new run from the short one's adapters and optimizer
loaded = tpukit.load(whole.run_dir).model
from tpukit.models import pretrained
said = [pretrained.Preset(preset).generate(m, "The import statement", 24) for m in (whole.model, loaded)]
talks = [m.generate("The import statement", max_length=24) for m in (whole.model, loaded)]  # as KerasHub users call it
print(json.dumps({"whole": whole.fingerprint, "cut": [cut.status, cut.epochs_done], "resumed": resumed.fingerprint,
                  "loaded": determinism.fingerprint(loaded), "files": sorted(os.listdir(whole.run_dir)),
                  "adapters_bytes": os.path.getsize(os.path.join(whole.run_dir, "adapters.lora.h5")),
                  "preset_bytes": os.path.getsize(os.path.join(preset, "model.weights.h5")),
                  "lora_loaded": sum("lora_kernel" in w.path for w in loaded.weights), "backup": backup, "said": said, "talks": talks,
                  "samples": [whole.samples, cut.samples, resumed.samples],
                  "extended": [extended.status, extended.fingerprint, sorted(os.listdir(short.run_dir))]}))
"""

# QLoRA (sys.argv[3]: int8 or int4) on the preset at sys.argv[1] (JAX): a run stopped in its second epoch and
# resumed, against the same run uninterrupted; the base's dtypes, the adapters', the loss; the export as a KerasHub
# preset and as a Hugging Face folder, loaded back by KerasHub, against the float copy with the adapters merged. One
# JSON line.
QLORA = """
import json, os, sys, threading
sys.path.insert(0, os.path.join(os.getcwd(), "tests"))
import numpy as np
import keras, keras_hub
import tpukit
from run_support import CallAt
from tpukit.runs import saving

preset, logdir, mode = sys.argv[1], sys.argv[2], sys.argv[3]
config = tpukit.RunConfig(model=preset, dataset="pydoc", dataset_size=256, sequence_length=32, batch_size=16,
                          epochs=3, learning_rate=1e-2, backend="jax", replicas=1, validation_split=None,
                          logdir=logdir, seed=3, steps_per_execution=4, quantize=mode, sample_prompt="")
whole = tpukit.train(config.replace(name="whole"), verbose=0)
stop = threading.Event()
cut = tpukit.train(config.replace(name="cut"), verbose=0, stop=stop, callbacks=[CallAt(5, stop.set)])
resumed = tpukit.resume(cut.run_dir, verbose=0)
loaded = tpukit.load(whole.run_dir).model
x = {"token_ids": np.arange(64, dtype="int32").reshape(2, 32) % 200 + 4, "padding_mask": np.ones((2, 32), "int32")}
merged = saving.float32_copy(whole.model, merge=True)
want = np.asarray(merged(x), "float32")
exported = {}
for format in ("preset", "hf"):
    path = os.path.join(logdir, f"export-{format}")
    whole.export(path, format=format)
    back = keras_hub.models.CausalLM.from_preset(path, preprocessor=None)
    exported[format] = float(np.abs(np.asarray(back(x), "float32") - want).max())
base = keras_hub.models.CausalLM.from_preset(preset, preprocessor=None)
print(json.dumps({"status": [whole.status, cut.status, resumed.status], "loss": whole.history["loss"],
                  "fingerprints": [whole.fingerprint, resumed.fingerprint, tpukit.fingerprint(loaded)],
                  "notes": list(whole.notes),
                  "kernels": sorted({str(w.dtype) for w in whole.model.weights if w.path.endswith("kernel")}),
                  "adapters": sorted({str(w.dtype) for w in whole.model.weights if "lora_kernel" in w.path}),
                  "loaded_kernels": sorted({str(w.dtype) for w in loaded.weights if w.path.endswith("kernel")}),
                  "exported": exported, "scale": float(np.abs(want).max()),
                  "quantized_vs_merged": float(np.abs(np.asarray(whole.model(x), "float32") - want).max()),
                  "base_vs_merged": float(np.abs(np.asarray(base(x), "float32") - want).max()),
                  "exported_dtypes": sorted({str(w.dtype) for w in back.weights})}))
"""

# For each size in sys.argv[1] (JSON: vocabulary, layers, hidden, heads, head_dim, intermediate, batch, sequence), a
# Gemma with LoRA rank 4 and bfloat16 weights (a 9th item "int8" or "int4": QLoRA), compiled as tpukit compiles a
# preset: the estimate before compiling against XLA's own figure for the compiled step (on the CPU, where XLA
# computes bfloat16 in float32). JSON lines.
MEMORY = """
import json, sys
import numpy as np
import keras, keras_hub
from tpukit.models import lora, memory, pretrained

for family, vocabulary, layers, hidden, heads, head_dim, intermediate, batch, sequence, *quantize in json.loads(
        sys.argv[1]):
    keras.utils.set_random_seed(0)
    sizes = dict(vocabulary_size=vocabulary, num_layers=layers, hidden_dim=hidden, intermediate_dim=intermediate,
                 dtype="bfloat16")
    if family == "gemma":
        backbone = keras_hub.models.GemmaBackbone(num_query_heads=heads, num_key_value_heads=1, head_dim=head_dim,
                                                  **sizes)
        model = keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)
    elif family == "gpt2":
        backbone = keras_hub.models.GPT2Backbone(num_heads=heads, max_sequence_length=sequence, **sizes)
        model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    else:  # Llama 3's and Qwen's layout: grouped-query attention, head_dim = hidden / heads
        backbone = keras_hub.models.LlamaBackbone(num_query_heads=heads, num_key_value_heads=2, **sizes)
        model = keras_hub.models.LlamaCausalLM(backbone=backbone, preprocessor=None)
    lora.enable(backbone, 4, None, None, "tiny", *quantize)  # as a run enables it, QLoRA's int8 base where asked
    model.compile(optimizer=keras.optimizers.Adam(1e-3), weighted_metrics=[],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    x = {"token_ids": np.zeros((batch, sequence), "int32"), "padding_mask": np.ones((batch, sequence), "int32")}
    found = memory.estimate(model, pretrained.Preset(family).shape(model), batch_size=batch, sequence_length=sequence,
                            upcast=True)
    xla = memory.xla_step_bytes(model, x, np.zeros((batch, sequence), "int32"))
    print(json.dumps({"estimate": found.total, "xla": xla, "note": found.note(),
                      "terms": [found.weights, found.activations, found.logits]}), flush=True)
"""

# Trains the preset at sys.argv[1] for an epoch with remat=True and gradient_accumulation=2, and once as by default
# (remat "auto": on the CPU there is no device limit, so nothing changes): one JSON line.
REMAT = """
import json, sys
import numpy as np
import jax, keras, keras_hub
import tpukit

loads, compiles, loading = [], [], []  # a KerasHub task compiles itself with its defaults as from_preset makes it
load_preset = keras_hub.models.CausalLM.from_preset.__func__
compile_model = keras.Model.compile


def counted_load(cls, *a, **k):
    loads.append(a[0])
    loading.append(True)
    try:
        return load_preset(cls, *a, **k)
    finally:
        loading.pop()


keras_hub.models.CausalLM.from_preset = classmethod(counted_load)
def counted_compile(self, *a, **k):
    if not loading:
        compiles.append(type(self).__name__)
    return compile_model(self, *a, **k)


keras.Model.compile = counted_compile

preset, logdir = sys.argv[1], sys.argv[2]
config = tpukit.RunConfig(model=preset, dataset="pydoc", dataset_size=128, sequence_length=32, batch_size=16,
                          epochs=1, learning_rate=1e-2, backend="jax", replicas=1, validation_split=None,
                          logdir=logdir, seed=3)
ids, mask = np.ones((2, 32), "int32"), np.ones((2, 32), "int32")
out = {}
for name, changes in (("remat", dict(remat=True, gradient_accumulation=2)), ("default", {})):
    loads.clear(), compiles.clear()
    result = tpukit.train(config.replace(name=name, **changes), verbose=0)
    blocks = result.model.backbone.transformer_layers
    step = jax.make_jaxpr(lambda i, m: result.model.backbone({"token_ids": i, "padding_mask": m}))(ids, mask)
    out[name] = {"status": result.status, "loss": result.history["loss"], "notes": list(result.notes),
                 "remat": [getattr(b, "_remat_mode", None) is not None for b in blocks],  # Keras' private record
                 "checkpointed": "checkpoint" in str(step) or "remat" in str(step),  # jax.checkpoint in the trace
                 "loads": len(loads), "compiles": len(compiles),  # tpukit's, after from_preset
                 "accumulation": result.model.optimizer.gradient_accumulation_steps,
                 "config": [result.config["remat"], result.config["gradient_accumulation"]]}
print(json.dumps(out))
"""

# Trains a preset (built with 2 key-value heads, so the layout's "model" axis of 2 divides every sharded dimension)
# on 8 simulated CPU devices with model_parallel=2, then compares each weight's sharding with the layout map.
SHARDED = """
import json, sys
import keras, keras_hub
import tpukit

preset, logdir = sys.argv[1], sys.argv[2]
config = tpukit.RunConfig(model=preset, dataset="pydoc", dataset_size=64, sequence_length=16, batch_size=4,
                          epochs=1, backend="jax", accelerator="cpu", replicas=8, model_parallel=2,
                          validation_split=None, sample_prompt="", logdir=logdir)
result = tpukit.train(config, verbose=0)
mesh = keras.distribution.DeviceMesh((4, 2), ("batch", "model"), devices=keras.distribution.list_devices())
layout_map = keras_hub.models.GemmaBackbone.get_layout_map(mesh)
shardings = {}
for w in result.model.weights:
    spec = tuple(w.value.sharding.spec)
    layout = layout_map[w.path]
    expected = tuple(layout.axes) if layout is not None else ()
    shardings[w.path] = [list(spec + (None,) * (len(w.shape) - len(spec))),
                         list(expected + (None,) * (len(w.shape) - len(expected))), layout is not None]
print(json.dumps({"status": result.status, "message": result.message, "notes": list(result.notes),
                  "strategy": result.runtime.get("strategy_reason"), "replicas": result.runtime.get("replicas"),
                  "shardings": shardings, "global_batch": result.global_batch_size, "loss": result.history["loss"]}))
"""
