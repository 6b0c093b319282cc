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

from tpukit.cli import nativelog

EXIT_BAD_ARGS = 2
EXIT_FAILED = 1
EXIT_STOPPED = 130


class _Parser(argparse.ArgumentParser):
    """argparse with a two-line error instead of the whole usage block."""

    def error(self, message):
        self.exit(EXIT_BAD_ARGS, f"{self.prog}: error: {message}\nSee: {self.prog} --help\n")


def _profile_window(text: str):
    if text.lower() in ("off", "none", ""):
        return None
    try:
        start, stop = (int(p) for p in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP steps, e.g. 2:4. Received: {text!r}") from None
    return (start, stop)


def _rank(text: str):
    """--lora-rank: a whole number (RunConfig checks its range), or none (every weight trains)."""
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or none. Received: {text!r}") from None


def _fraction(text: str):
    if text.lower() in ("none", "off", ""):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.1, or none. Received: {text!r}") from None


def _count_or_auto(text: str):
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps or auto. Received: {text!r}") from None


class _DefaultsHelp(argparse.HelpFormatter):
    """Each option's help ends with its default, as `--help` shows it (none for a flag, or where there is none)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (not action.option_strings or default in (None, False, argparse.SUPPRESS) or "%(default)" in text
                or "default" in text):
            return text
        shown = ",".join(default) if isinstance(default, (tuple, list)) else default
        return f"{text} (default: {shown})" if text else f"default: {shown}"


def _names(kind: str) -> str:
    """The registry's names of `kind` for --help; names only (no loader or factory is imported)."""
    from tpukit import registry

    names = registry.names(kind)
    if kind != "dataset":
        return ", ".join(names)
    from tpukit.data.builtin import ONLINE_DATASETS

    offline = [n for n in names if n not in ONLINE_DATASETS]
    online = [n for n in names if n in ONLINE_DATASETS]
    return ", ".join(offline) + (f" (bundled, offline); {', '.join(online)} (downloaded)" if online else "")


def _parser() -> argparse.ArgumentParser:
    import dataclasses

    from tpukit.config import ACCELERATORS, BACKENDS, OPTIMIZERS, RunConfig
    from tpukit.hardware.runtime import AUTO_STEPS_PER_EXECUTION, CPU_CALL_SECONDS
    from tpukit.precision import CHOICES as PRECISIONS

    default = {f.name: f.default for f in dataclasses.fields(RunConfig)}

    parser = _Parser(prog="python -m tpukit", description="Connect, train and profile Keras models on TPU, GPU or CPU.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's log lines and warnings in full (unless TF_CPP_MIN_LOG_LEVEL is set)")
    common.add_argument("--debug", action="store_true", help="show the traceback of an error")

    t = sub.add_parser("train", help="train a model and record the run", parents=[common],
                       formatter_class=_DefaultsHelp, allow_abbrev=False)  # what was typed is known exactly
    # Every default and choice is RunConfig's own (one place); --epochs stays None so that --resume can tell
    # "extend to N epochs" from "continue".
    t.add_argument("--backend", default=default["backend"],
                   help=f"one of {', '.join(BACKENDS)} (auto: KERAS_BACKEND if set, else JAX only for a TPU "
                        "TensorFlow cannot drive)")
    t.add_argument("--accelerator", default=default["accelerator"], help=f"one of {', '.join(ACCELERATORS)}")
    t.add_argument("--tpu", default=default["tpu"], metavar="ADDRESS", help="'local', grpc://host:port or a Cloud TPU name")
    t.add_argument("--replicas", type=int, default=default["replicas"],
                   help="simulated replicas on the CPU (or the first N GPUs); default: every device found "
                        "(one on the CPU)")
    t.add_argument("--dataset", default=default["dataset"],
                   help=f"a built-in or registered name: {_names('dataset')}; or tfds:NAME, or an import path "
                        "package.module:function")
    t.add_argument("--dataset-size", type=int, default=default["dataset_size"],
                   help="training examples (generated sets: any size); default: the dataset's own size")
    t.add_argument("--model", default=default["model"],
                   help=f"a zoo or registered name: {_names('model')}; an import path package.module:function "
                        "returning a keras.Model; or a KerasHub preset: a preset directory, kaggle://..., hf://... "
                        "or a name such as gemma3_instruct_1b (downloaded when the run starts)")
    t.add_argument("--loss", default=default["loss"], help="for models that come uncompiled")
    t.add_argument("--metrics", default=",".join(default["metrics"]), help="comma-separated metric names, e.g. mae,mse")
    t.add_argument("--validation-split", type=_fraction, default=default["validation_split"], metavar="FRACTION",
                   help="held out from the training data for validation (seeded); 'none' for no validation")
    t.add_argument("--epochs", type=int, default=None,
                   help=f"default {default['epochs']}; with --resume, extends a completed run to N epochs in a new run "
                   "directory")
    t.add_argument("--steps-per-epoch", type=int, default=default["steps_per_epoch"],
                   help="default: the training examples // the global batch (unlike Keras' fit, the last partial "
                        "batch is dropped, so every step has the same shape)")
    t.add_argument("--batch-size", type=int, default=default["batch_size"],
                   help="per replica, unlike Keras' batch_size: the global batch is this x replicas")
    t.add_argument("--precision", default=default["precision"], help=f"one of {', '.join(PRECISIONS)}")
    t.add_argument("--deterministic", action="store_true", help="seeds + op determinism: same config, same weights")
    t.add_argument("--seed", type=int, default=default["seed"], help="for the weights and the data's order")
    t.add_argument("--learning-rate", type=float, default=default["learning_rate"], help="the optimizer's")
    t.add_argument("--optimizer", default=default["optimizer"], help=f"one of {', '.join(OPTIMIZERS)}")
    t.add_argument("--steps-per-execution", type=_count_or_auto, default=default["steps_per_execution"],
                   metavar="N|auto",
                   help="training steps per call of the compiled train function; auto: the largest divisor of the "
                   f"steps per epoch up to {AUTO_STEPS_PER_EXECUTION}, on the CPU only while a call stays under "
                   f"{1000 * CPU_CALL_SECONDS:.0f} ms (estimated from the model's FLOPs), and 1 with --profile or "
                   "where the engine cannot run more (several GPUs under TensorFlow); the run's notes say what it "
                   "chose")
    t.add_argument("--jit-compile", choices=("auto", "on", "off"), default="auto",
                   help="XLA for the train step; auto: Keras' choice, or XLA on a CPU where it measured faster")
    t.add_argument("--early-stopping", type=int, default=default["early_stopping"], metavar="PATIENCE",
                   help="stop after this many epochs without a better validation loss (training loss without "
                        "validation), keeping the best weights; default: off")
    t.add_argument("--profile", type=_profile_window, default=default["profile"], metavar="START:STOP",
                   help="capture these training steps (inclusive) for TensorBoard's profiler; default: off")
    t.add_argument("--logdir", default=default["logdir"], help="each run gets a directory here")
    t.add_argument("--name", default=default["name"], help="the run directory's suffix; default: MODEL-DATASET")
    t.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue a stopped or killed run (or, with --epochs N, extend a completed one)")
    t.add_argument("--init-from", default=None, metavar="RUN_DIR",
                   help="start from that run's final weights (fine-tuning: e.g. more epochs at a lower learning rate)")
    t.add_argument("--lora-rank", type=_rank, default=default["lora_rank"], metavar="RANK|none",
                   help="a pretrained model's LoRA rank (its weights frozen in bfloat16); none: every weight trains")
    t.add_argument("--sequence-length", type=int, default=default["sequence_length"],
                   help="tokens per row that text is packed into, for a pretrained model")
    t.add_argument("--lora-alpha", type=float, default=default["lora_alpha"], metavar="ALPHA",
                   help="scale LoRA's update by ALPHA / RANK; default: Keras' (ALPHA = RANK)")
    t.add_argument("--lora-targets", default=None, metavar="NAMES",
                   help="comma-separated layer names that get LoRA adapters; default: KerasHub's (query,value)")
    t.add_argument("--sample-prompt", default=None, metavar="TEXT",
                   help="text a pretrained model continues before and after training; default: the first words of "
                        "the training text; '' for none")
    t.add_argument("--remat", choices=("auto", "on", "off"), default="auto",
                   help="rematerialize a pretrained model's transformer blocks (less memory, one more forward pass); "
                        "auto: on only where the step's estimated memory does not fit the device")
    t.add_argument("--gradient-accumulation", type=_count_or_auto, default=default["gradient_accumulation"],
                   metavar="N|auto", help="apply the optimizer's update every N steps, over their batches together; "
                                          "auto: 1")
    t.add_argument("--compilation-cache", default=default["compilation_cache"], metavar="DIR|auto|off",
                   help="where a JAX run keeps its compiled programs for the next run; auto: "
                        "$JAX_COMPILATION_CACHE_DIR, else LOGDIR/.jax-cache")
    t.add_argument("--model-parallel", type=int, default=default["model_parallel"], metavar="N",
                   help="split each copy of the model over N devices by its layout map (JAX); default: 1, data "
                        "parallelism")
    t.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    parser.train = t

    x = sub.add_parser("export", parents=[common],
                       help="write a run's model as a float32 .keras file (and a SavedModel on TensorFlow)")
    x.add_argument("run_dir", metavar="RUN_DIR")
    x.add_argument("path", metavar="PATH", help="a file ending in .keras, or a folder for model.keras and saved_model/")
    x.add_argument("--model", default=None, metavar="IMPORT_PATH",
                   help="package.module:function that builds the model, for a run of a model handed to train()")
    x.add_argument("--backend", default="auto",
                   help="auto (KERAS_BACKEND if set), tensorflow or jax (a SavedModel needs tensorflow)")

    la = sub.add_parser("launch", parents=[common],
                        help="run a train command as N local processes (JAX's or TensorFlow's multi-process engine)")
    la.add_argument("--workers", type=int, required=True, help="processes to start on 127.0.0.1")
    la.add_argument("--port", type=int, default=None,
                    help="the coordinator's port (JAX), or the chief's (TensorFlow); default: a free one")
    la.add_argument("--logs", default=None, metavar="DIR", help="keep the other workers' output here")
    la.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- train ARGS", help="the command each worker runs (its own --replicas)")

    d = sub.add_parser("doctor", help="show the accelerator, versions and recommended settings", parents=[common])
    d.add_argument("--json", action="store_true")

    b = sub.add_parser("tensorboard", help="start (or reuse) TensorBoard on 127.0.0.1, or --stop it",
                       parents=[common], formatter_class=_DefaultsHelp)
    b.add_argument("--logdir", default="runs", help="the runs to show")
    b.add_argument("--port", type=int, default=None, help="default: a free one")
    b.add_argument("--stop", action="store_true",
                   help="stop the TensorBoard that serves --logdir (with --port: the one on that port)")
    return parser


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
    if os.getcwd() not in sys.path:  # import paths (--model pkg.mod:fn) resolve from here, as uvicorn's do
        sys.path.insert(0, os.getcwd())
    command = {"train": _train, "export": _export, "doctor": _doctor, "tensorboard": _tensorboard,
               "launch": _launch}[args.command]
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
    """The train options the command line names (as dests: `lora_rank`), so a config records only what the user
    set (`RunConfig.is_set`) and `--resume` can refuse a setting it would not use."""
    options = {}
    for action in _parser().train._actions:  # argparse's list of the subcommand's options
        options.update({flag: action.dest for flag in action.option_strings})
    return frozenset(options[token.split("=")[0]] for token in argv if token.split("=")[0] in options)


def _config_from(args):
    """The RunConfig the train options make: only the fields the user typed are set (`args.typed`; without it,
    those that differ from the defaults), the others are RunConfig's defaults."""
    from tpukit.config import RunConfig

    jit = {"auto": "auto", "on": True, "off": False}[args.jit_compile]
    values = dict(
        backend=args.backend, accelerator=args.accelerator, tpu=args.tpu, replicas=args.replicas,
        dataset=args.dataset, dataset_size=args.dataset_size, model=args.model, loss=args.loss,
        metrics=tuple(m.strip() for m in args.metrics.split(",") if m.strip()),
        validation_split=args.validation_split, epochs=3 if args.epochs is None else args.epochs,
        steps_per_epoch=args.steps_per_epoch, batch_size=args.batch_size, precision=args.precision,
        deterministic=args.deterministic, seed=args.seed, learning_rate=args.learning_rate,
        optimizer=args.optimizer, steps_per_execution=args.steps_per_execution, jit_compile=jit,
        early_stopping=args.early_stopping, profile=args.profile, logdir=args.logdir, name=args.name,
        init_from=args.init_from, lora_rank=args.lora_rank, sequence_length=args.sequence_length,
        lora_alpha=args.lora_alpha, sample_prompt=args.sample_prompt,
        lora_targets=tuple(n.strip() for n in args.lora_targets.split(",") if n.strip()) if args.lora_targets else None,
        remat={"auto": "auto", "on": True, "off": False}[args.remat], gradient_accumulation=args.gradient_accumulation,
        compilation_cache=args.compilation_cache, model_parallel=args.model_parallel,
    )
    typed = getattr(args, "typed", None)
    if typed is None:
        typed = {k for k, v in values.items() if v != RunConfig.__dataclass_fields__[k].default}
    return RunConfig(**{k: v for k, v in values.items() if k in typed})


def _resume_refusal(args) -> Optional[str]:
    """The line for settings typed beside --resume: a resume continues a run as it was set up (--epochs extends it)."""
    ignored = sorted(getattr(args, "typed", frozenset()) - _NOT_FIELDS - {"epochs"})
    if not ignored:
        return None
    flags = ", ".join("--" + name.replace("_", "-") for name in ignored)
    return (f"--resume continues {args.resume} with the settings it was started with, so {flags} would be ignored; "
            "drop them (only --epochs N extends a completed run), or start a new run with them.")


def _train(args) -> int:
    """`train`: the options make a RunConfig and `train()` (or `resume()`) does the rest, saying where it runs and
    how the batches fall on stderr before the epoch lines."""
    from tpukit.runs import directory
    from tpukit.training import api as training

    refusal = _resume_refusal(args) if args.resume else None
    if refusal:
        return _bad(refusal)
    say = functools.partial(print, file=sys.stderr)
    if args.resume:
        try:
            logdir = directory.load_config(args.resume).logdir  # a run directory, or one line (exit 2)
        except FileNotFoundError as e:
            return _bad(str(e))
        result = training.resume(args.resume, progress=sys.stderr, epochs=args.epochs, announce=say)
    else:
        config = _config_from(args)
        logdir = config.logdir
        result = training.train(config, progress=sys.stderr, announce=say)
    if args.json:
        _total_time(args.started, sys.stderr)  # stdout's last line stays the JSON object
        print(json.dumps(_json_result(result)))
    else:
        _print_summary(result, logdir)
        _total_time(args.started, sys.stdout)
    return {"completed": 0, "stopped": EXIT_STOPPED}.get(result.status, EXIT_FAILED)


def _json_result(result) -> dict:
    c, runtime = result.config, result.runtime
    return {
        "run_dir": result.run_dir, "status": result.status, "message": result.message,
        "backend": c["backend"], "accelerator": runtime.get("kind"), "devices": list(runtime.get("devices", ())),
        "replicas": c["replicas"], "precision": c["precision"], "precision_reason": result.precision_reason,
        "deterministic": c["deterministic"], "seed": c["seed"], "batch_size": c["batch_size"],
        "steps_per_execution": c.get("steps_per_execution"),
        "global_batch_size": result.global_batch_size, "steps_per_epoch": result.steps_per_epoch,
        "epochs": c["epochs"], "epochs_done": result.epochs_done,
        "dataset": c["dataset"], "model": c["model"], "history": result.history, "final_metrics": result.final_metrics,
        "validation_metrics": result.validation_metrics, "test_metrics": result.test_metrics,
        "examples_per_sec": result.examples_per_sec, "step_time_ms": result.step_time_ms,
        "time_to_first_step_s": result.time_to_first_step_s, "compiles": result.compiles,
        "compile_s": result.compile_s, "flops_per_example": result.flops_per_example,
        "mfu": result.mfu, "flops_source": result.flops_source, "fingerprint": result.fingerprint, "profile_files": list(result.profile_files),
    }


def _print_summary(result, logdir: str) -> None:
    print(result.summary())
    if result.profile_files:
        from tpukit.observe import profiling

        print()
        print(profiling.summarize(result.profile_files[0]).to_text())
    print()
    print(f"Open TensorBoard on these runs: {_command()} tensorboard --logdir {shlex.quote(logdir)}"
          f"  (or, in a notebook: %load_ext tensorboard; %tensorboard --logdir {shlex.quote(logdir)})")


def _total_time(started: float, stream) -> None:
    """The command's wall time, from its start (imports, connecting and compiling included) to now."""
    from tpukit.observe.meter import duration

    seconds = time.monotonic() - started
    text = duration(seconds) if seconds >= 60 else f"{seconds:.1f}s"
    # One write, line end included: a worker's log gets stderr through the native-log filter and stdout directly,
    # and a line end written apart could land after the JSON object that stdout writes next.
    stream.write(f"Total time: {text} (wall clock from the command's start: connecting, compiling and evaluating "
                 "included)\n")
    stream.flush()


def _export(args) -> int:
    from tpukit import backend, registry
    from tpukit.hardware.connect import backend_for
    from tpukit.runs import saving, store

    if args.backend not in backend.BACKENDS:
        return _bad(f"--backend: expected one of {', '.join(backend.BACKENDS)}. Received: {args.backend!r}")
    saving.weights_file(args.run_dir)  # no run or no weights: one line before Keras loads
    backend.select(backend_for(args.backend)[0])
    run = store.load(args.run_dir, model=registry.entry("model", args.model).target if args.model else None)
    print(run.export(args.path).note)
    return 0


def _doctor(args) -> int:
    import platform

    from tpukit.backend import BackendError
    from tpukit.hardware.connect import connect
    from tpukit.hardware.runtime import ConnectError
    from tpukit.hardware.tpu import installed_tensorflow

    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version(),
                "tensorflow": next(iter(installed_tensorflow().values()), None)}
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
        print(json.dumps({"versions": versions, "runtime": info}))
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
    print(f"It runs in the background until stopped: {_command()} tensorboard --stop --logdir {shlex.quote(args.logdir)}"
          f" (or kill {result.pid})")
    return 0


def _stop_tensorboard(args) -> int:
    from tpukit.backend import installed
    from tpukit.observe import tensorboard

    if not installed("tensorboard"):
        print("TensorBoard is not installed here: none to stop")
        return 0
    servers = [s for s in tensorboard.running(None if args.port else args.logdir)
               if args.port is None or s.port == args.port]
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
