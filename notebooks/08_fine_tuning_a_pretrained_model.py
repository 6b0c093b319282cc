# ---
# jupyter:
#   accelerator: TPU
#   colab:
#     gpuType: V5E1
#   jupytext:
#     notebook_metadata_filter: accelerator,colab
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Fine-tuning a pretrained model with LoRA
#
# **Author:** tpukit contributors<br>
# **Date created:** 2026/11/27<br>
# **Last modified:** 2026/11/27<br>
# **Description:** A KerasHub Gemma loaded in bfloat16, LoRA adapters trained on token ids, memory counted, then
# the same through tpukit.<br>
# **Accelerator:** TPU (v5e-1 or v6e-1), GPU or CPU
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/08_fine_tuning_a_pretrained_model.ipynb)

# %% [markdown]
# ## Introduction
#
# A pretrained language model already knows a language; fine-tuning teaches it your text. Training all of its
# weights needs a copy of every weight's gradient and optimizer state, several times the model's size. **LoRA**
# (low-rank adaptation) freezes the weights and trains a small pair of matrices beside some of them: the layer
# computes `x @ W + x @ A @ B`, with `A` and `B` of a small rank `r`. Only `A` and `B` get gradients and optimizer
# state, so a 1-billion-parameter model fine-tunes on one 16 GB TPU chip.
#
# **You will learn to:**
#
# - load a KerasHub preset with `CausalLM.from_preset(name, dtype="bfloat16")`, and say where a real Gemma comes
#   from (Kaggle credentials, Gemma's terms) and what runs when it cannot (a tiny Gemma built offline);
# - turn on LoRA with `backbone.enable_lora(rank=4)` and count what trains, from the layers' shapes;
# - tokenize with `sentencepiece` and feed the model `{"token_ids", "padding_mask"}` with no preprocessor (Colab's
#   TPU runtime has no TensorFlow), compile a next-token loss, `fit`, and `generate` before and after;
# - count the memory: bfloat16 weights, Gemma's 256k-token vocabulary of logits, a v5e-1's 16 GB and a v6e-1's 32 GB;
# - do the same with `tpukit.train`: its notes (what trains, padding, the MFU basis for LoRA), what packing saves,
#   extending a run and resuming a stopped one, the adapters-only checkpoint, `tpukit.load` and `generate`.

# %% [markdown]
# ## Setup

# %%
# The same first cell in every tpukit notebook: install tpukit where it is missing, pick the Keras backend.
import glob
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("tpukit") is None:  # Colab: add tpukit only; the runtime's TF, JAX and Keras stay
    shared = sorted(glob.glob("tpukit-*.whl"))  # a wheel your instructor shared, uploaded to the Files pane
    source = shared[-1] if shared else "tpukit @ git+https://github.com/tpukit/tpukit"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], check=True)

# Keras reads KERAS_BACKEND once, on its first import, so the backend is chosen here, before anything imports it.
if os.environ.get("KERAS_BACKEND"):
    why = "KERAS_BACKEND was already set"
elif importlib.util.find_spec("tensorflow") is not None:
    os.environ["KERAS_BACKEND"] = "tensorflow"
    why = "TensorFlow is installed (Colab's CPU and GPU runtimes)"
else:
    os.environ["KERAS_BACKEND"] = "jax"
    why = "no TensorFlow here (Colab's TPU runtime: JAX and Keras 3)"
print(f"Keras backend: {os.environ['KERAS_BACKEND']}, because {why}.")

SMOKE = os.environ.get("TPUKIT_SMOKE") == "1"  # the tests set TPUKIT_SMOKE=1: every size shrinks to seconds

# %% [markdown]
# KerasHub holds the pretrained models. Colab's CPU and GPU runtimes ship it (0.26, with TensorFlow); its TPU
# runtime does not, and every KerasHub before 0.32.0 imports TensorFlow, which that runtime lacks. So in Colab the
# next cell runs `tpukit.colab.setup(hub=True)` first: on the TPU runtime it installs keras-hub 0.32.0 with
# `--no-deps` and moves keras to 3.15.1 (which 0.32.0 needs), the one package of the runtime that moves, and says
# so in one line (it also adds TensorBoard where missing). A new Keras cannot replace one already imported, so it
# must run **before anything imports Keras**: in a fresh runtime, right after the first cell. Run after Keras, it
# stops with `RestartRequired`: *Runtime > Restart session*, then run the notebook from the top.

# %%
from tpukit.ui import context

if context.detect() == context.COLAB:
    import tpukit.colab

    tpukit.colab.setup(hub=True)  # before Keras is imported; nothing to do where it ran already

import json
import math
import re
import threading
import time

import keras
import keras_hub
import numpy as np
import sentencepiece

import tpukit
from tpukit.data import text
from tpukit.models import credentials, pretrained
from tpukit.teaching import SOLUTIONS, answered, check

runtime = tpukit.connect()
print(runtime.describe())
print(f"keras {keras.__version__}, keras-hub {keras_hub.__version__}, backend {keras.backend.backend()}")

# Each exercise leaves `...` for you to fill in. Its folded solution cell fills it in only with TPUKIT_SOLUTIONS=1
# (the tests set it), so the self-check under it tests your answer, not ours.

