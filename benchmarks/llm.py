"""Fine-tuning a KerasHub preset with LoRA: tpukit against a careful plain keras-hub script, side by side, on JAX.

The baseline is what the KerasHub LoRA guides write: `CausalLM.from_preset(preset, dtype="bfloat16",
preprocessor=None)`, `backbone.enable_lora(rank)`, the text tokenized with the preset's SentencePiece model
(`sentencepiece`, no TensorFlow) and packed end to end into rows, `compile` with Adam and a next-token loss that
ignores padding, and `fit` on the token ids (shuffled every epoch) with KerasHub's own `fit`. tpukit trains the
same preset, rank, text (Python's help topics), rows, batch, epochs, optimizer and learning rate through
`tpukit.train` (no validation split, no samples: the baseline has neither).

Every run is a fresh process; rounds interleave (plain then tpukit, the other order in every second round). The
figures, each a ratio where above 1 means tpukit is faster (medians of the per-round ratios):

- steady tokens/s, tpukit/plain: every epoch after the first (which holds the compilation), from its start to
  the end of its last step, every step counted;
- whole-process wall time, plain/tpukit: imports, loading the preset, tokenizing, compiling, training, and for
  tpukit its records (run directory, backups of the adapters, TensorBoard scalars, FLOPs).

Each run also reports its train-step compiles (JAX's events), its peak memory (the device's
`peak_bytes_in_use` where JAX reports it, else the process's peak RSS), and MFU on the LoRA basis (tpukit's count:
forward 2N, activation gradients 2N, weight gradients for the adapters only, attention included) against the peak
tpukit measured or knows for the device.

`--architecture NAME` builds a published architecture from its configuration with random weights (no download): its
layers, widths and vocabulary are the real model's, its tokenizer one of 256 pieces trained here (SentencePiece for
Gemma, byte-level BPE for Llama 3 and Qwen) on the help topics (the text's ids are then all below 256; the logits
still cover the whole vocabulary). Speed, memory and compiles do not depend on the weights' values. `--steps N`
caps each epoch at N steps, to keep a CPU check short.

    python benchmarks/llm.py --dry-run                       # a tiny Gemma built here, on this CPU
    python benchmarks/llm.py --architecture gemma3_1b --steps 2         # offline, on a CPU (1 round, 2 epochs)
    python benchmarks/llm.py --architecture gemma3_1b --batch-size 8 --sequence-length 512 --rounds 3   # a GPU
    python benchmarks/llm.py --preset DIR_OR_NAME --batch-size 8 --sequence-length 512 [--rounds 3]
    python benchmarks/llm.py --dry-run --method dpo --epochs 40   # preference tuning (DPO), the same comparison

With `--method dpo` both sides tune the preset on preference pairs (the help topics: each topic's opening words
chosen, the same words reversed rejected, after a prompt naming the topic), each answer in a row of
`--sequence-length` tokens, chosen and rejected in one batch. The baseline is the careful user's DPO on Keras' JAX
trainer: the reference log-probabilities computed once with `predict` before training (the adapters start at zero,
so that is the base), then a `keras.Model` around the causal LM whose `train_step` takes the DPO loss's gradient with
`stateless_call` and `jax.value_and_grad`, as Keras' guide to customizing `fit` on JAX writes it. Tokens count both
rows of a pair, and MFU is on tpukit's basis for a pair: two sequences, forward and backward.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

KINDS = ("plain", "tpukit")
# --dry-run's model: a small Gemma (about 0.2 M parameters), big enough that a step is not all overhead on a CPU.
DRY_RUN = dict(
    vocabulary_size=256,
    num_layers=2,
    num_query_heads=4,
    num_key_value_heads=1,
    hidden_dim=64,
    intermediate_dim=128,
    head_dim=16,
)
# --architecture's models: (KerasHub's family, the backbone's configuration as its published preset has it; Gemma's
# intermediate_dim is twice the Hugging Face config's intermediate_size, as KerasHub's GemmaBackbone halves it)
ARCHITECTURES = {
    "gemma3_1b": (
        "Gemma3",
        dict(
            vocabulary_size=262144,
            image_size=896,
            num_layers=26,
            num_query_heads=4,
            num_key_value_heads=1,
            hidden_dim=1152,
            intermediate_dim=6912,
            head_dim=256,
            use_post_ffw_norm=True,
            use_post_attention_norm=True,
            use_sliding_window_attention=True,
            sliding_window_size=512,
            vision_encoder=None,
        ),
    ),
    "gemma2_2b": (
        "Gemma",
        dict(
            vocabulary_size=256000,
            num_layers=26,
            num_query_heads=8,
            num_key_value_heads=4,
            hidden_dim=2304,
            intermediate_dim=18432,
            head_dim=256,
            use_post_ffw_norm=True,
            use_post_attention_norm=True,
            attention_logit_soft_cap=50.0,
            final_logit_soft_cap=30.0,
            use_sliding_window_attention=True,
            sliding_window_size=4096,
        ),
    ),
    "llama3.2_1b": (
        "Llama3",
        dict(
            vocabulary_size=128256,
            num_layers=16,
            num_query_heads=32,
            num_key_value_heads=8,
            hidden_dim=2048,
            intermediate_dim=8192,
            rope_max_wavelength=500000,
            rope_position_scaling_factor=32.0,
            rope_frequency_adjustment_factor=32.0,
            rope_low_freq_factor=1.0,
            rope_high_freq_factor=4.0,
            rope_pretraining_sequence_length=8192,
            tie_word_embeddings=True,
        ),
    ),
    "qwen2.5_0.5b": (
        "Qwen",
        dict(
            vocabulary_size=151936,
            num_layers=24,
            num_query_heads=14,
            num_key_value_heads=2,
            hidden_dim=896,
            intermediate_dim=4864,
            rope_max_wavelength=1000000,
            tie_word_embeddings=True,
        ),
    ),
}
# the special tokens each byte-pair family's KerasHub tokenizer requires in its vocabulary
BYTE_PAIR = {
    "Llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "Qwen": ["<|endoftext|>"],
}


def _parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", help="a KerasHub preset (directory, kaggle://, hf:// or name)")
    parser.add_argument("--dry-run", action="store_true", help="build a tiny Gemma preset here and run on it")
    parser.add_argument(
        "--architecture", choices=sorted(ARCHITECTURES), help="build this published architecture, random weights"
    )
    parser.add_argument("--steps", type=int, help="at most this many steps an epoch (default: the whole text)")
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--epochs", type=int, help="epochs a run (default: 3 for --dry-run, else 2)")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default: 3 for --dry-run, else 1)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--method", choices=("sft", "dpo"), default="sft", help="what both sides train (default: sft)")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    # A real-size model on a CPU is minutes a process (loading and compiling 1 B parameters): its defaults are the
    # fewest runs that give both ratios (2 epochs: the second is the steady one), so a 2-core check ends in minutes.
    small = args.dry_run or args.child
    args.epochs = args.epochs or (3 if small else 2)
    args.rounds = args.rounds or (3 if small else 1)
    return args


# ---- one run (a child process) ---------------------------------------------------------------------------------


def _epoch_clock(tokens_per_step):
    import keras

    class EpochClock(keras.callbacks.Callback):
        """A stopwatch on the epochs after the first, from each one's start to its end (no validation here)."""

        def __init__(self):
            super().__init__()
            self.seconds, self.steps, self.start = 0.0, 0, None

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter() if epoch > 0 else None

        def on_epoch_end(self, epoch, logs=None):
            if self.start is None:
                return
            keras.ops.convert_to_numpy(self.model.trainable_weights[-1])  # the last step's update has landed
            self.seconds += time.perf_counter() - self.start
            self.steps += self.params["steps"]

        def tokens_per_sec(self):
            return tokens_per_step * self.steps / self.seconds

    return EpochClock()


