"""Does a deterministic run give the same weights twice on this accelerator, and a nondeterministic one not?

For a lent GPU (issue 33): XLA's GPU kernels (atomics in reductions and convolution gradients) may differ in the
last bits from run to run; `connect(deterministic=True)` sets `--xla_gpu_deterministic_ops=true` before JAX
starts. Each run is a fresh process (the flag is read once), training the zoo cnn in mixed_bfloat16 on the
generated `shapes` set, and prints its weights fingerprint.

    KERAS_BACKEND=jax python benchmarks/gpu_determinism.py [--size 4096] [--epochs 2]
"""

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, sys, tempfile, tpukit
deterministic, size, epochs = sys.argv[1] == "1", int(sys.argv[2]), int(sys.argv[3])
runtime = tpukit.connect(backend="jax", deterministic=deterministic)
with tempfile.TemporaryDirectory() as logdir:
    config = tpukit.RunConfig(dataset="shapes", dataset_size=size, model="cnn", epochs=epochs, batch_size=128,
                              precision="mixed_bfloat16", deterministic=deterministic, logdir=logdir)
    result = tpukit.train(config, runtime)
print(json.dumps({"kind": runtime.kind, "device": runtime.devices[0], "fingerprint": result.fingerprint,
                  "status": result.status, "XLA_FLAGS": __import__("os").environ.get("XLA_FLAGS", "")}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    seen = {}
    for deterministic in ("1", "1", "0", "0"):
        start = time.time()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, deterministic, str(args.size), str(args.epochs)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            sys.exit(f"run failed: {done.stderr[-1500:]}")
        out = json.loads(lines[-1])
        seen.setdefault(deterministic, []).append(out["fingerprint"])
        print(
            f"deterministic={deterministic == '1'}  {out['kind']} {out['device']}  fingerprint {out['fingerprint']}"
            f"  {time.time() - start:.1f} s  XLA_FLAGS={out['XLA_FLAGS']!r}",
            flush=True,
        )
    same = {k: len(set(v)) == 1 for k, v in seen.items()}
    print(f"deterministic runs agree: {same['1']}; nondeterministic runs agree: {same['0']}")


if __name__ == "__main__":
    main()