# %% [markdown]
# ## Where the model comes from
#
# KerasHub's presets download from Kaggle (or Hugging Face). Gemma is gated: you must accept its terms once, on
# the Kaggle page KerasHub downloads it from (kaggle.com/models/keras/gemma3), and give Kaggle your credentials:
#
# - **In Colab**: Kaggle > Settings > API > "Create New Token" gives an API token. In Colab's **Secrets** (the key
#   icon on the left) add it as `KAGGLE_API_TOKEN` (or a username and key as `KAGGLE_USERNAME` and `KAGGLE_KEY`)
#   and switch on **Notebook access** beside it.
# - **Elsewhere**: set `KAGGLE_API_TOKEN` (or `KAGGLE_USERNAME` and `KAGGLE_KEY`) before starting Python, put the
#   token in `~/.kaggle/access_token` (or `kaggle.json`), or call `kagglehub.login()`.
#
# `tpukit.models.credentials.find("kaggle")` looks in each of those places, as kagglehub does, and says where it
# found them (never their value), or why none could be used: a secret without Notebook access is the usual one.
# `train()` asks it too, and puts Colab's Secrets where kagglehub reads them.
#
# With credentials but without the terms accepted, the download fails with kagglehub's **403** ("403 Client Error.
# You don't have permission to access resource at URL: ..." and, further on, "a resource requiring consent"):
# accept them on the model page with the same account, then run the loading cell again. Without
# credentials, without network, on a CPU (too slow for a billion parameters), and always in the tests
# (`TPUKIT_SMOKE=1`), the notebook uses a **tiny Gemma built here**, so it runs offline top to bottom. The real
# one is `gemma3_instruct_1b`: 1 billion parameters, 2 GB in bfloat16, instruction-tuned.

# %%
REAL = "gemma3_instruct_1b"
found = credentials.find("kaggle")
credentials.use(found)  # Colab's Secrets into this process's environment, where kagglehub reads them
print(found.describe())
ACCELERATOR = runtime.kind in ("tpu", "gpu")  # a 1-billion-parameter fine-tune is hours on a CPU
USE_REAL = not SMOKE and ACCELERATOR and bool(found)
why = "TPUKIT_SMOKE=1" if SMOKE else "no accelerator" if not ACCELERATOR else "no Kaggle credentials"
print(f"the model: {REAL}, from Kaggle" if USE_REAL else f"the model: the tiny Gemma ({why})")

# %% [markdown]
# ## The text: a style the model does not have
#
# A short fine-tune shows best where it teaches what the model visibly does not do. Python's help topics
# (`pydoc_data.topics`, 79 documents shipped with every Python) are English prose, which Gemma already writes.
# So each topic becomes **cards** in a house style no instruction-tuned model uses: a header line naming the topic,
# then up to four of its sentences, each a bullet in capitals. One topic, `lambda`, is held out of the cards: the
# samples before and after ask for its card, so what changes is the style, not a text learned by heart.

# %%
HELD_OUT = "lambda"
PROMPT = f"Python help, {HELD_OUT}:\n"  # a card's header line: the samples continue it


def cards(per_card=4):
    """Each help topic but HELD_OUT as cards: its header line, then up to `per_card` of its sentences, each a bullet
    in capitals. Only the prose paragraphs: the grammar rules and code examples are the indented ones."""
    from pydoc_data.topics import topics

    out = []
    for name in sorted(set(topics) - {HELD_OUT}):
        prose = [" ".join(p.split()) for p in topics[name].split("\n\n") if p.strip() and not p.startswith(" ")]
        sentences = [s for p in prose for s in re.split(r"(?<=\.)\s+", p) if s.endswith(".") and len(s.split()) > 3]
        for i in range(0, len(sentences), per_card):
            out.append(f"Python help, {name}:\n" + "\n".join(f"- {s.upper()}" for s in sentences[i:i + per_card]))
    return out


documents = cards()
print(f"{len(documents)} cards, {sum(map(len, documents)):,} characters; the first:\n{documents[0]}")

# %% [markdown]
# The tiny Gemma is a real `GemmaBackbone`, 2 layers small enough to run anywhere (6,992 parameters, random
# weights), with a SentencePiece tokenizer trained here on the cards to 256 pieces, the backbone's vocabulary.
# `save_to_preset` writes it as a preset directory, and `from_preset` reads it with the same loader that reads a
# Kaggle download. It speaks no language: its "before" is noise and its "after" only the cards' most common
# pieces. The code is the real model's.

# %%
def build_tiny_gemma(path="tiny_gemma", vocabulary=256):
    """A tiny random Gemma and a SentencePiece tokenizer of `vocabulary` pieces, saved as a KerasHub preset."""
    keras.utils.set_random_seed(0)
    proto = text.train_sentencepiece(documents, vocabulary)
    backbone = keras_hub.models.GemmaBackbone(
        vocabulary_size=vocabulary, num_layers=2, num_query_heads=4, num_key_value_heads=1, hidden_dim=16,
        intermediate_dim=32, head_dim=4)
    preprocessor = keras_hub.models.GemmaCausalLMPreprocessor(keras_hub.models.GemmaTokenizer(proto=proto))
    keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=preprocessor).save_to_preset(path)
    return path


PRESET = REAL if USE_REAL else build_tiny_gemma()
print("preset:", PRESET, sorted(os.listdir(PRESET)) if os.path.isdir(PRESET) else "(Kaggle)")