def _peak_memory():
    """(bytes, what): the device's peak where JAX reports it (GPU, TPU), else this process's peak RSS."""
    import resource

    import jax

    stats = jax.devices()[0].memory_stats() or {}
    if stats.get("peak_bytes_in_use"):
        return stats["peak_bytes_in_use"], "device peak"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "process peak RSS"


def _timed_fit(model, x, y, args, tokens_per_step):
    """A baseline's `fit` (shuffled each epoch), timed as tpukit's is: steady tokens/s, its compiles, peak memory."""
    from tpukit.training import compiles  # the instrument only: JAX's compile events, counted as for tpukit

    clock = _epoch_clock(tokens_per_step)
    watch = compiles.Watch(True)
    watch.start()
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, shuffle=True, callbacks=[clock], verbose=0)
    watch.stop()
    return {
        "tokens_per_sec": clock.tokens_per_sec(),
        "compiles": watch.count,
        "compile_s": watch.seconds,
        "memory": _peak_memory(),
    }


def plain_keras_hub(args):
    """The careful user's script: from_preset in bfloat16, enable_lora, sentencepiece, packed rows, fit."""
    import keras
    import keras_hub
    import numpy as np
    import sentencepiece
    from pydoc_data.topics import topics

    keras.utils.set_random_seed(args.seed)
    model = keras_hub.models.CausalLM.from_preset(args.preset, dtype="bfloat16", preprocessor=None)
    model.backbone.enable_lora(args.rank)
    tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(args.preset)
    if getattr(tokenizer, "proto", None):  # SentencePiece (Gemma): the library itself, no TensorFlow
        encode = sentencepiece.SentencePieceProcessor(model_proto=tokenizer.proto).encode
    else:  # byte-pair (Llama 3, Qwen): KerasHub's tokenizer, through `tokenizers` on keras-hub 0.32
        encode = lambda document: np.asarray(tokenizer(document)).tolist()  # noqa: E731
    start = tokenizer.start_token_id if tokenizer.start_token_id is not None else tokenizer.end_token_id
    stream = np.concatenate([[start] + encode(topics[name]) + [tokenizer.end_token_id] for name in sorted(topics)])
    stream = stream.astype("int32")
    length = args.sequence_length
    rows = (len(stream) - 1) // length // args.batch_size * args.batch_size  # whole rows, whole batches: one compile
    if args.steps:
        rows = min(rows, args.steps * args.batch_size)
    x = stream[: rows * length].reshape(rows, length)
    y = stream[1 : rows * length + 1].reshape(rows, length)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=tokenizer.pad_token_id)
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate), loss=loss, weighted_metrics=[])
    return _timed_fit(model, {"token_ids": x, "padding_mask": np.ones_like(x)}, y, args, args.batch_size * length)


