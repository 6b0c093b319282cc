"""Why tpukit waits for each call over simulated JAX CPU devices (`hardware/jax_devices._sync_steps`).

Plain JAX, no Keras and no tpukit: a jitted training step whose gradient is all-reduced over N simulated CPU
devices (`--xla_force_host_platform_device_count`), dispatched in a loop, in a fresh process per try. "free"
dispatches the next step at once (what Keras' fit does); "wait" blocks on every shard of the result after each
step (what tpukit's callback does). On 2 cores "free" stopped in XLA's collectives within seconds (a fatal
rendezvous timeout: "Expected 8 threads to join the rendezvous, but only 6 of them arrived"), "wait" ran to the end.
Prints, per mode and try: finished (with its seconds) or stopped (with XLA's last line).

    python benchmarks/jax_cpu_collectives.py [--devices 8] [--steps 20000] [--tries 2] [--timeout 150]
"""

import argparse
import os
import subprocess
import sys
import time

STEP = r"""
import os, sys
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={sys.argv[1]}"
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(jax.devices(), ("d",))
x = jax.device_put(jnp.ones((8 * len(jax.devices()), 256)), NamedSharding(mesh, P("d")))
w = jax.device_put(jnp.ones((256, 256)), NamedSharding(mesh, P()))


@jax.jit
def step(w, x):
    g = jax.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)  # a replicated w: the gradient is all-reduced
    return w - 1e-3 * g


for _ in range(int(sys.argv[2])):
    w = step(w, x)
    if sys.argv[3] == "wait":
        w.block_until_ready()  # every shard
w.block_until_ready()
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--tries", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=150.0)
    args = parser.parse_args()
    for mode in ("free", "wait"):
        for attempt in range(1, args.tries + 1):
            began = time.perf_counter()
            try:
                done = subprocess.run(
                    [sys.executable, "-c", STEP, str(args.devices), str(args.steps), mode],
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"},
                )
            except subprocess.TimeoutExpired:
                print(f"{mode} #{attempt}: still running after {args.timeout:.0f} s (hung)")
                continue
            seconds = time.perf_counter() - began
            if done.returncode == 0:
                print(f"{mode} #{attempt}: finished {args.steps} steps in {seconds:.1f} s")
            else:
                last = [l for l in done.stderr.splitlines() if "rendezvous" in l.lower()] or done.stderr.splitlines()
                print(
                    f"{mode} #{attempt}: stopped after {seconds:.1f} s (exit {done.returncode}): "
                    f"{(last[-1] if last else '')[-200:]}"
                )


if __name__ == "__main__":
    main()