# %% [markdown]
# ## Plain KerasHub: load in bfloat16, then LoRA
#
# `keras_hub.models.CausalLM.from_preset` reads the preset's config and builds its class (`Gemma3CausalLM` for
# `gemma3_instruct_1b`, `GemmaCausalLM` for the tiny one; calling that class's `from_preset` does the same).
# Two arguments matter here:
#
# - `dtype="bfloat16"` keeps the weights in 16 bits. Without it KerasHub casts them to Keras' default float,
#   float32: twice the memory. Frozen weights need no float32 master copy, so not `mixed_bfloat16` either.
# - `preprocessor=None`: the model then takes token ids, not strings (why, two sections down).
#
# `backbone.enable_lora(rank=4)` freezes every weight and adds rank-4 adapters to the attention's **query** and
# **value** projections (KerasHub's default targets; `target_layer_names=` picks others). From Keras 3.15 (the TPU
# track, after `colab.setup(hub=True)`) the adapters are float32: they are what trains. Keras 3.13.2, which Colab's
# GPU and CPU runtimes ship, makes them in the layer's dtype, so the cell prints **bfloat16** there: a bfloat16
# adapter rounds away every update smaller than 1/128 of its value and learns almost nothing. `tpukit.train` (below)
# makes them float32 on either.

# %%
try:
    model = keras_hub.models.CausalLM.from_preset(PRESET, dtype="bfloat16", preprocessor=None)
except Exception as e:  # 403: Gemma's terms not accepted on Kaggle; or no network
    if PRESET != REAL:
        raise
    print(f"{REAL} did not load ({str(e).splitlines()[0][:200]}). A 403 means: accept Gemma's terms on Kaggle "
          "with the account of your credentials, then rerun. Going on with the tiny Gemma.")
    PRESET = build_tiny_gemma()
    model = keras_hub.models.CausalLM.from_preset(PRESET, dtype="bfloat16", preprocessor=None)
REAL_LOADED = PRESET == REAL


def parameters(weights):
    return sum(math.prod(w.shape) for w in weights)


print(f"{type(model).__name__}: {model.count_params():,} parameters, "
      f"{sorted({w.dtype for w in model.weights})}, all trainable: {parameters(model.trainable_weights):,}")
model.backbone.enable_lora(rank=4)
print(f"after enable_lora(rank=4): {parameters(model.trainable_weights):,} trainable "
      f"({parameters(model.trainable_weights) / model.count_params():.2%} of the weights)")
for w in model.trainable_weights[:4]:
    print(f"  {w.path:45} {str(tuple(w.shape)):16} {w.dtype}")

# %% [markdown]
# Each adapted layer is an `EinsumDense` whose kernel has three axes: the query's is `(heads, hidden, head_dim)`.
# Keras' LoRA keeps that shape: `lora_kernel_a` is the kernel's shape with its last axis replaced by the rank, and
# `lora_kernel_b` is `(rank, last axis)`. So `A` is not `hidden x rank` as in a plain matrix: it has one per head.
#
# ### Exercise 1: how many parameters does rank 8 add?
#
# Gemma 3 1B (`gemma3_instruct_1b`) has 26 decoder layers, a hidden size of 1152, 4 query heads and 1 key-value
# head, each 256 wide: its query kernel is `(4, 1152, 256)` and its value kernel `(1, 1152, 256)`. **Compute
# `LORA_8`**, the number of parameters `backbone.enable_lora(rank=8)` makes trainable. The self-check builds a
# backbone with exactly that attention (a small vocabulary and feed-forward, so it fits any runtime), turns on
# rank 8, and counts `trainable_weights` (about 10 seconds).

# %% tags=["exercise"]
LORA_8 = ...  # YOUR ANSWER: a count of parameters

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["LORA_8 = 26 * (1152 * 8 + 8 * 1024 + 1152 * 8 + 8 * 256)", "LORA_8 = (4 * 1152 * 8 + 8 * 256) + (1 * 1152 * 8 + 8 * 256)", "LORA_8 = 26 * 3 * (4 * 1152 * 8 + 8 * 256)"]
# @title Solution
if SOLUTIONS:
    query = 4 * 1152 * 8 + 8 * 256  # lora_kernel_a (4, 1152, 8) and lora_kernel_b (8, 256)
    value = 1 * 1152 * 8 + 8 * 256  # (1, 1152, 8) and (8, 256)
    LORA_8 = 26 * (query + value)  # 1,304,576: 0.13% of the model

# %% tags=["self-check"]
# Self-check: Gemma 3 1B's attention in every layer, LoRA rank 8, its trainable weights counted
answered(LORA_8, "per layer, one A and one B for the query and for the value; A keeps the kernel's first two axes")
gemma3_attention = keras_hub.models.Gemma3Backbone(
    vocabulary_size=256, image_size=None, num_layers=26, num_query_heads=4, num_key_value_heads=1, hidden_dim=1152,
    intermediate_dim=8, head_dim=256, dtype="bfloat16")
gemma3_attention.enable_lora(rank=8)
measured = sum(math.prod(w.shape) for w in gemma3_attention.trainable_weights)
print(f"your count: {LORA_8:,} | trainable after enable_lora(rank=8): {measured:,}")
check(LORA_8 == measured, "list the shapes of one layer's four LoRA kernels, then multiply by the layers")
del gemma3_attention
print("Exercise 1: correct.")