def preference_pairs(args):
    """The --method dpo data, the same pairs for both sides: for each help topic, its opening words preferred to the
    same words reversed; whole batches, and with --steps only the pairs those steps train (a DPO run scores the
    reference of every pair it is given, so both are given the same)."""
    from pydoc_data.topics import topics

    out = []
    for name in sorted(topics):
        words = topics[name].split()[:48]
        out.append({"prompt": f"Explain {name}.", "chosen": " ".join(words), "rejected": " ".join(words[::-1])})
    count = len(out) // args.batch_size * args.batch_size
    return out[: min(count, args.steps * args.batch_size) if args.steps else count]


def plain_dpo(args):
    """The careful user's DPO on JAX: the pairs tokenized by the preset's tokenizer, the reference scored once with
    predict, a `train_step` taking the DPO loss's gradient with `stateless_call`, fit."""
    import jax
    import keras
    import keras_hub
    import numpy as np

    keras.utils.set_random_seed(args.seed)
    lm = keras_hub.models.CausalLM.from_preset(args.preset, dtype="bfloat16", preprocessor=None)
    lm.backbone.enable_lora(args.rank)
    tokenizer = keras_hub.tokenizers.Tokenizer.from_preset(args.preset)
    length, beta = args.sequence_length, 0.1
    start = tokenizer.start_token_id if tokenizer.start_token_id is not None else tokenizer.end_token_id
    rows = preference_pairs(args)
    count = len(rows)
    ids = np.full((count, 2, length), tokenizer.pad_token_id, "int32")
    labels = np.full((count, 2, length), -1, "int32")
    for i, row in enumerate(rows):
        prompt = [start] + np.asarray(tokenizer(row["prompt"])).tolist()
        for side, answer in enumerate((row["chosen"], row["rejected"])):
            whole = (prompt + np.asarray(tokenizer(answer)).tolist() + [tokenizer.end_token_id])[: length + 1]
            ids[i, side, : len(whole) - 1] = whole[:-1]
            labels[i, side, len(prompt) - 1 : len(whole) - 1] = whole[len(prompt) :]
    x = {"token_ids": ids, "padding_mask": (ids != tokenizer.pad_token_id).astype("int32"), "labels": labels}

    class DPO(keras.Model):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def call(self, x, training=False):
            ops = keras.ops
            logits = self.lm(
                {
                    "token_ids": ops.reshape(x["token_ids"], (-1, length)),
                    "padding_mask": ops.reshape(x["padding_mask"], (-1, length)),
                },
                training=training,
            )
            logits = ops.cast(logits, "float32")
            target = ops.reshape(x["labels"], (-1, length))
            kept = ops.cast(target >= 0, "float32")
            picked = ops.take_along_axis(logits, ops.expand_dims(ops.maximum(target, 0), -1), axis=-1)[..., 0]
            token = picked - ops.logsumexp(logits, axis=-1)
            return ops.reshape(ops.sum(token * kept, axis=-1), (-1, 2))

        def train_step(self, state, data):
            trainable, non_trainable, optimizer_variables, metrics_variables = state
            x, reference = data

            def loss_of(variables):
                scores, kept = self.stateless_call(variables, non_trainable, x, training=True)
                margin = beta * ((scores[:, 0] - reference[:, 0]) - (scores[:, 1] - reference[:, 1]))
                return keras.ops.mean(keras.ops.softplus(-margin)), kept

            (loss, non_trainable), grads = jax.value_and_grad(loss_of, has_aux=True)(trainable)
            trainable, optimizer_variables = self.optimizer.stateless_apply(optimizer_variables, grads, trainable)
            return {"loss": loss}, (trainable, non_trainable, optimizer_variables, metrics_variables)

    model = DPO(lm)
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
    reference = model.predict(x, batch_size=args.batch_size, verbose=0)
    return _timed_fit(model, x, reference, args, args.batch_size * 2 * length)


