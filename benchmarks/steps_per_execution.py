"""steps_per_execution: one step per call of the train function vs several, side by side in one process.

By default on the JAX backend with 8 simulated CPU devices (set here, before
JAX starts) and a small model at a small batch, where the host's work per call
(dispatch, callbacks, reading the loss) is a large part of each step. Each
value trains the same run through `tpukit.train`, and the values take turns,
round after round, so machine noise hits them alike. "auto" is the value
`train()` picks on an accelerator (the largest divisor of the steps per epoch
up to 32); on the CPU it picks 1, and this benchmark is what that choice rests on.

Each value is timed by overhead.py's stopwatch: from an epoch's start to its
last step's end (validation left out), epochs after the first (which holds
compilation), with epoch-level hooks only (a per-step hook would make Keras 3
on JAX wait for every step).
Prints examples/sec per value and each value's ratio to steps_per_execution=1
(the median of the per-round ratios); absolute numbers mean little on a shared
machine, the ratios are the result.

    python benchmarks/steps_per_execution.py [--backend jax] [--replicas 8] [--model mlp] [--dataset digits]
        [--batch-size 4] [--epochs 6] [--rounds 3] [--values 1,2,4,8,auto]
"""

import argparse
import os
import statistics
import tempfile
import time


def _parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="jax", choices=("jax", "tensorflow"))
    parser.add_argument("--replicas", type=int, default=8, help="simulated CPU devices")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--batch-size", type=int, default=4, help="per replica")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--values", default="1,2,4,8,auto", help="comma-separated; 'auto' = the accelerator rule")
    parser.add_argument("--precision", default="float32")
    return parser.parse_args()


ARGS = _parse()
# Before Keras or JAX start: the backend and the number of simulated devices are fixed at import.
os.environ["KERAS_BACKEND"] = ARGS.backend
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if ARGS.backend == "jax":
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={ARGS.replicas}"
    ).strip()

import keras  # noqa: E402

import tpukit  # noqa: E402
from tpukit.data import pipeline
from tpukit.data import sources  # noqa: E402
from tpukit.hardware.runtime import AUTO_STEPS_PER_EXECUTION  # noqa: E402

from overhead import _epoch_clock  # noqa: E402  (the same stopwatch: epoch-level hooks, every step counted)


def accelerator_auto(steps: int) -> int:
    """What "auto" resolves to on a TPU or GPU for `steps` per epoch."""
    return max(d for d in range(1, min(steps, AUTO_STEPS_PER_EXECUTION) + 1) if steps % d == 0)


def one_run(value: int, runtime, logdir: str):
    config = tpukit.RunConfig(
        backend=ARGS.backend,
        dataset=ARGS.dataset,
        model=ARGS.model,
        epochs=ARGS.epochs,
        batch_size=ARGS.batch_size,
        replicas=ARGS.replicas,
        precision=ARGS.precision,
        steps_per_execution=value,
        logdir=logdir,
    )
    clock = _epoch_clock(config.global_batch_size)
    result = tpukit.train(config, runtime, callbacks=[clock], verbose=0)
    return clock.examples_per_sec(), result.examples_per_sec


def main():
    runtime = tpukit.connect("cpu", backend=ARGS.backend, replicas=ARGS.replicas)
    source = sources.prepare(ARGS.dataset, name=ARGS.dataset, seed=42)
    steps = pipeline.steps_per_epoch(len(source.train), ARGS.batch_size * runtime.replicas)
    auto = accelerator_auto(steps)
    values = []
    for v in dict.fromkeys(auto if v.strip() == "auto" else int(v) for v in ARGS.values.split(",")):
        if steps % v:
            print(f"skipping steps_per_execution={v}: it does not divide the {steps} steps per epoch")
        else:
            values.append(v)
    print(
        f"{runtime.describe().splitlines()[0]}\n{ARGS.model} on {ARGS.dataset}, batch {ARGS.batch_size} x "
        f"{runtime.replicas} = {ARGS.batch_size * runtime.replicas}, {steps} steps/epoch, {ARGS.precision}; "
        f"auto on an accelerator = {auto}",
        flush=True,
    )
    speeds = {v: [] for v in values}
    with tempfile.TemporaryDirectory() as logdir:
        for r in range(ARGS.rounds):
            order = values if r % 2 == 0 else values[::-1]  # alternate the order too: no value always goes first
            for v in order:
                clocked, own = one_run(v, runtime, logdir)
                speeds[v].append(clocked)
                print(
                    f"round {r + 1}: steps_per_execution={v:<3} {clocked:9,.0f} examples/s "
                    f"(tpukit's own figure {own:9,.0f})",
                    flush=True,
                )
    print()
    base = speeds[values[0]]
    for v in values:
        ratios = [s / b for s, b in zip(speeds[v], base)]
        label = f"{v} (auto)" if v == auto else str(v)
        print(
            f"steps_per_execution={label:<9} median {statistics.median(speeds[v]):9,.0f} examples/s   "
            f"ratio to {values[0]}: median {statistics.median(ratios):.2f} "
            f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
        )


if __name__ == "__main__":
    main()