# %% [markdown]
# ## Tokens without TensorFlow
#
# A KerasHub task normally carries a **preprocessor** that turns strings into token ids inside a `tf.data`
# pipeline, with `tensorflow-text`; Gemma 3's still does in keras-hub 0.32.0. Colab's TPU runtime has no
# TensorFlow, and installing it beside JAX would bring 600 MB and a second framework that wants the TPU. So the
# text is tokenized here with `sentencepiece` itself (Gemma's tokenizer *is* a SentencePiece model: its `proto`),
# and the model, built with `preprocessor=None`, takes what a preprocessor would have made: `token_ids` and a
# `padding_mask`. The labels are the same ids one position later: the next token.
#
# Here the documents are **packed** end to end (each opened by `<bos>` and closed by `<eos>`) and cut into rows of
# `SEQUENCE` tokens, so no position is padding; the last, partial row is dropped. The rows are shuffled once, here.
# The price: KerasHub's causal LMs take a padding mask and no document ids, so in a row that holds the end of one
# document and the start of the next, the second attends to the first. tpukit starts each document on a row of its
# own instead (exercise 3 counts what that costs).

# %%
SEQUENCE = 256 if REAL_LOADED else (32 if SMOKE else 64)
tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(PRESET)
pieces = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.proto)
print(f"{type(tokenizer).__name__}: {pieces.vocab_size():,} pieces; <pad> {tokenizer.pad_token_id}, "
      f"<bos> {pieces.bos_id()}, <eos> {pieces.eos_id()}")
print(pieces.encode(PROMPT, out_type=str))

stream = np.concatenate([[pieces.bos_id(), *pieces.encode(d), pieces.eos_id()] for d in documents]).astype("int32")
rows = (len(stream) - 1) // SEQUENCE
token_ids = stream[: rows * SEQUENCE].reshape(rows, SEQUENCE)
labels = stream[1: rows * SEQUENCE + 1].reshape(rows, SEQUENCE)
order = np.random.default_rng(0).permutation(rows)
token_ids, labels = token_ids[order], labels[order]
print(f"{len(documents)} cards, {len(stream):,} tokens, {rows} rows of {SEQUENCE}")

# %% [markdown]
# ## Compile, generate, fit, generate
#
# The loss is next-token cross-entropy on the logits (`from_logits=True`). `sampler="greedy"` makes `generate`
# pick the likeliest token each time, so before and after compare fairly. `generate` also takes token ids here: a
# row holding the prompt, then room to fill, marked by the padding mask. KerasHub's `fit` batches the arrays into a
# dataset for its preprocessor (with `grain`, which every Colab runtime ships, or `tf.data`), even when there is
# none; `fit` cannot shuffle such a dataset, which is why the rows were shuffled above.
#
# At full size the real model trains 60 steps of 4 x 256 tokens. A step costs about 4 x 1 billion x 1,024 = 4.1
# TFLOP (forward 2N a token, the activations' gradients 2N; the frozen weights get none): about 20 ms at a v5e's
# 197 TFLOP/s, 70 ms at 30% of it, so the compile (about 40 s, our estimate) is most of the wait; a T4 has no
# bfloat16 units and runs it in float32 at 8 TFLOP/s, about 1.7 s a step at 30%. The tiny one trains 3 epochs in
# seconds on a CPU. The whole notebook's wait is in README's workshop plan (docs/teaching.md has the arithmetic).

# %%
BATCH = 4 if REAL_LOADED else 16
STEPS = 8 if SMOKE else (60 if REAL_LOADED else rows // BATCH)
EPOCHS = 1 if SMOKE or REAL_LOADED else 3
RATE = 2e-4 if REAL_LOADED else 1e-2  # LoRA's usual 1e-4 to 3e-4, at its upper end for a run of 60 steps

model.compile(optimizer=keras.optimizers.Adam(RATE),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), sampler="greedy")


def complete(model, prompt, length=64 if REAL_LOADED else 24):
    """`prompt` continued greedily to `length` tokens (tokenized with sentencepiece: no preprocessor), as text and
    as its first pieces (control pieces such as <eos> decode to no text)."""
    ids = [pieces.bos_id(), *pieces.encode(prompt)]
    row = np.zeros((1, length), "int32")
    row[0, : len(ids)] = ids
    mask = (np.arange(length) < len(ids)).astype("int32")[None, :]
    out = model.generate({"token_ids": row, "padding_mask": mask}, stop_token_ids=None)
    new = np.asarray(out["token_ids"][0, len(ids):]).tolist()
    return repr(pieces.decode(new)) + f", first pieces {[pieces.id_to_piece(i) for i in new[:6]]}"


before = complete(model, PROMPT)
print("before:", before)

# %%
n = STEPS * BATCH
started = time.perf_counter()
history = model.fit({"token_ids": token_ids[:n], "padding_mask": np.ones_like(token_ids[:n])}, labels[:n],
                    batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=2)
print(f"{EPOCHS} epoch(s) of {STEPS} steps in {time.perf_counter() - started:.1f} s (compile included); loss "
      + " -> ".join(f"{v:.3f}" for v in history.history["loss"]))
after = complete(model, PROMPT)
print(f"prompt: {PROMPT!r}\nbefore: {before}\nafter:  {after}")

