"""The panel's cost to training: the same config trained with and without the panel's progress callback.

Without: `tpukit.train(config, runtime, verbose=0)`, the engine alone.
With: the same call plus the callback `panel.train` adds, reporting to a real
panel's widgets: the progress line and bar, and the loss/accuracy plot.

Two designs; a step clock (the last callback, so a step's panel work falls
inside it) times every step end to step end:

- `--mode epochs` (default): one long run in which the panel's callback is
  live on odd epochs only. Neighbouring epochs are compared, so a change in
  the machine's load over minutes cancels out: the sharpest A/B on a shared
  machine. (Each live epoch starts with a report, so this overstates a little.)
- `--mode runs`: whole runs, A and B back to back in alternating order.

Also prints the share of wall time the panel says it spent (it times its own
reports and redraws) and the callback's cost per step when no report is due.
The budget is 2% of step time.

    python benchmarks/panel_overhead.py [--mode epochs|runs] [--dataset mnist5k] [--model mlp] [--rounds 3]
"""

import argparse
import math
import os
import statistics
import tempfile
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
warnings.filterwarnings("ignore")

import keras  # noqa: E402

import tpukit  # noqa: E402
from tpukit.ui import context
from tpukit.data import builtin as data  # noqa: E402
from tpukit.ui import Panel, progress  # noqa: E402


class StepClock(keras.callbacks.Callback):
    """Wall and CPU seconds per step, step end to step end, in epochs after the first."""

    def __init__(self):
        super().__init__()
        self.wall, self.cpu, self.epoch, self.last = [], [], 0, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.last = epoch, None

    def on_train_batch_end(self, batch, logs=None):
        now = (time.perf_counter(), time.process_time())
        if self.epoch > 0 and self.last is not None:
            self.wall.append(now[0] - self.last[0])
            self.cpu.append(now[1] - self.last[1])
        self.last = now

    def means(self):
        return statistics.fmean(self.wall), statistics.fmean(self.cpu)


class LiveOnOddEpochs(keras.callbacks.Callback):
    """Passes every hook to `inner`, except that on even epochs its step and epoch-end hooks stay silent."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.live = inner, False

    def set_params(self, params):
        self.inner.set_params(params)

    def set_model(self, model):
        self.inner.set_model(model)

    def on_train_begin(self, logs=None):
        self.inner.on_train_begin(logs)

    def on_epoch_begin(self, epoch, logs=None):
        self.live = epoch % 2 == 1
        self.inner.on_epoch_begin(epoch, logs)

    def on_train_batch_end(self, batch, logs=None):
        if self.live:
            self.inner.on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.live:
            self.inner.on_epoch_end(epoch, logs)

    def on_train_end(self, logs=None):
        self.inner.on_train_end(logs)


class EpochClock(keras.callbacks.Callback):
    """Mean wall seconds per step of each epoch, step end to step end."""

    def __init__(self):
        super().__init__()
        self.epochs, self.last = {}, None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch, self.last = epoch, None
        self.epochs[epoch] = []

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self.last is not None:
            self.epochs[self.epoch].append(now - self.last)
        self.last = now


def epochs_mode(config, runtime, panel, rounds):
    """Runs of 2 x 10 epochs with the panel live on odd ones; returns per-pair ratios and the panel's shares."""
    ratios, shares = [], []
    config = config.replace(epochs=21)  # epoch 0 (tracing) is left out; then 10 (off, on) pairs
    for round_ in range(rounds):
        view = panel._progress_view
        steps = data.train_size(config.dataset) // config.batch_size
        view.start(config.run_name, False, steps * config.epochs, 1.1 * math.log(10))
        live = progress.make_callback(view, global_batch=config.batch_size)
        clock = EpochClock()
        tpukit.train(config, runtime, callbacks=[LiveOnOddEpochs(live), clock], verbose=0)
        mean = {e: statistics.fmean(t) for e, t in clock.epochs.items() if t}
        pairs = [mean[on] / mean[on + 1] for on in range(1, config.epochs - 1, 2)]  # (on, following off)
        pairs += [mean[on] / mean[on - 1] for on in range(3, config.epochs, 2)]  # (on, preceding off)
        ratios += pairs
        shares.append(live.progress.overhead * 2)  # it ran on half the epochs
        print(
            f"run {round_ + 1}: with/without per neighbouring epochs, median {statistics.median(pairs):.3f}; "
            f"panel says {100 * shares[-1]:.2f}% of its live epochs' wall time"
        )
    return ratios, shares


