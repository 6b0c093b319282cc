"""Run one `python -m tpukit train` as N local processes, for teaching and tests.

`python -m tpukit launch --workers N -- train ARGS` starts N workers on
127.0.0.1, each with the environment of its engine:

- JAX (the default: `--backend jax` is added when the command names none, or
  `--backend tensorflow` where the user set KERAS_BACKEND=tensorflow):
  Keras' own variables for a multi-process job (KERAS_DISTRIBUTION_JOB_ADDRESSES,
  _NUM_PROCESSES, _PROCESS_ID), which `keras.distribution.initialize` reads (it
  calls `jax.distributed.initialize`; on the CPU the collectives are gloo's).
- TensorFlow (`--backend tensorflow`): TF_CONFIG, a cluster of N workers on free
  ports and each worker's index, for MultiWorkerMirroredStrategy (tpukit trains
  there with its own loop, `tpukit.hardware.tf_multiworker_loop`).

Each worker's `--replicas R` is its own simulated devices, so the run trains on
N x R replicas; the global batch follows. The chief (worker 0) prints to this
terminal and writes the run; the others' output goes to log files, shown if one
fails. If a worker fails or is killed, the others are stopped and the launcher
says which one and why.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import json
import time
from typing import List, Optional, Sequence

from tpukit.cli import nativelog
from tpukit.config import BACKENDS as CONFIG_BACKENDS, ConfigError

MAX_WORKERS = 64
_POLL_S = 0.05
# A worker gets this long to end after SIGTERM. TensorFlow's workers notice a lost peer when its coordination
# service heartbeat times out (10 s), then record their run as failed: give them that, and some.
_STOP_WAIT_S = 20.0
_STOPPED = 130  # a worker's exit status when its run stopped (python -m tpukit train)


BACKENDS = tuple(b for b in CONFIG_BACKENDS if b != "auto")  # each has its own multi-process engine


def command_for(argv: Sequence[str]) -> List[str]:
    """The worker command: `train` with `--backend jax` (or the user's KERAS_BACKEND) unless it names the backend."""
    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if argv[:1] != ["train"]:
        raise ConfigError(
            f"launch runs a train command across processes: python -m tpukit launch --workers N -- "
            f"train ARGS. Received: {' '.join(argv) or 'nothing'}."
        )
    backend = None
    for i, arg in enumerate(argv):
        if arg == "--backend" and i + 1 < len(argv):
            backend = argv[i + 1]
        elif arg.startswith("--backend="):
            backend = arg.split("=", 1)[1]
    if backend is None or backend == "auto":
        chosen = _default_backend()
        argv += ["--backend", chosen] if backend is None else []
        if backend == "auto":
            argv[argv.index("auto", argv.index("--backend"))] = chosen
    elif backend not in BACKENDS:
        raise ConfigError(
            f"launch trains on JAX's or TensorFlow's multi-process engine: --backend jax or "
            f"tensorflow. Received: --backend {backend}."
        )
    return argv


def _default_backend() -> str:
    """JAX, unless the user's KERAS_BACKEND names another engine launch runs (each worker's is set by launch)."""
    from tpukit import backend as backends

    env = backends.from_environment()
    if env is None:
        return "jax"
    if env not in BACKENDS:
        raise ConfigError(
            f"KERAS_BACKEND={env} in the environment is not an engine launch runs. Choices: "
            f"{', '.join(BACKENDS)}: set KERAS_BACKEND to one, unset it, or pass --backend."
        )
    return env


def backend_of(command: Sequence[str]) -> str:
    """The backend a worker command (from `command_for`) names: its last --backend."""
    named = [command[i + 1] for i, a in enumerate(command[:-1]) if a == "--backend"]
    named += [a.split("=", 1)[1] for a in command if a.startswith("--backend=")]
    return named[-1]


def worker_env(backend: str, index: int, workers: int, ports: Sequence[int]) -> dict:
    """The variables that make process `index` one of `workers` on 127.0.0.1, for the backend's engine."""
    from tpukit.backend import WROTE

    # Marked as tpukit's: the worker's backend comes from its --backend, not from a user's KERAS_BACKEND.
    env = {"KERAS_BACKEND": backend, WROTE: backend, "TPUKIT_LAUNCH_WORKER": str(index)}
    if backend == "jax":
        env.update(
            KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{ports[0]}",
            KERAS_DISTRIBUTION_NUM_PROCESSES=str(workers),
            KERAS_DISTRIBUTION_PROCESS_ID=str(index),
        )
    else:
        cluster = {"worker": [f"127.0.0.1:{p}" for p in ports[:workers]]}
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
    return env


def free_ports(n: int) -> List[int]:
    """`n` distinct ports free on 127.0.0.1 (held together while they are found, so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run(
    workers: int,
    argv: Sequence[str],
    *,
    port: Optional[int] = None,
    logs: Optional[str] = None,
    python: str = sys.executable,
) -> int:
    """Start `workers` processes of `python -m tpukit ARGV`; return the job's exit status (the chief's, or the
    first failure's).

    Args:
        logs: a folder for the workers' output (worker-1.log, ...), kept; by default a temporary one, removed
            when every worker succeeded.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"--workers: expected a whole number from 1 to {MAX_WORKERS}. Received: {workers!r}.")
    worker_argv = command_for(argv)
    backend = backend_of(worker_argv)
    command = [python, "-m", "tpukit", *worker_argv]
    ports = free_ports(workers if backend == "tensorflow" else 1)
    if port:  # the coordinator's (JAX) or the chief's (TensorFlow) port
        ports = [port] + [p for p in free_ports(workers + 1) if p != port][: len(ports) - 1]
    folder = logs or tempfile.mkdtemp(prefix="tpukit-launch-")
    os.makedirs(folder, exist_ok=True)
    procs, files = [], []
    for index in range(workers):
        env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG" and not k.startswith("KERAS_DISTRIBUTION_")}
        env.update(worker_env(backend, index, workers, ports))
        if index == 0:
            out = None  # the chief speaks to this terminal
        else:
            out = open(os.path.join(folder, f"worker-{index}.log"), "wb")
            files.append(out)
        procs.append(subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT if out else None))
    try:
        status = _wait(procs, folder)
    except KeyboardInterrupt:
        _stop(procs)
        status = 130
    finally:
        for f in files:
            f.close()
    if status == 0 and logs is None:
        shutil.rmtree(folder, ignore_errors=True)
    return status