# %% [markdown]
# ## Memory on one chip
#
# Three things fill a chip's memory in a LoRA fine-tune:
#
# - **The frozen weights**: 2 bytes a parameter in bfloat16, 4 in float32. Gemma 3 1B: 2 GB or 4 GB;
#   Gemma 2 2B: 5 GB or 10 GB. The adapters and Adam's two moments for them are a few megabytes.
# - **The logits**: one score per vocabulary entry for every position. Gemma's vocabulary is huge (256,000 tokens
#   in Gemma 1 and 2, 262,144 in Gemma 3), so for a batch of 8 rows of 1,024 tokens the logits alone are gigabytes,
#   and the loss and its gradient make more copies of that size.
# - **The activations** kept for the backward pass, which grow with batch x sequence and the layers.
#
# A v5e-1 has 16 GB of high-bandwidth memory, a v6e-1 32 GB (on a GPU runtime, a T4 has 16 GB). The cell counts
# the first two for the model at hand and for Gemma 3 1B.

# %%
def size(n):
    """n bytes, in GB, MB or kB."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


frozen = parameters(w for w in model.weights if not w.trainable)
print(f"this model's frozen weights: {frozen:,} parameters = {size(2 * frozen)} in bfloat16, "
      f"{size(4 * frozen)} in float32")
for vocabulary, name in ((model.backbone.vocabulary_size, "this model"), (262_144, "Gemma 3")):
    batch, length = 8, 1024
    print(f"logits for {batch} x {length} tokens, {name}'s {vocabulary:,}-token vocabulary: "
          f"{size(batch * length * vocabulary * 2)} in bfloat16, {size(batch * length * vocabulary * 4)} "
          "in float32")
print("chip memory: v5e-1 16 GB, v6e-1 32 GB")
if keras.backend.backend() == "jax":
    import jax

    stats = jax.devices()[0].memory_stats() or {}  # a TPU or GPU reports its memory; a CPU reports nothing
    if stats:
        print(f"in use on {jax.devices()[0].device_kind}: {size(stats['bytes_in_use'])} of "
              f"{size(stats['bytes_limit'])}")

# %% [markdown]
# So on a v5e-1 Gemma 3 1B trains with LoRA at a few thousand tokens a step: 2 GB of weights, and logits of
# about 0.5 GB per 1,000 tokens in bfloat16 (1 GB in float32, and the loss makes float32 copies). A v6e-1 holds
# about twice as many tokens a step. Gemma 7B (17 GB in bfloat16) does not fit a v5e-1 at all without
# quantizing its weights (`model.quantize("int8")` before `enable_lora`).
#
# ### Exercise 2: how big are the logits?
#
# A Gemma with a 256,000-token vocabulary, its weights loaded in bfloat16 as above, is given a batch of 2 rows of
# 64 tokens. **Compute `LOGITS_BYTES`**, the size in bytes of the logits it returns. The self-check builds such
# a Gemma (tiny layers, the full vocabulary), calls it on the batch, and reads the `nbytes` of what came back.

# %% tags=["exercise"]
LOGITS_BYTES = ...  # YOUR ANSWER: bytes

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["LOGITS_BYTES = 2 * 64 * 256_000 * 4", "LOGITS_BYTES = 2 * 64 * 262_144 * 2", "LOGITS_BYTES = 64 * 256_000 * 2"]
# @title Solution
if SOLUTIONS:
    LOGITS_BYTES = 2 * 64 * 256_000 * 2  # rows x positions x vocabulary x 2 bytes: bfloat16 in, bfloat16 out

# %% tags=["self-check"]
# Self-check: a Gemma with the full vocabulary in bfloat16, called on 2 x 64 token ids
answered(LOGITS_BYTES, "one score per vocabulary entry at every position of every row; each in the dtype the "
                       "weights compute in")
wide = keras_hub.models.GemmaCausalLM(
    backbone=keras_hub.models.GemmaBackbone(vocabulary_size=256_000, num_layers=1, num_query_heads=1,
                                            num_key_value_heads=1, hidden_dim=16, intermediate_dim=32, head_dim=16,
                                            dtype="bfloat16"), preprocessor=None)
logits = wide({"token_ids": np.ones((2, 64), "int32"), "padding_mask": np.ones((2, 64), "int32")})
measured = keras.ops.convert_to_numpy(logits).nbytes
print(f"your answer: {LOGITS_BYTES:,} bytes | the logits: shape {tuple(logits.shape)}, {logits.dtype}, "
      f"{measured:,} bytes")
check(LOGITS_BYTES == measured, "compare the shape and the dtype printed above with the ones you multiplied")
del wide, logits
print("Exercise 2: correct.")

# %% [markdown]
# ## The same through tpukit
#
# `tpukit.train` takes a preset where it takes a model name: a preset directory, `kaggle://...`, `hf://...` or a
# KerasHub name such as `gemma3_instruct_1b`. With `lora_rank` set (4 is the default) it loads the weights in
# bfloat16, turns on LoRA with float32 adapters, tokenizes the text with the preset's own KerasHub tokenizer
# (SentencePiece for Gemma, byte-pair for Llama 3, Qwen or GPT-2), packs it into rows of `sequence_length`, and
# compiles the next-token loss, skipping the padding: what the cells above did by hand. `dataset=` takes the same
# cards as your own data comes: a JSONL file, a line of `{"text": ...}` each (or `{"prompt": ..., "response": ...}`
# pairs, or chat `{"messages": [...]}`, which it writes in the preset's chat template). `sample_prompt` is what the
# run's samples continue, before and after. The run also writes its record, its TensorBoard logs and a backup after
# each epoch, in `runs/`.
#
# The model trained above is not needed again. Its weights (2 GB of chip memory for Gemma 3 1B) are freed once
# nothing holds it: the name `model`, and `history`, since Keras' `History` keeps the model it trained
# (`History.set_model`). Dropping both lets Python free them before tpukit loads its own copy.

# %%
model = history = None
with open("cards.jsonl", "w") as f:
    f.writelines(json.dumps({"text": card}) + "\n" for card in documents)
config = tpukit.RunConfig(model=PRESET, dataset="cards.jsonl", lora_rank=4, sequence_length=SEQUENCE,
                          batch_size=BATCH, epochs=1, steps_per_epoch=STEPS, learning_rate=RATE,
                          validation_split=None, logdir="runs", seed=1, sample_prompt=PROMPT)
result = tpukit.train(config, runtime, verbose=2)
print(result.summary())

# %% [markdown]
# The run's **notes** say what the cells above printed piece by piece: what trains (and the frozen weights'
# dtype), how the text was laid out in rows and how much of it is padding, and how the model was compiled. Its **MFU** counts FLOPs on a LoRA basis: the frozen weights get no
# weight gradients, so a step costs about 2x the forward pass, not the 3x of full training (which would overstate
# the MFU by half); `flops_source` says how it was counted.

# %%
for note in result.notes:
    print("-", note)
print("FLOPs per example:", result.flops_per_example, "|", result.flops_source)
print("MFU:", f"{result.mfu:.1%} of {result.mfu_basis}" if result.mfu else "not measured on this device")

# %% [markdown]
# ### Exercise 3: what a row of its own costs
#
# Short documents (cards, chat turns, one-line examples) are where a row of its own costs: the notes above give the
# share for the cards. Each position's label is the next token, so a document of `n` tokens brings
# `n - 1` labels (its first token is nobody's next token) and fills `ceil((n - 1) / L)` rows of `L` positions of its
# own; positions after its last token are padding, which the loss ignores. That is what `tpukit.data.text.pack`
# does. Packed end to end, as the hand-written loop above, all the tokens share rows, and documents see each other.
#
# Four documents of 20, 50, 90 and 130 tokens, rows of 64. **Compute `PADDING`**: the share of positions that are
# padding with a row of its own for each document, and packed end to end, as fractions (0.25 is 25%), each within
# 1.5 points. The self-check lays such documents out with tpukit, reads the share from the `padding_mask` the model
# is given, and counts the packed rows.

# %% tags=["exercise"]
PADDING = ...  # YOUR ANSWER: (a row of its own for each, packed end to end)

# %% tags=["solution"] cellView="form" jupyter={"source_hidden": true} wrong_answers=["PADDING = (0.0, 0.0)", "PADDING = (1 - (20 + 50 + 64 + 64) / (4 * 64), 1 - 290 / (5 * 64))", "PADDING = (1 - 286 / (7 * 64), 0.0)", "PADDING = (0.094, 0.362)"]
# @title Solution
if SOLUTIONS:
    # own rows: 19, 49, 89 and 129 labels fill 1 + 1 + 2 + 3 = 7 rows of 64; 290 of 448 positions hold a token
    # packed: 290 tokens in 5 rows of 64 (289 labels need 5); 30 of 320 positions are left over
    PADDING = (1 - 290 / (7 * 64), 30 / (5 * 64))  # about 35% and 9%

# %% tags=["self-check"]
# Self-check: four documents of the lengths above, packed by tpukit into rows of 64
answered(PADDING, "count the rows each way first: a document of n tokens needs ceil((n - 1) / 64) rows of its own")
lengths = (20, 50, 90, 130)
laid_out = text.pack([list(range(4, 4 + n)) for n in lengths], 64, pad_id=0)
mask = laid_out.arrays.x["padding_mask"]  # what the model is given: 1 where a position holds a token
end_to_end_rows = -(-(sum(lengths) - 1) // 64)  # the labels of all the tokens in one stream
measured = (1 - float(mask.mean()), 1 - sum(lengths) / (end_to_end_rows * 64))
print(f"your shares: {PADDING[0]:.1%}, {PADDING[1]:.1%} | tpukit's rows: {measured[0]:.1%} "
      f"({laid_out.arrays.y.shape[0]} rows); end to end: {measured[1]:.1%} ({end_to_end_rows} rows)")
check(all(abs(a - b) <= 0.015 for a, b in zip(PADDING, measured)), "compare each share above with yours")
print("Exercise 3: correct.")

# %% [markdown]
# ## Extend a run, resume a stopped one; the adapters-only checkpoint
#
# A completed run is never trained again in place: `tpukit.resume(run_dir, epochs=2)` **extends** it into a new
# run directory that names it as its `parent`, starting from its adapters and optimizer state. (A run that was
# stopped or killed resumes in its own directory, from its last whole epoch, with `tpukit.resume(run_dir)`.)
#
# The final weights are saved as **the adapters alone**, `adapters.lora.h5`: the frozen weights are the preset's,
# and stay there. For Gemma 3 1B at rank 4 that is 2.6 MB of adapters instead of 2 GB (for the tiny Gemma, whose
# adapters are 9% of its weights, the file's own overhead makes it about as large as the model).
#
# Each of this section's three runs loads its model and compiles it again: with Gemma 3 1B that is a minute or two
# each, for what does not depend on the model's size. So where the real model was loaded, this section runs the
# tiny Gemma (built in seconds), and the next one loads the real run.

# %%
small = config if not REAL_LOADED else config.replace(
    model=build_tiny_gemma(), sequence_length=64, batch_size=16, steps_per_epoch=10, learning_rate=1e-2, name="tiny")
base = result if not REAL_LOADED else tpukit.train(small, runtime, verbose=0)
extended = tpukit.resume(base.run_dir, runtime, epochs=2, verbose=2)
print(f"extended: {extended.status}, {extended.epochs_done} epochs, parent {extended.parent}")
print("files:", sorted(os.listdir(extended.run_dir)))
adapters = os.path.getsize(os.path.join(extended.run_dir, "adapters.lora.h5"))
frozen_here = parameters(w for w in extended.model.weights if not w.trainable)
print(f"adapters.lora.h5: {size(adapters)}; the frozen weights in bfloat16: {size(2 * frozen_here)}")

# %% [markdown]
# A run that stops before its end (the panel's **Stop**, a `stop` event set, a runtime that went away) keeps a
# backup of its last whole epoch: the adapters and the optimizer's state, not the frozen weights, which the preset
# holds. `tpukit.resume(run_dir)` finishes it **in its own directory** from there, and ends with the weights the
# run would have had without the break, bit for bit (`tests/models/test_pretrained.py` checks it). The cell stops
# a two-epoch run of the same config one step into its second epoch, then resumes it.

# %%
class StopInSecondEpoch(keras.callbacks.Callback):
    """Sets `event` at the end of the second epoch's first step (or first call of several steps)."""

    def __init__(self, event):
        super().__init__()
        self.event, self.epoch = event, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 1:
            self.event.set()


