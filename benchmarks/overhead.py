"""tpukit's overhead against a careful plain-Keras script, side by side, on the TensorFlow and JAX backends.

The baseline is what the seeds' careful user writes: a tf.data pipeline (from_tensor_slices, cache, shuffle
every epoch, batch, prefetch) into `model.fit`, with the same model (`tpukit.models.zoo.build` gives a plain
keras.Model), the same split (10% of the training data for validation, as tpukit's default), batch, epochs,
optimizer and precision (`keras.mixed_precision.set_global_policy` for mixed_bfloat16), and the test split
evaluated once at the end, as tpukit does. On JAX the baseline is the same tf.data pipeline: Keras 3's fit
takes a tf.data.Dataset on every backend.

Every run is a fresh process: the backend is fixed when Keras is imported, and the whole process's wall time
is one of the two figures. Rounds interleave (each round: per case, plain then tpukit, in the other order in
every second round), so machine noise and any drift within a pair hit both alike. The figures, each a ratio
where above 1 means tpukit is faster (the median of the per-round ratios):

- steady-state examples/s, tpukit/plain, as a stopwatch sees it: every epoch after the first (which holds the first
  compilation) timed from its start to the end of its last training step, every step counted, its first
  included (a recompilation hides there); validation left out. The clock has epoch-level hooks only: a
  per-step hook would itself switch Keras 3 on JAX from asynchronous to synchronous callbacks in both runs
  and hide what tpukit's own callbacks cost. It waits for the weights at the end of the training steps, the
  one device sync it adds, in both runs alike;
- whole-process wall time, plain/tpukit: from starting the process to its exit (imports, data, model, training, the test
  evaluation, and for tpukit its records: run directory, epoch backups, TensorBoard scalars, FLOPs).

One untimed tpukit run per backend first fills the caches both use (the CPU probe, the OS file cache).

    python benchmarks/overhead.py [--backends tensorflow,jax] [--cases mlp:digits:32:4,cnn:mnist5k:64:2]
        [--precisions float32,mixed_bfloat16] [--rounds 3]

A case is model:dataset:batch:epochs.
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
    parser.add_argument(
        "--cases", default="mlp:digits:32:4,cnn:mnist5k:64:2", help="comma-separated model:dataset:batch:epochs"
    )
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    # One timed run in this process (the parent passes the case's fields one by one).
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--precision", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _cases(text):
    out = []
    for item in filter(None, (c.strip() for c in text.split(","))):
        model, dataset, batch, epochs = item.split(":")
        if int(epochs) < 2:
            raise SystemExit(f"--cases: {item}: the steady state needs 2 epochs or more")
        out.append((model, dataset, int(batch), int(epochs)))
    return out


# ---- one run (a child process; KERAS_BACKEND is set by the parent) -------------------------------------------


def _epoch_clock(batch):
    import keras

    class EpochClock(keras.callbacks.Callback):
        """A stopwatch on the epochs after the first: from each one's start to the end of its last training step
        (the first validation step, else the epoch's end), every step counted. Epoch-level hooks only."""

        def __init__(self):
            super().__init__()
            self.seconds, self.steps, self.epoch, self.start, self.open = 0.0, 0, 0, None, False

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch, self.start, self.open = epoch, time.perf_counter(), epoch > 0

        def on_test_begin(self, logs=None):
            self._close()

        def on_epoch_end(self, epoch, logs=None):
            self._close()

        def _close(self):
            if not self.open:
                return
            keras.ops.convert_to_numpy(self.model.trainable_weights[-1])  # the last step's update has landed
            self.seconds += time.perf_counter() - self.start
            self.steps += self.params["steps"]
            self.open = False

        def examples_per_sec(self):
            return batch * self.steps / self.seconds

    return EpochClock()


def plain_keras(args, feed: str = "tfdata"):
    """The careful user's script: tf.data (cache, shuffle every epoch, batch, prefetch) into fit.

    `feed="numpy"` is the same script where TensorFlow is not installed (a GPU or TPU machine with JAX only):
    fit takes the arrays, shuffled each epoch, whole batches only, as tf.data's drop_remainder."""
    import keras
    import numpy as np

    from tpukit.data import builtin as data
    from tpukit.models import zoo as models

    keras.mixed_precision.set_global_policy(args.precision)
    images = data.load(args.dataset)
    order = np.random.default_rng(args.seed).permutation(images.num_train)
    held = int(images.num_train * 0.1)
    val, train = order[:held], order[held:]
    x, y, size = images.x_train, images.y_train, args.batch_size
    if feed == "numpy":
        train = train[: len(train) // size * size]  # whole batches, as tf.data's drop_remainder
        fit_data = dict(x=x[train], y=y[train], batch_size=size, shuffle=True)
        validation, test = (x[val], y[val]), dict(x=images.x_test, y=images.y_test, batch_size=size)
    else:
        import tensorflow as tf

        def batches(x, y, training=False):
            examples = tf.data.Dataset.from_tensor_slices((x, y)).cache()
            if training:
                examples = examples.shuffle(len(x), seed=args.seed, reshuffle_each_iteration=True)
            return examples.batch(size, drop_remainder=training).prefetch(tf.data.AUTOTUNE)

        fit_data = dict(x=batches(x[train], y[train], training=True))
        validation, test = batches(x[val], y[val]), dict(x=batches(images.x_test, images.y_test))

    keras.utils.set_random_seed(args.seed)
    model = models.build(args.model, input_shape=images.info.image_shape, num_classes=images.info.num_classes)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    clock = _epoch_clock(size)
    model.fit(**fit_data, epochs=args.epochs, validation_data=validation, callbacks=[clock], verbose=0)
    model.evaluate(**test, verbose=0)
    return clock.examples_per_sec()


def with_tpukit(args):
    import tpukit

    with tempfile.TemporaryDirectory() as logdir:
        config = tpukit.RunConfig(
            dataset=args.dataset,
            model=args.model,
            epochs=args.epochs,
            batch_size=args.batch_size,
            precision=args.precision,
            seed=args.seed,
            logdir=logdir,
            backend=os.environ["KERAS_BACKEND"],
            accelerator="cpu",
        )
        clock = _epoch_clock(args.batch_size)
        result = tpukit.train(config, callbacks=[clock], verbose=0)
        assert result.status == "completed", result.message
    return clock.examples_per_sec()


# ---- the comparison (the parent process) ---------------------------------------------------------------------


def _run(kind, backend, case, precision, seed, epochs=None):
    """(examples/s, whole-process seconds) of one fresh process."""
    model, dataset, batch, case_epochs = case
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        kind,
        "--dataset",
        dataset,
        "--model",
        model,
        "--epochs",
        str(epochs or case_epochs),
        "--batch-size",
        str(batch),
        "--seed",
        str(seed),
        "--precision",
        precision,
    ]
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
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    rows = [
        (case, backend, precision) for case in _cases(args.cases) for backend in backends for precision in precisions
    ]
    for backend in backends:
        _run("tpukit", backend, ("mlp", "digits", 32, 2), "float32", args.seed)  # untimed: fills the caches
    figures = {(row, k): [] for row in rows for k in KINDS}
    for r in range(args.rounds):
        for row in rows:
            case, backend, precision = row
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                figures[row, kind].append(_run(kind, backend, case, precision, args.seed))
            (p, pw), (t, tw) = figures[row, "plain"][-1], figures[row, "tpukit"][-1]
            print(
                f"round {r + 1} {_name(row):40s}: plain {p:8,.0f} ex/s {pw:5.1f} s   tpukit {t:8,.0f} ex/s "
                f"{tw:5.1f} s   ratios {t / p:.3f}, {pw / tw:.3f}",
                flush=True,
            )  # as the table: above 1 is faster
    print(
        f"\nCPU, {args.rounds} interleaved rounds in fresh processes (plain first in odd rounds, tpukit first in "
        "even ones); medians of the rounds; above 1 means tpukit is "
        "faster (steady: tpukit/plain examples/s in the epochs after the first, every step counted; wall: "
        "plain/tpukit whole-process seconds)\n"
    )
    print(
        "| model | backend | precision | plain ex/s | tpukit ex/s | steady ratio | plain wall s | tpukit wall s "
        "| wall ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        (model, dataset, batch, epochs), backend, precision = row
        plain, ours = figures[row, "plain"], figures[row, "tpukit"]
        speed = statistics.median(t[0] / p[0] for p, t in zip(plain, ours))
        wall = statistics.median(p[1] / t[1] for p, t in zip(plain, ours))
        (p_speed, p_wall), (t_speed, t_wall) = (
            [statistics.median(f[i] for f in runs) for i in (0, 1)] for runs in (plain, ours)
        )
        print(
            f"| {model} on {dataset}, batch {batch}, {epochs} epochs | {backend} | {precision} | {p_speed:,.0f} "
            f"| {t_speed:,.0f} | {speed:.2f} | {p_wall:.1f} | {t_wall:.1f} | {wall:.2f} |"
        )


def _name(row):
    (model, dataset, batch, epochs), backend, precision = row
    return f"{model}/{dataset}/{batch}x{epochs} {backend} {precision}"


if __name__ == "__main__":
    main()
