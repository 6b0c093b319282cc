"""tpukit's overhead against a careful plain-Keras script, side by side, on the TensorFlow and JAX backends.

The baseline is what the seeds' careful user writes: a tf.data pipeline (from_tensor_slices, cache, shuffle
every epoch, batch, prefetch) into `model.fit`, with the same model (`tpukit.models.build` gives a plain
keras.Model), the same split (10% of the training data for validation, as tpukit's default), batch, epochs,
optimizer and float32, and the test split evaluated once at the end, as tpukit does. On JAX the baseline is
the same tf.data pipeline: Keras 3's fit takes a tf.data.Dataset on every backend, and where TensorFlow is
installed it is also what tpukit feeds JAX with.

Every run is a fresh process: the backend is fixed when Keras is imported, and the whole process's wall time
is one of the two figures. Rounds interleave (each round: per backend, plain then tpukit), so machine noise
hits both alike. The figures, each as a ratio tpukit/plain (the median of the per-round ratios):

- steady-state examples/s: one callback in both, the wall time between consecutive step ends in the epochs
  after the first (which holds tracing and compilation), leaving out each epoch's first step (it waits for the
  input pipeline to refill after validation, and on JAX under keras.distribution it can hold a recompilation:
  Keras compiles the train step again when the state's shardings change after the first epoch); validation is
  left out;
- whole-process wall time: from starting the process to its exit (imports, data, model, training, the test
  evaluation, and for tpukit its records: run directory, epoch backups, TensorBoard scalars, FLOPs).

One untimed tpukit run per backend first fills the caches both use (the CPU probe, the OS file cache).

    python benchmarks/overhead.py [--backends tensorflow,jax] [--dataset digits] [--model mlp] [--epochs 6]
        [--batch-size 32] [--rounds 3]
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


def _parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="tensorflow,jax", help="comma-separated: tensorflow, jax")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)  # one timed run, in this process
    return parser.parse_args(argv)


# ---- one run (a child process; KERAS_BACKEND is set by the parent) -------------------------------------------

def _step_clock(batch):
    import keras

    class StepClock(keras.callbacks.Callback):
        """Examples/s from step end to step end, epochs after the first, each epoch's first step left out."""

        def __init__(self):
            super().__init__()
            self.times, self.epoch, self.last = [], 0, None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch, self.last = epoch, time.perf_counter()

        def on_train_batch_end(self, step, logs=None):
            now = time.perf_counter()
            if self.epoch > 0 and step > 0:
                self.times.append(now - self.last)
            self.last = now

        def examples_per_sec(self):
            return batch * len(self.times) / sum(self.times)

    return StepClock()


def plain_keras(args):
    """The careful user's script: tf.data (cache, shuffle every epoch, batch, prefetch) into fit."""
    import keras
    import numpy as np
    import tensorflow as tf

    from tpukit import data, models

    images = data.load(args.dataset)
    order = np.random.default_rng(args.seed).permutation(images.num_train)
    held = int(images.num_train * 0.1)
    val, train = order[:held], order[held:]

    def batches(x, y, training=False):
        examples = tf.data.Dataset.from_tensor_slices((x, y)).cache()
        if training:
            examples = examples.shuffle(len(x), seed=args.seed, reshuffle_each_iteration=True)
        return examples.batch(args.batch_size, drop_remainder=training).prefetch(tf.data.AUTOTUNE)

    keras.utils.set_random_seed(args.seed)
    model = models.build(args.model, input_shape=images.info.image_shape, num_classes=images.info.num_classes)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    clock = _step_clock(args.batch_size)
    model.fit(batches(images.x_train[train], images.y_train[train], training=True), epochs=args.epochs,
              validation_data=batches(images.x_train[val], images.y_train[val]), callbacks=[clock], verbose=0)
    model.evaluate(batches(images.x_test, images.y_test), verbose=0)
    return clock.examples_per_sec()


def with_tpukit(args):
    import tpukit

    with tempfile.TemporaryDirectory() as logdir:
        config = tpukit.RunConfig(dataset=args.dataset, model=args.model, epochs=args.epochs,
                                  batch_size=args.batch_size, precision="float32", seed=args.seed, logdir=logdir,
                                  backend=os.environ["KERAS_BACKEND"], accelerator="cpu")
        clock = _step_clock(args.batch_size)
        result = tpukit.train(config, callbacks=[clock])
        assert result.status == "completed", result.message
    return clock.examples_per_sec()


# ---- the comparison (the parent process) ---------------------------------------------------------------------

def _run(kind, backend, args, epochs=None):
    """(examples/s, whole-process seconds) of one fresh process."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [sys.executable, os.path.abspath(__file__), "--child", kind, "--dataset", args.dataset, "--model",
               args.model, "--epochs", str(epochs or args.epochs), "--batch-size", str(args.batch_size), "--seed",
               str(args.seed)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{kind} on {backend} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["examples_per_sec"], wall


def main(argv=None):
    args = _parse(argv)
    if args.child:
        speed = (plain_keras if args.child == "plain" else with_tpukit)(args)
        print(json.dumps({"examples_per_sec": speed}))
        return
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for backend in backends:
        _run("tpukit", backend, args, epochs=2)  # untimed: fills the caches both kinds use
    figures = {(b, k): [] for b in backends for k in KINDS}
    for r in range(args.rounds):
        for backend in backends:
            for kind in KINDS:
                figures[backend, kind].append(_run(kind, backend, args))
            (p, pw), (t, tw) = figures[backend, "plain"][-1], figures[backend, "tpukit"][-1]
            print(f"round {r + 1} {backend:10s}: plain {p:8,.0f} ex/s {pw:5.1f} s   tpukit {t:8,.0f} ex/s "
                  f"{tw:5.1f} s   ratios {t / p:.3f}, {tw / pw:.3f}", flush=True)
    print(f"\n{args.model} on {args.dataset}, batch {args.batch_size}, {args.epochs} epochs, float32, CPU, "
          f"{args.rounds} interleaved rounds; ratio tpukit/plain, median of the rounds:")
    for backend in backends:
        plain, ours = figures[backend, "plain"], figures[backend, "tpukit"]
        speed = statistics.median(t[0] / p[0] for p, t in zip(plain, ours))
        wall = statistics.median(t[1] / p[1] for p, t in zip(plain, ours))
        (p_speed, p_wall), (t_speed, t_wall) = ([statistics.median(f[i] for f in runs) for i in (0, 1)]
                                                for runs in (plain, ours))
        print(f"  {backend:10s}: steady-state examples/s {speed:.3f} (plain {p_speed:,.0f}, tpukit {t_speed:,.0f}); "
              f"whole-process wall time {wall:.3f} (plain {p_wall:.1f} s, tpukit {t_wall:.1f} s)")


if __name__ == "__main__":
    main()