stop = threading.Event()
cut = tpukit.train(small.replace(epochs=2, name="cut", steps_per_execution=1), runtime,
                   [StopInSecondEpoch(stop)], stop=stop, verbose=2)  # one step a call: the stop lands in the epoch
print(f"cut: {cut.status} after {cut.epochs_done} whole epoch(s)")
resumed = tpukit.resume(cut.run_dir, runtime, verbose=2)
print(f"resumed in the same directory: {resumed.run_dir == cut.run_dir}; {resumed.status}, {resumed.epochs_done} "
      f"epochs, loss " + " -> ".join(f"{v:.3f}" for v in resumed.history["loss"]))
cut = resumed = extended = base = None  # each held a model: free its memory

# %% [markdown]
# ## Load the run and generate
#
# `tpukit.load(run_dir)` rebuilds the model from the preset and the adapters; `Preset(...).generate` continues a
# prompt greedily, tokenized with sentencepiece (the `complete` above, in the package). The same weights say the
# same thing. The run's own samples, before and after, are in `result.samples`.

# %%
loaded = tpukit.load(result.run_dir).model
preset = pretrained.Preset(PRESET)
said = [preset.generate(m, PROMPT, max_length=64 if REAL_LOADED else 24) for m in (result.model, loaded)]
print("trained:", repr(said[0]))
print("loaded: ", repr(said[1]))
print("the same:", said[0] == said[1], "| fingerprints:", result.fingerprint, tpukit.fingerprint(loaded))