def _wait(procs, folder: str) -> int:
    """Wait for every worker; at the first failure stop the others and say which failed."""
    while True:
        codes = [p.poll() for p in procs]
        # A worker that dies takes the others down with it (gloo aborts them), often within one poll: name the
        # one that was killed from outside (SIGKILL, SIGTERM) before those that fell after it.
        dead = sorted(
            (i for i, c in enumerate(codes) if c not in (None, 0)),
            key=lambda i: (codes[i] not in (-signal.SIGKILL, -signal.SIGTERM), i),
        )
        failed = dead[0] if dead else None
        if failed is not None:
            code = codes[failed]
            if code == _STOPPED:  # a run stopped on request: TensorFlow's workers agree to stop at the same step
                _settle(procs, _STOP_WAIT_S)
            _stop(procs)
            how = (
                f"was killed by signal {-code}"
                if code < 0
                else "stopped its run (status 130)"
                if code == _STOPPED
                else f"exited with status {code}"
            )
            where = "" if failed == 0 else f"; its output: {os.path.join(folder, f'worker-{failed}.log')}"
            tail = "" if failed == 0 else _last_line(os.path.join(folder, f"worker-{failed}.log"))
            nativelog.say(
                f"python -m tpukit launch: worker {failed} of {len(procs)} {how}, so the others were "
                f"stopped{where}{(': ' + tail) if tail else ''}"
            )
            return code if code > 0 else 1
        if all(c == 0 for c in codes):
            return 0
        time.sleep(_POLL_S)


def _settle(procs, seconds: float) -> None:
    """Give the workers up to `seconds` to end by themselves."""
    deadline = time.monotonic() + seconds
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(_POLL_S)


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)  # a worker in fit ends its run as stopped
    deadline = time.monotonic() + _STOP_WAIT_S
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = [line.strip() for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