def with_tpukit(args):
    import tpukit

    dpo = args.method == "dpo"
    with tempfile.TemporaryDirectory() as logdir:
        config = tpukit.RunConfig(
            model=args.preset,
            method=args.method,
            dataset="<preferences>" if dpo else "pydoc",
            lora_rank=args.rank,
            sequence_length=args.sequence_length,
            batch_size=args.batch_size,
            epochs=args.epochs,
            learning_rate=args.learning_rate,
            seed=args.seed,
            validation_split=None,
            sample_prompt="",
            backend="jax",
            logdir=logdir,
            steps_per_epoch=args.steps,
        )
        rows = 2 if dpo else 1  # a pair: two rows of tokens
        clock = _epoch_clock(args.batch_size * rows * args.sequence_length)
        data = preference_pairs(args) if dpo else None
        result = tpukit.train(config, data=data, callbacks=[clock], verbose=0)
        assert result.status == "completed", result.message
        peak = result.flops_per_example * result.examples_per_sec / result.mfu if result.mfu else None
    return {
        "tokens_per_sec": clock.tokens_per_sec(),
        "compiles": result.compiles,
        "memory": _peak_memory(),
        "estimate": next((n for n in result.notes if n.startswith("memory:")), None),
        "compile_note": next((n for n in result.notes if n.startswith("compile:")), None),
        "steps_per_execution": result.config["steps_per_execution"],
        "flops_per_token": result.flops_per_example / (rows * args.sequence_length)
        if result.flops_per_example
        else None,
        "peak": peak,
        "basis": result.mfu_basis,
    }


# ---- the comparison (the parent process) -----------------------------------------------------------------------