# %% [markdown]
# ## Preference tuning: which of two answers is better
#
# After a supervised fine-tune, people teach a model which of two answers they prefer. **DPO** (Rafailov et al.,
# 2023) needs no reward model and no sampling: for a prompt, a *chosen* answer `c` and a *rejected* one `r`, it
# raises `log p(c) - log p_ref(c)` against `log p(r) - log p_ref(r)`, where `p_ref` is a frozen *reference* model,
# usually the supervised fine-tune itself:
#
# `loss = -log sigmoid(beta * ((log p(c) - log p_ref(c)) - (log p(r) - log p_ref(r))))`
#
# An answer's log-probability is the sum of its tokens' log-probabilities after the prompt, the prompt itself not
# counted. Here each pair's prompt is a card's header, the chosen answer the card (bullets in capitals), the
# rejected one the same sentences as plain prose: the style the fine-tune above taught, against the model's own.
# The cell computes one answer's log-probability with `keras.ops` on the loaded model: what a DPO step does for
# each answer of a batch.

# %%
def pairs(count=48):
    """(header, card, plain prose) preference pairs from the cards: the card preferred to the same words as prose."""
    out = []
    for card in documents[:count]:
        header, *bullets = card.split("\n")
        prose = " ".join(b[2:].capitalize() for b in bullets)
        out.append({"prompt": header, "chosen": "\n".join(bullets), "rejected": prose})
    return out


encoder = preset.encoder(64)
first = pairs(1)[0]
prompt_ids = encoder.encode([first["prompt"]])[0]
answer_ids = encoder.encode([first["chosen"]])[0][: 63 - len(prompt_ids)]
ids = np.array([prompt_ids + answer_ids], dtype="int32")
logits = loaded({"token_ids": ids, "padding_mask": np.ones_like(ids)})
log_probs = keras.ops.log_softmax(keras.ops.cast(logits, "float32"), axis=-1)[0, :-1]  # position t predicts t + 1
picked = keras.ops.take_along_axis(log_probs, keras.ops.expand_dims(ids[0, 1:], -1), axis=-1)[:, 0]
answer_logp = float(keras.ops.sum(picked[len(prompt_ids) - 1:]))  # the answer's tokens alone
print(f"log p(chosen answer | prompt) = {answer_logp:.2f} over {len(answer_ids)} tokens")