class _NoSink:
    def show_progress(self, p):
        pass

    def show_curves(self, points, epochs):
        pass


def hook_cost_us(steps: int = 200_000) -> float:
    """Microseconds one training step costs in the panel's callback when no report is due."""
    callback = progress.make_callback(_NoSink(), global_batch=32, text_every=1e9, plot_every=1e9)
    callback.set_params({"epochs": 1, "steps": steps})
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    logs = {"loss": 0.5, "accuracy": 0.9}
    start = time.perf_counter()
    for step in range(steps):
        callback.on_train_batch_end(step, logs)
    return 1e6 * (time.perf_counter() - start) / steps


def run(config, runtime, panel=None):
    """One training; returns (wall s/step, CPU s/step, the panel's overhead share or None)."""
    clock = StepClock()
    callbacks = [clock]
    if panel is not None:  # what Controller._train_work does before it calls the engine
        view = panel._progress_view
        steps = data.train_size(config.dataset) // config.batch_size
        view.start(config.run_name, False, steps * config.epochs, 1.1 * math.log(10))
        callback = progress.make_callback(view, global_batch=config.batch_size)
        callbacks = [callback, clock]
    tpukit.train(config, runtime, callbacks=callbacks, verbose=0)
    wall, cpu = clock.means()
    return wall, cpu, (callback.progress.overhead if panel is not None else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="mnist5k")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=("epochs", "runs"), default="epochs")
    args = parser.parse_args()

    config = tpukit.RunConfig(
        dataset=args.dataset,
        model=args.model,
        epochs=args.epochs,
        batch_size=args.batch_size,
        precision="float32",
        logdir=tempfile.mkdtemp(prefix="tpukit-panel-overhead-"),
    )
    runtime = tpukit.connect(config.accelerator, replicas=config.replicas)
    panel = Panel(config, context=context.NONE, runs=[], auto_tensorboard=False)
    tpukit.train(config.replace(epochs=1), runtime, verbose=0)  # warm-up: TensorFlow start-up, dataset cache

    def spread(values):
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        return f"{statistics.median(values):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}, n={len(values)})"

    if args.mode == "epochs":
        ratios, shares = epochs_mode(config, runtime, panel, args.rounds)
        step_ms = 1000 * run(config, runtime)[0]
        hook = hook_cost_us()
        print(
            f"\n{args.model} on {args.dataset}, batch {args.batch_size}, {runtime.kind.upper()} "
            f"({runtime.replicas} replica), engine step {step_ms:.2f} ms"
        )
        print(f"step time with panel / without, neighbouring epochs: {spread(ratios)}")
        print(f"panel's own measure: {100 * statistics.median(shares):.2f}% of wall time in reports and redraws")
        print(
            f"callback per step when no report is due: {hook:.2f} us = {100 * hook / (1000 * step_ms):.3f}% "
            f"of a {step_ms:.2f} ms step"
        )
        panel.close()
        return

    wall_ratios, cpu_ratios, shares, plain_ms = [], [], [], []
    for round_ in range(args.rounds):
        if round_ % 2 == 0:
            a, b = run(config, runtime), run(config, runtime, panel)
        else:
            b, a = run(config, runtime, panel), run(config, runtime)
        wall_ratios.append(b[0] / a[0])
        cpu_ratios.append(b[1] / a[1])
        shares.append(b[2])
        plain_ms.append(1000 * a[0])
        print(
            f"round {round_ + 1}: step {1000 * a[0]:.2f} -> {1000 * b[0]:.2f} ms wall, "
            f"{1000 * a[1]:.2f} -> {1000 * b[1]:.2f} ms CPU; panel says {100 * b[2]:.2f}% of wall time"
        )
    hook = hook_cost_us()
    step_ms = statistics.median(plain_ms)
    print(
        f"\n{args.model} on {args.dataset}, batch {args.batch_size}, {args.epochs} epochs, {args.rounds} rounds, "
        f"{runtime.kind.upper()} ({runtime.replicas} replica), engine step {step_ms:.2f} ms"
    )
    print(f"step time with panel / without, wall: {spread(wall_ratios)}")
    print(f"step time with panel / without, CPU:  {spread(cpu_ratios)}")
    print(f"panel's own measure: {100 * statistics.median(shares):.2f}% of wall time in reports and redraws")
    print(
        f"callback per step when no report is due: {hook:.2f} us = {100 * hook / (1000 * step_ms):.3f}% "
        f"of a {step_ms:.2f} ms step"
    )
    panel.close()


if __name__ == "__main__":
    main()