def _run(kind, args):
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        kind,
        "--preset",
        args.preset,
        "--rank",
        str(args.rank),
        "--batch-size",
        str(args.batch_size),
        "--sequence-length",
        str(args.sequence_length),
        "--epochs",
        str(args.epochs),
        "--learning-rate",
        str(args.learning_rate),
        "--seed",
        str(args.seed),
        "--method",
        args.method,
        *(["--steps", str(args.steps)] if args.steps else []),
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed: {done.stderr.strip()[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "wall": wall}


def _build_preset(path, family="Gemma", backbone=DRY_RUN, dtype=None):
    """A `family` model of `backbone`'s configuration, random weights (in `dtype`), with a tokenizer of 256 pieces
    trained on the help topics (SentencePiece for Gemma, byte-level BPE for Llama 3 and Qwen), saved as a preset."""
    tokenizer = {
        "Gemma3": "Gemma3Tokenizer(proto=proto, has_vision_tokens=False)",
        "Gemma": "GemmaTokenizer(proto=proto)",
    }.get(family, f"{family}Tokenizer(vocabulary=vocabulary, merges=merges)")
    code = f"""
import sys, keras, keras_hub
from tpukit.data import text
keras.utils.set_random_seed(0)
if {family in BYTE_PAIR!r}:
    vocabulary, merges = text.train_byte_pair(text.pydoc_topics().documents, 256, specials={BYTE_PAIR.get(family)!r})
else:
    proto = text.train_sentencepiece(text.pydoc_topics().documents, 256)
backbone = keras_hub.models.{family}Backbone(**{backbone!r}, dtype={dtype!r})
preprocessor = keras_hub.models.{family}CausalLMPreprocessor(keras_hub.models.{tokenizer})
keras_hub.models.{family}CausalLM(backbone=backbone, preprocessor=preprocessor).save_to_preset(sys.argv[1])
print(f"built {family}Backbone: {{backbone.count_params():,}} parameters", flush=True)
"""
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building the preset failed: {done.stderr.strip()[-2000:]}")
    print(done.stdout.strip().splitlines()[-1], flush=True)


def main(argv=None):
    args = _parse(argv)
    if args.child:
        plain = plain_dpo if args.method == "dpo" else plain_keras_hub
        print(json.dumps((plain if args.child == "plain" else with_tpukit)(args)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        if args.dry_run:
            args.preset = os.path.join(scratch, "tiny_gemma")
            _build_preset(args.preset)
        elif args.architecture:
            args.preset = os.path.join(scratch, args.architecture)
            family, backbone = ARCHITECTURES[args.architecture]
            _build_preset(args.preset, family, backbone, dtype="bfloat16")
        elif not args.preset:
            raise SystemExit("give --preset DIR_OR_NAME, --architecture NAME or --dry-run")
        _compare(args)


def _compare(args):
    start = time.perf_counter()

    def say(line):
        print(f"[{time.perf_counter() - start:6.0f} s] {line}", flush=True)

    # Untimed, one step an epoch: fills the caches both sides use (the CPU probe, the OS file cache, JAX's own).
    say(
        f"warm-up: tpukit, one step an epoch ({args.rounds} rounds of plain and tpukit, {args.epochs} epochs each, follow)"
    )
    _run("tpukit", argparse.Namespace(**{**vars(args), "steps": 1, "epochs": 2}))  # 2: one steady epoch to time
    runs = {kind: [] for kind in KINDS}
    for r in range(args.rounds):
        for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
            say(f"round {r + 1}/{args.rounds}: {kind}…")
            runs[kind].append(_run(kind, args))
            say(f"round {r + 1}/{args.rounds}: {kind} {runs[kind][-1]['wall']:.0f} s")
        p, t = runs["plain"][-1], runs["tpukit"][-1]
        print(
            f"round {r + 1}: plain {p['tokens_per_sec']:9,.0f} tokens/s {p['wall']:5.1f} s   tpukit "
            f"{t['tokens_per_sec']:9,.0f} tokens/s {t['wall']:5.1f} s   ratios "
            f"{t['tokens_per_sec'] / p['tokens_per_sec']:.3f}, {p['wall'] / t['wall']:.3f}   (tpukit: "
            f"{t['steps_per_execution']} steps a call)",
            flush=True,
        )
    plain, ours = runs["plain"], runs["tpukit"]
    steady = statistics.median(t["tokens_per_sec"] / p["tokens_per_sec"] for p, t in zip(plain, ours))
    wall = statistics.median(p["wall"] / t["wall"] for p, t in zip(plain, ours))
    last = ours[-1]
    print(
        f"\n{args.architecture or args.preset}: {args.method}, LoRA rank {args.rank}, batch {args.batch_size} x "
        f"{args.sequence_length} tokens, "
        f"{args.epochs} epochs, JAX; {args.rounds} interleaved rounds in fresh processes, medians; above 1 "
        "means tpukit is faster\n"
    )
    print("| | tokens/s (steady) | wall s | train-step compiles | peak memory | MFU (LoRA basis) |")
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        speed = statistics.median(r["tokens_per_sec"] for r in runs[kind])
        mfu = (
            f"{100 * last['flops_per_token'] * speed / last['peak']:.2f}% of {last['basis']}"
            if last.get("peak")
            else "not reported"
        )
        memory, what = runs[kind][-1]["memory"]
        print(
            f"| {kind} | {speed:,.0f} | {statistics.median(r['wall'] for r in runs[kind]):.1f} | "
            f"{runs[kind][-1]['compiles']} | {memory / 2**20:,.0f} MiB ({what}) | {mfu} |"
        )
    print(f"\nsteady ratio (tpukit/plain tokens/s): {steady:.2f}; wall ratio (plain/tpukit seconds): {wall:.2f}")
    print(f"plain's train-step compile: {runs['plain'][-1]['compile_s']:.1f} s; tpukit's {last['compile_note']}")
    print(f"tpukit's estimate before compiling: {last['estimate']}")


if __name__ == "__main__":
    main()