# %% [markdown]
# tpukit runs the same loss as a kind of run: `method="dpo"` on the same preset, with pairs of `prompt`, `chosen`
# and `rejected` as data (a list of dicts, a JSONL file or a Hugging Face dataset). `init_from=result.run_dir`
# starts from the cards' fine-tune, and that start is the reference: before training, tpukit scores every pair once
# with it (no second copy of the model in memory) and keeps the scores in the run's directory, so a resume compares
# with the same reference. Chosen and rejected answers run in one batch. The progress line shows the loss and the
# **reward accuracy** (the share of pairs whose chosen answer's reward is above the rejected one's) and margin, on the
# held-out pairs too. `method="simpo"` is the reference-free variant (Meng et al., 2024).

# %%
preferred = tpukit.train(
    config.replace(method="dpo", dataset="<preferences>", init_from=result.run_dir, validation_split=0.25,
                   batch_size=4, epochs=1 if REAL_LOADED else 3, steps_per_epoch=2 if SMOKE else None,
                   sample_prompt="", name="dpo"),
    runtime, data=pairs(16 if SMOKE else 48), verbose=2)
print(next(n for n in preferred.notes if n.startswith("reference:")))
print("held-out reward accuracy by epoch:", preferred.history["val_reward_accuracy"])

# %% [markdown]
# ## What you should see
#
# - In Colab, one line from `tpukit.colab.setup(hub=True)` (on the TPU runtime: keras-hub 0.32.0 added, keras
#   moved to 3.15.1) or that nothing was to install; then keras-hub's version and the backend (JAX on a TPU).
# - Without Kaggle credentials (and in the tests): the tiny Gemma's preset files (`config.json`,
#   `model.weights.h5`, `assets/`...). With them: `gemma3_instruct_1b` loads, or a 403 line that says to accept
#   Gemma's terms.
# - The weights in bfloat16; after `enable_lora(rank=4)` a small share trains: 704 of 7,696 parameters (9.1%) for
#   the tiny Gemma, about 650,000 of 1 billion (0.07%) for Gemma 3 1B; the first LoRA kernels' shapes, in float32
#   (bfloat16 on the GPU/CPU track's Keras 3.13.2).
#   Exercise 1: 1,304,576 at rank 8.
# - About 500 cards (499 from Python 3.11's help topics, 545 from Colab's Python 3.13: the topics grow with
#   Python), the first one (`assert`'s) printed; the prompt's pieces; the cards as rows of tokens (about 2,000 rows
#   of 64 for the tiny Gemma).
# - The prompt, then "before" and "after" one above the other. The tiny Gemma's "before" is noise; its loss falls a
#   little (random weights, and LoRA moves only the query and value) and its "after" repeats a common piece of the
#   cards. Gemma 3 1B answers the held-out card's header in its own way before (prose, or Markdown); after 60 steps
#   at 2e-4 it should write the cards' style, bullets in capitals (our expectation: not yet run on a TPU or GPU).
# - Memory: the logits for 8 x 1,024 tokens of Gemma 3 are 4.3 GB in bfloat16, 8.6 GB in float32, more than the
#   model's 2 GB of weights. Exercise 2: 65,536,000 bytes, bfloat16.
# - tpukit: a summary with its samples (before noise for the tiny Gemma, after the cards' bullets appear), notes
#   that name the LoRA rank and trainable share, the rows and their padding (each card starts its own row: about
#   12% of the tiny Gemma's rows of 64 are padding; more in rows of 256, which most cards do not fill), and a
#   LoRA-basis FLOPs count; the extended run with its parent (the tiny Gemma's, where the real one was loaded);
#   `adapters.lora.h5` and no `model.weights.h5`; the cut run `stopped after 1 whole epoch(s)`, then resumed in the
#   same directory to 2 epochs; the trained and the loaded model saying the same text.
#   Exercise 3: 35% of the positions are padding with a row of its own for each short document, 9% packed end to
#   end (where the documents attend to each other).
# - Preference tuning: the chosen card's log-probability (a sum over its tokens: tens to hundreds, negative); then
#   the DPO run's reference line (scored once before training, by the model as the run starts: the cards'
#   fine-tune) and its held-out reward accuracy, a share that rises above 0.5 as the cards are preferred.
#
# ## On a TPU, a GPU or the CPU
#
# - **TPU (v5e-1, v6e-1)**: Keras 3 on JAX. The first step compiles (a minute or two for Gemma 3 1B); then steps
#   are fast. Keep the batch x sequence within the memory above; the v6e-1 takes about twice a v5e-1's. bfloat16
#   is the TPU's own type.
# - **GPU (T4)**: Keras on TensorFlow, with Colab's keras-hub 0.26 (nothing to install). The T4 has 16 GB and no
#   bfloat16 units (it emulates them, slowly): Gemma 3 1B fits, but steps are several times slower than on a v5e.
# - **CPU**: the tiny Gemma runs in seconds; a real Gemma loads and generates, slowly, and is not for training.
