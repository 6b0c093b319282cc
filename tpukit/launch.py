"""Run one `python -m tpukit train` as N local processes, for teaching and tests.

`python -m tpukit launch --workers N -- train ARGS` starts N workers on
127.0.0.1 with Keras' own variables for a multi-process job
(KERAS_DISTRIBUTION_JOB_ADDRESSES, _NUM_PROCESSES, _PROCESS_ID), which
`keras.distribution.initialize` reads (it calls `jax.distributed.initialize`;
on the CPU the collectives are gloo's). Each worker's `--replicas R` is its own
simulated devices, so the run trains on N x R replicas; the global batch
follows. The chief (worker 0) prints to this terminal and writes the run; the
others' output goes to log files, shown if one fails. If a worker fails or is
killed, the others are stopped and the launcher says which one and why.

The engine is JAX's: Keras 3's `fit` cannot run under TensorFlow's
MultiWorkerMirroredStrategy yet (keras-team/keras#20585), so `--backend jax`
is added when the command does not name one, and `--backend tensorflow` is
refused in one line.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence

from tpukit.config import ConfigError

MAX_WORKERS = 64
_POLL_S = 0.05
_STOP_WAIT_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command_for(argv: Sequence[str]) -> List[str]:
    """The worker command: `train` with `--backend jax` unless it names the backend (tensorflow is refused)."""
    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if argv[:1] != ["train"]:
        raise ConfigError(f"launch runs a train command across processes: python -m tpukit launch --workers N -- "
                          f"train ARGS. Received: {' '.join(argv) or 'nothing'}.")
    backend = None
    for i, arg in enumerate(argv):
        if arg == "--backend" and i + 1 < len(argv):
            backend = argv[i + 1]
        elif arg.startswith("--backend="):
            backend = arg.split("=", 1)[1]
    if backend is None or backend == "auto":
        argv += ["--backend", "jax"] if backend is None else []
        if backend == "auto":
            argv[argv.index("auto", argv.index("--backend"))] = "jax"
    elif backend != "jax":
        raise ConfigError(f"launch trains on JAX's multi-process engine; Keras 3's fit cannot run under TensorFlow's "
                          f"MultiWorkerMirroredStrategy yet (keras-team/keras#20585). Received: --backend {backend}.")
    return argv


def run(workers: int, argv: Sequence[str], *, port: Optional[int] = None, logs: Optional[str] = None,
        python: str = sys.executable) -> int:
    """Start `workers` processes of `python -m tpukit ARGV`; return the job's exit status (the chief's, or the
    first failure's).

    Args:
        logs: a folder for the workers' output (worker-1.log, ...), kept; by default a temporary one, removed
            when every worker succeeded.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ConfigError(f"--workers: expected a whole number from 1 to {MAX_WORKERS}. Received: {workers!r}.")
    command = [python, "-m", "tpukit", *command_for(argv)]
    port = port or free_port()
    folder = logs or tempfile.mkdtemp(prefix="tpukit-launch-")
    os.makedirs(folder, exist_ok=True)
    procs, files = [], []
    for index in range(workers):
        env = {**os.environ, "KERAS_BACKEND": "jax", "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{port}",
               "KERAS_DISTRIBUTION_NUM_PROCESSES": str(workers), "KERAS_DISTRIBUTION_PROCESS_ID": str(index)}
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
        dead = sorted((i for i, c in enumerate(codes) if c not in (None, 0)),
                      key=lambda i: (codes[i] not in (-signal.SIGKILL, -signal.SIGTERM), i))
        failed = dead[0] if dead else None
        if failed is not None:
            _stop(procs)
            code = codes[failed]
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            where = "" if failed == 0 else f"; its output: {os.path.join(folder, f'worker-{failed}.log')}"
            tail = "" if failed == 0 else _last_line(os.path.join(folder, f"worker-{failed}.log"))
            print(f"python -m tpukit launch: worker {failed} of {len(procs)} {how}, so the others were stopped"
                  f"{where}{(': ' + tail) if tail else ''}", file=sys.stderr)
            return code if code > 0 else 1
        if all(c == 0 for c in codes):
            return 0
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
