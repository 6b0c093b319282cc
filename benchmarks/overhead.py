"""tpukit's training overhead: tpukit.train vs a plain Keras script, side by side in one process.

Both train the same model (tpukit.models.build gives a plain keras.Model) on
the same data with the same batch size, alternating A/B/A/B so machine noise
hits both alike. Both are timed by the same callback: the wall time between
consecutive step ends, epochs after the first (which holds tracing). Prints
examples/sec for each and their ratio; absolute numbers mean little on a shared
machine, the ratio is the result.

    python benchmarks/overhead.py [--dataset mnist5k] [--model cnn] [--epochs 3] [--rounds 2]
"""

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

import tpukit  # noqa: E402
from tpukit import data, models  # noqa: E402


class StepClock(keras.callbacks.Callback):
    """Examples/sec from step-end to step-end, skipping the first epoch."""

    def __init__(self, batch):
        super().__init__()
        self.batch, self.times, self.epoch, self.last = batch, [], 0, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.last = epoch, time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self.epoch > 0:
            self.times.append(now - self.last)
        self.last = now

    def examples_per_sec(self):
        return self.batch * len(self.times) / sum(self.times)


def plain_keras(args, dataset):
    """What a user would write without tpukit: numpy arrays into fit."""
    keras.utils.set_random_seed(args.seed)
    model = models.build(args.model, input_shape=dataset.info.image_shape, num_classes=dataset.info.num_classes)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    clock = StepClock(args.batch_size)
    model.fit(dataset.x_train, dataset.y_train, batch_size=args.batch_size, epochs=args.epochs, shuffle=True,
              validation_data=(dataset.x_test, dataset.y_test), callbacks=[clock], verbose=0)
    return clock.examples_per_sec()


def with_tpukit(args, logdir):
    config = tpukit.RunConfig(dataset=args.dataset, model=args.model, epochs=args.epochs, batch_size=args.batch_size,
                              precision="float32", seed=args.seed, logdir=logdir)
    clock = StepClock(args.batch_size)
    result = tpukit.train(config, tpukit.connect("cpu"), callbacks=[clock])
    return clock.examples_per_sec(), result.examples_per_sec


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist5k")
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    dataset = data.load(args.dataset)
    plain, ours, reported = [], [], []
    with tempfile.TemporaryDirectory() as logdir:
        for r in range(args.rounds):
            plain.append(plain_keras(args, dataset))
            clocked, own = with_tpukit(args, logdir)
            ours.append(clocked)
            reported.append(own)
            print(f"round {r + 1}: plain keras {plain[-1]:8.0f} ex/s   tpukit {ours[-1]:8.0f} ex/s "
                  f"(tpukit's own figure {own:8.0f})", flush=True)
    p, t = statistics.median(plain), statistics.median(ours)
    print(f"\n{args.model} on {args.dataset}, batch {args.batch_size}, {args.epochs} epochs, float32, CPU")
    print(f"plain Keras: {p:,.0f} examples/s   tpukit: {t:,.0f} examples/s   ratio tpukit/plain = {t / p:.3f}")


if __name__ == "__main__":
    main()
