"""The command line: `python -m tpukit train | export | launch | doctor | tensorboard`.

Every error is one line on stderr, never a traceback (`--debug` shows it):
status 2 for bad arguments, 1 for a problem of the environment or of a run's
state, 130 for a run stopped by Ctrl-C or SIGTERM. TensorFlow's C++ log lines
are hidden and warnings take one line each, unless `--verbose`. With `--json`,
the last line of stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import _thread
import os
import shlex
import sys
import threading
import time
import warnings
from typing import List, Optional

from tpukit.cli import nativelog, options

EXIT_BAD_ARGS = 2
EXIT_FAILED = 1
EXIT_STOPPED = 130


class _Parser(argparse.ArgumentParser):
    """argparse with a two-line error instead of the whole usage block."""

    def error(self, message):
        self.exit(EXIT_BAD_ARGS, f"{self.prog}: error: {message}\nSee: {self.prog} --help\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m tpukit", description="Connect, train and profile Keras models on TPU, GPU or CPU.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--verbose",
        action="store_true",
        help="show TensorFlow's log lines and warnings in full (unless TF_CPP_MIN_LOG_LEVEL is set)",
    )
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")

    t = sub.add_parser(
        "train",
        help="train a model and record the run",
        parents=[common],
        formatter_class=options.DefaultsHelp,
        allow_abbrev=False,
    )  # what was typed is known exactly
    options.add_train_options(t)  # one per RunConfig field
    t.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue a stopped or killed run (or, with --epochs N, extend a completed one)",
    )
    t.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    parser.train = t
    _export_and_launch(sub, common)
    _doctor_and_tensorboard(sub, common)
    return parser


def _export_and_launch(sub, common) -> None:
    """The `export` and `launch` commands' options."""
    x = sub.add_parser(
        "export",
        parents=[common],
        help="write a run's model as a float32 .keras file (and a SavedModel on TensorFlow), a KerasHub preset or a "
        "Hugging Face folder",
    )
    x.add_argument("run_dir", metavar="RUN_DIR")
    x.add_argument(
        "path",
        metavar="PATH",
        help="keras: a file ending in .keras, or a folder for model.keras and saved_model/; preset, hf: a new "
        "folder; preset: also kaggle://OWNER/MODEL/keras/VARIANT or hf://OWNER/NAME, uploaded with the credentials "
        "of the environment (KAGGLE_API_TOKEN, HF_TOKEN) or Colab's Secrets",
    )
    x.add_argument(
        "--format",
        default="keras",
        help="keras (default), preset (a KerasHub preset) or hf (Hugging Face safetensors); LoRA adapters merged",
    )
    x.add_argument(
        "--model",
        default=None,
        metavar="IMPORT_PATH",
        help="package.module:function that builds the model, for a run of a model handed to train()",
    )
    x.add_argument(
        "--backend",
        default="auto",
        help="auto (KERAS_BACKEND if set), tensorflow or jax (a SavedModel needs tensorflow)",
    )

    la = sub.add_parser(
        "launch",
        parents=[common],
        help="run a train command as N local processes (JAX's or TensorFlow's multi-process engine)",
    )
    la.add_argument("--workers", type=int, required=True, help="processes to start on 127.0.0.1")
    la.add_argument(
        "--port",
        type=int,
        default=None,
        help="the coordinator's port (JAX), or the chief's (TensorFlow); default: a free one",
    )
    la.add_argument("--logs", default=None, metavar="DIR", help="keep the other workers' output here")
    la.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- train ARGS",
        help="the command each worker runs (its own --replicas)",
    )


def _doctor_and_tensorboard(sub, common) -> None:
    """The `doctor` and `tensorboard` commands' options."""
    d = sub.add_parser("doctor", help="show the accelerator, versions and recommended settings", parents=[common])
    d.add_argument("--json", action="store_true")

    b = sub.add_parser(
        "tensorboard",
        help="start (or reuse) TensorBoard on 127.0.0.1, or --stop it",
        parents=[common],
        formatter_class=options.DefaultsHelp,
    )
    b.add_argument("--logdir", default="runs", help="the runs to show")
    b.add_argument("--port", type=int, default=None, help="default: a free one")
    b.add_argument(
        "--stop",
        action="store_true",
        help="stop the TensorBoard that serves --logdir (with --port: the one on that port)",
    )


def _keep_interrupts() -> None:
    """A Ctrl-C that lands inside a garbage-collector callback (JAX registers one, and TensorFlow imports JAX
    where it is installed) is printed as 'Exception ignored' and lost; deliver it again instead."""
    default = sys.unraisablehook

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # Not from here: a signal raised inside the hook would be lost the same way. A moment later, from
            # another thread, it reaches the main thread's ordinary code.
            threading.Timer(0.01, _thread.interrupt_main).start()
            return
        default(unraisable)

    sys.unraisablehook = hook


def main(argv: Optional[List[str]] = None) -> int:
    started = time.monotonic()
    _keep_interrupts()
    try:
        args = _parser().parse_args(argv)
    except KeyboardInterrupt:
        return _interrupted()
    args.started = started
    args.typed = _typed(argv if argv is not None else sys.argv[1:])
    # Before TensorFlow loads; the user's own setting wins. Without the CLI, tpukit hides only INFO lines (1).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if args.verbose else "2")
    if not args.verbose:
        warnings.showwarning = _one_line_warning
        nativelog.hide_native_log_lines()  # Abseil's lines before its set-up ignore TF_CPP_MIN_LOG_LEVEL
    from tpukit.training import signals

    signals.interrupts_stick()  # a Ctrl-C that a library swallows while loading still stops the run
    if os.getcwd() not in sys.path:  # import paths (--model pkg.mod:fn) resolve from here, as uvicorn's do
        sys.path.insert(0, os.getcwd())
    command = {"train": _train, "export": _export, "doctor": _doctor, "tensorboard": _tensorboard, "launch": _launch}[
        args.command
    ]
    try:
        return command(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        return _interrupted()
    except Exception as e:
        if args.debug:
            raise
        return _interrupted() if _interrupt_within(e) else _explain(e)


def _interrupt_within(error: BaseException) -> bool:
    """Whether Ctrl-C caused `error` (an interrupted import surfaces as numpy's or TensorFlow's ImportError)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def _interrupted() -> int:
    nativelog.say("python -m tpukit: interrupted")
    return EXIT_STOPPED


def _explain(error: Exception) -> int:
    """Print one line for `error` and return the exit status: 2 for bad input, 1 for the environment or state."""
    from tpukit.errors import TpukitError, one_line

    if isinstance(error, TpukitError) and error.bad_input:
        return _bad(str(error))
    if isinstance(error, TpukitError):
        text = f"{error.topic}: {error}" if error.topic else str(error)
    elif isinstance(error, OSError):
        text = f"{error.strerror or type(error).__name__}: {error.filename or error}"
    else:
        text = f"unexpected error: {one_line(error, 300)} (run again with --debug for the traceback)"
    nativelog.say(f"python -m tpukit: {text}")
    return EXIT_FAILED


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    text = " ".join(str(message).split())
    nativelog.say(f"{category.__name__}: {text}", file)


def _bad(message: str) -> int:
    nativelog.say(f"python -m tpukit: error: {message}")
    return EXIT_BAD_ARGS


# The train options that are not RunConfig fields, and those whose field has another name.
_NOT_FIELDS = {"resume", "json", "verbose", "debug", "command"}


def _typed(argv) -> frozenset:
    """The train options the command line names (`options.typed`)."""
    return options.typed(_parser().train, argv)


def _config_from(args):
    """The RunConfig the train options make: only the fields the user typed are set (`args.typed`; without it,
    those that differ from the defaults), the others are RunConfig's defaults."""
    import dataclasses

    from tpukit.config import RunConfig

    typed = getattr(args, "typed", None)
    if typed is None:
        typed = {f.name for f in dataclasses.fields(RunConfig) if getattr(args, f.name) != f.default}
    return options.config_from(args, typed)


def _resume_refusal(args) -> Optional[str]:
    """The line for settings typed beside --resume: a resume continues a run as it was set up (--epochs extends it)."""
    ignored = sorted(getattr(args, "typed", frozenset()) - _NOT_FIELDS - {"epochs", "model"})  # model: moved preset
    if not ignored:
        return None
    flags = ", ".join("--" + name.replace("_", "-") for name in ignored)
    return (
        f"--resume continues {args.resume} with the settings it was started with, so {flags} would be ignored; "
        "drop them (only --epochs N extends a completed run), or start a new run with them."
    )


def _train(args) -> int:
    """`train`: the options make a RunConfig and `train()` (or `resume()`) does the rest, saying where it runs and
    how the batches fall on stderr before the epoch lines."""
    from tpukit.training import api as training

    refusal = _resume_refusal(args) if args.resume else None
    if refusal:
        return _bad(refusal)
    say = functools.partial(print, file=sys.stderr)
    if args.resume:  # a path that is not a run: resume's one line (NotARunDir, exit 2)
        epochs = args.epochs if "epochs" in args.typed else None
        model = args.model if "model" in args.typed else None  # where a run's preset directory is now
        result = training.resume(args.resume, progress=sys.stderr, epochs=epochs, model=model, announce=say)
    else:
        result = training.train(_config_from(args), progress=sys.stderr, announce=say)
    logdir = result.config["logdir"]
    if args.json:
        _total_time(args.started, sys.stderr)  # stdout's last line stays the JSON object
        # In one write after what came before: a launched worker's log takes its stderr too, and a buffer flushed
        # in the middle of the object let the filtered stderr's last line land inside it (CI saw it).
        sys.stdout.flush()
        nativelog.say(json.dumps(_json_result(result)), sys.stdout)
    else:
        _print_summary(result, logdir)
        _total_time(args.started, sys.stdout)
    return {"completed": 0, "stopped": EXIT_STOPPED}.get(result.status, EXIT_FAILED)


def _json_result(result) -> dict:
    c, runtime = result.config, result.runtime
    return {
        "run_dir": result.run_dir,
        "status": result.status,
        "message": result.message,
        "backend": c["backend"],
        "accelerator": runtime.get("kind"),
        "devices": list(runtime.get("devices", ())),
        "replicas": c["replicas"],
        "precision": c["precision"],
        "precision_reason": result.precision_reason,
        "deterministic": c["deterministic"],
        "seed": c["seed"],
        "batch_size": c["batch_size"],
        "steps_per_execution": c.get("steps_per_execution"),
        "global_batch_size": result.global_batch_size,
        "steps_per_epoch": result.steps_per_epoch,
        "epochs": c["epochs"],
        "epochs_done": result.epochs_done,
        "dataset": c["dataset"],
        "model": c["model"],
        "history": result.history,
        "final_metrics": result.final_metrics,
        "validation_metrics": result.validation_metrics,
        "test_metrics": result.test_metrics,
        "examples_per_sec": result.examples_per_sec,
        "step_time_ms": result.step_time_ms,
        "time_to_first_step_s": result.time_to_first_step_s,
        "compiles": result.compiles,
        "compile_s": result.compile_s,
        "flops_per_example": result.flops_per_example,
        "mfu": result.mfu,
        "flops_source": result.flops_source,
        "fingerprint": result.fingerprint,
        "profile_files": list(result.profile_files),
    }


def _print_summary(result, logdir: str) -> None:
    print(result.summary())
    if result.profile_files:
        from tpukit.observe import profiling

        print()
        print(profiling.summarize(result.profile_files[0]).to_text())
    print()
    print(
        f"Open TensorBoard on these runs: {_command()} tensorboard --logdir {shlex.quote(logdir)}"
        f"  (or, in a notebook: %load_ext tensorboard; %tensorboard --logdir {shlex.quote(logdir)})"
    )


def _total_time(started: float, stream) -> None:
    """The command's wall time, from its start (imports, connecting and compiling included) to now."""
    from tpukit.observe.meter import duration

    seconds = time.monotonic() - started
    text = duration(seconds) if seconds >= 60 else f"{seconds:.1f}s"
    # One write, line end included: a worker's log gets stderr through the native-log filter and stdout directly,
    # and a line end written apart could land after the JSON object that stdout writes next.
    stream.write(
        f"Total time: {text} (wall clock from the command's start: connecting, compiling and evaluating included)\n"
    )
    stream.flush()


def _export(args) -> int:
    from tpukit import backend, registry
    from tpukit.hardware.connect import backend_for
    from tpukit.runs import exporting, saving, store

    if args.backend not in backend.BACKENDS:
        return _bad(f"--backend: expected one of {', '.join(backend.BACKENDS)}. Received: {args.backend!r}")
    if args.format not in exporting.FORMATS:
        return _bad(f"--format: expected one of {', '.join(exporting.FORMATS)}. Received: {args.format!r}")
    saving.weights_file(args.run_dir)  # no run or no weights: one line before Keras loads
    backend.select(backend_for(args.backend)[0])
    run = store.load(args.run_dir, model=registry.entry("model", args.model).target if args.model else None)
    print(run.export(args.path, args.format).note)
    return 0


def _doctor(args) -> int:
    import platform

    from tpukit.backend import BackendError
    from tpukit.hardware.connect import connect
    from tpukit.hardware.runtime import ConnectError
    from tpukit.hardware.tpu import installed_tensorflow

    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version(), "tensorflow": next(iter(installed_tensorflow().values()), None)}
    for name in ("keras", "jax", "tensorboard", "xprof", "ipywidgets", "matplotlib", "jupytext"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    try:
        runtime = connect()
        info = runtime.to_dict()
        text = runtime.describe()
    except (ConnectError, BackendError) as e:  # e.g. KERAS_BACKEND names a backend tpukit does not run
        info, text = {"error": str(e)}, f"cannot connect: {e}"
    if args.json:
        nativelog.say(json.dumps({"versions": versions, "runtime": info}), sys.stdout)
    else:
        print(text)
        print("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v))
    return 0


def _launch(args) -> int:
    from tpukit.cli import launch

    if args.port is not None and not 1 <= args.port <= 65535:
        return _bad(f"--port: expected a port from 1 to 65535, or none for a free one. Received: {args.port}")
    return launch.run(args.workers, args.argv, port=args.port, logs=args.logs)


def _tensorboard(args) -> int:
    from tpukit.observe import tensorboard

    if args.port is not None and not 1 <= args.port <= 65535:
        return _bad(f"--port: expected a port from 1 to 65535, or none for a free one. Received: {args.port}")
    if args.stop:
        return _stop_tensorboard(args)
    result = tensorboard.start(args.logdir, port=args.port)
    if isinstance(result, tensorboard.Failed):
        nativelog.say(f"python -m tpukit: TensorBoard failed: {result.message}")
        return EXIT_FAILED
    verb = "Reusing" if isinstance(result, tensorboard.Reused) else "Started"
    print(f"{verb} TensorBoard for {result.logdir} at {result.url} (pid {result.pid}, bound to 127.0.0.1)")
    print(
        f"It runs in the background until stopped: {_command()} tensorboard --stop --logdir {shlex.quote(args.logdir)}"
        f" (or kill {result.pid})"
    )
    return 0


def _stop_tensorboard(args) -> int:
    from tpukit.backend import installed
    from tpukit.observe import tensorboard

    if not installed("tensorboard"):
        print("TensorBoard is not installed here: none to stop")
        return 0
    servers = [
        s for s in tensorboard.running(None if args.port else args.logdir) if args.port is None or s.port == args.port
    ]
    stopped = [s for s in servers if tensorboard.stop(s)]
    where = f"port {args.port}" if args.port else os.path.abspath(args.logdir)
    if not stopped:
        print(f"No TensorBoard is running for {where}")
        return 0
    for s in stopped:
        print(f"Stopped TensorBoard for {s.logdir} at {s.url} (pid {s.pid})")
    return 0


def _command() -> str:
    """How to run tpukit again from here: `python -m tpukit` when `python` on PATH is this interpreter, else this
    interpreter's path (relative when it lies below the working directory, as make's .venv/bin/python does)."""
    import shutil

    exe = sys.executable
    found = shutil.which("python")
    # Not the resolved paths: a venv's python links to the system's, which cannot import what the venv holds.
    if found and os.path.abspath(found) == os.path.abspath(exe):
        return "python -m tpukit"
    relative = os.path.relpath(exe)
    return f"{relative if not relative.startswith('..') else exe} -m tpukit"
