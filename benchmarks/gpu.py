"""tpukit against the careful plain-Keras script on a GPU: the zoo's mlp, cnn and resnet, three precisions, each backend.

One script for a lent GPU (issue 33). The baseline is benchmarks/overhead.py's careful user (its `plain_keras`:
tf.data with cache, shuffle, batch and prefetch into `model.fit`), imported, not copied. Where TensorFlow is not
installed (the lent machine's image has JAX and no TensorFlow), that user has no tf.data, and feeds `fit` NumPy
arrays instead (`fit(x, y, batch_size, shuffle=True)`, the same split, model, optimizer and precision): the table
says which baseline ran. Both train on the generated `shapes` set (32x32x3, any size, no download).

As in overhead.py: every run is a fresh process, and rounds interleave plain and tpukit (the other order in every
second round); steady = tpukit/plain examples/s in the epochs after the first (overhead.py's epoch clock), wall =
plain/tpukit whole-process seconds; above 1 means tpukit is faster. Also printed: train_step compilations of each
run (JAX; TensorFlow has no count), MFU of each from the steady examples/s, tpukit's training FLOPs per example and
the GPU's datasheet peak for the precision (`tpukit.hardware.specs.PEAK_FLOPS`, by the device's name), and
`tune_batch_size`'s pick per model at precision "auto" (an error, out of memory or other, is printed, never a
crash). Rounds stop when the next would not fit in `--budget-s`; what was skipped and why is printed at the end.

    python benchmarks/gpu.py [--backends jax,tensorflow] [--models mlp,cnn,resnet]
        [--precisions float32,mixed_bfloat16,mixed_float16] [--rounds 2] [--budget-s 300] [--out DIR]
    python benchmarks/gpu.py --dry-run     # on a CPU: small sizes, the same code path
"""

import argparse
import datetime
import functools
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead  # noqa: E402  (benchmarks/overhead.py: the careful user's script and the epoch clock)

KINDS = overhead.KINDS
MODELS = ("mlp", "cnn", "resnet")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
DATASET = "shapes"
# (examples, per-replica batch, epochs, seconds a child may take) on a GPU and in a dry run.
SIZES = {"gpu": (8192, 256, 4, 180), "dry": (384, 32, 2, 300)}
TUNE_BUDGET_S = {"gpu": 12.0, "dry": 5.0}  # tune_batch_size's own time budget, per model and backend
TUNE_LATE_S = 30
TUNE_SIZE_TIMES = 4  # tune on this many times the examples: room for batches up to 1/16 of an epoch


def _parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="jax,tensorflow")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default: 2 on a GPU, 1 in a dry run)")
    parser.add_argument(
        "--budget-s",
        type=float,
        help="seconds: no round starts that would end past this, and no "
        "tune_batch_size a minute past it (default: 300 on a GPU, none in a dry run)",
    )
    parser.add_argument("--dry-run", action="store_true", help="small sizes on any machine (a CPU): the same code path")
    parser.add_argument(
        "--plain-feed",
        choices=("auto", "tfdata", "numpy"),
        default="auto",
        help="the baseline's input: tf.data where TensorFlow is installed (auto), else NumPy arrays",
    )
    parser.add_argument("--no-tune", action="store_true")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="also write the tables here (default: $OUT)")
    parser.add_argument("--seed", type=int, default=42)
    # One run in this process (the parent passes the fields one by one).
    parser.add_argument("--child", choices=KINDS + ("tune",), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", default=DATASET, help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--precision", help=argparse.SUPPRESS)
    parser.add_argument("--accelerator", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--tune-budget-s", type=float, default=20.0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _installed(name):
    return importlib.util.find_spec(name) is not None


# ---- one run (a child process; KERAS_BACKEND is set by the parent) -------------------------------------------


def _compiles():
    """train_step compilations so far in this process (JAX), or None (TensorFlow counts none)."""
    if os.environ.get("KERAS_BACKEND") != "jax":
        return None
    from tpukit.training import compiles

    return compiles.totals()[0]


def _sized(size):
    """Have `tpukit.data.builtin.load` (which overhead.plain_keras calls) make `size` examples of the set."""
    from tpukit.data import builtin

    builtin.load = functools.partial(builtin.load, size=size)


def plain(args):
    """overhead.py's careful user where TensorFlow is there (tf.data), else the same script fed NumPy arrays."""
    if os.environ.get("KERAS_BACKEND") == "jax":
        from tpukit.training import compiles

        compiles.listen()
    _sized(args.size)
    feed = args.plain_feed if args.plain_feed != "auto" else ("tfdata" if _installed("tensorflow") else "numpy")
    speed = overhead.plain_keras(args, feed)
    return {"examples_per_sec": speed, "compiles": _compiles(), "feed": feed}


def _config(args, logdir, **changes):
    import tpukit

    fields = dict(
        dataset=args.dataset,
        dataset_size=args.size,
        model=args.model,
        epochs=args.epochs,
        batch_size=args.batch_size,
        precision=args.precision,
        seed=args.seed,
        logdir=logdir,
        backend=os.environ["KERAS_BACKEND"],
        accelerator=args.accelerator,
    )
    return tpukit.RunConfig(**{**fields, **changes})


def _device(runtime, policy):
    facts = runtime.device_facts[0] if runtime.device_facts else {}
    return {
        "device": facts.get("name") or runtime.kind,
        "kind": runtime.kind,
        "compute_capability": facts.get("compute_capability"),
        "peak_flops": runtime.peak_flops(policy),
        "runtime_precision": runtime.precision,
    }


def with_tpukit(args):
    import tpukit
    from tpukit.hardware.connect import connect_for

    with tempfile.TemporaryDirectory() as logdir:
        config = _config(args, logdir)
        clock = overhead._epoch_clock(args.batch_size)
        result = tpukit.train(config, callbacks=[clock], verbose=0)
        assert result.status == "completed", result.message
        runtime = connect_for(config)
    notes = [n for n in result.notes if n.startswith(("jit_compile", "steps_per_execution"))]
    return {
        "examples_per_sec": clock.examples_per_sec(),
        "compiles": result.compiles,
        "flops_per_example": result.flops_per_example,
        "notes": notes,
        **_device(runtime, args.precision),
    }


def tune(args):
    import tpukit
    from tpukit.hardware.connect import connect_for

    with tempfile.TemporaryDirectory() as logdir:
        config = _config(args, logdir, precision="auto")
        runtime = connect_for(config)
        policy, _ = runtime.resolve_precision("auto")
        try:
            tuning = tpukit.tune_batch_size(config, runtime, start=32, time_budget_s=args.tune_budget_s)
        except Exception as e:  # anything, out of memory included: a line in the table, never a crash
            return {
                "error": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}",
                "precision": policy,
                **_device(runtime, policy),
            }
    trials = [
        f"{t.batch_size}:{t.examples_per_sec:,.0f}" if t.examples_per_sec else f"{t.batch_size}:{t.outcome}"
        for t in tuning.trials
    ]
    return {
        "recommended": tuning.recommended,
        "trials": trials,
        "reason": tuning.reason,
        "precision": policy,
        **_device(runtime, policy),
    }


# ---- the comparison (the parent process) ---------------------------------------------------------------------


def _run(kind, backend, model, precision, args, sizes):
    """(the child's JSON, whole-process seconds), or (None, why it failed)."""
    size, batch, epochs, limit = sizes
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        kind,
        "--model",
        model,
        "--size",
        str(size),
        "--batch-size",
        str(batch),
        "--epochs",
        str(epochs),
        "--seed",
        str(args.seed),
        "--precision",
        precision,
        "--accelerator",
        args.accelerator,
        "--plain-feed",
        args.plain_feed,
        "--tune-budget-s",
        str(args.tune_budget),
    ]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, f"over its {limit} s limit"
    wall = time.perf_counter() - start
    last = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    if done.returncode != 0 or not last or not last[0].startswith("{"):
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        return None, f"exit {done.returncode}: {(lines[-1] if lines else 'no output')[:200]}"
    return json.loads(last[0]), wall


def _gpu_names():
    """The GPUs the NVIDIA driver lists (no framework imported), or []."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


class Report:
    """What the parent prints, and writes to --out as it goes (so a run stopped at its limit leaves its rows)."""

    def __init__(self, out):
        self.out, self.lines = out, []

    def say(self, text=""):
        print(text, flush=True)
        self.lines.append(text)

    def save(self, tables):
        if not self.out:
            return
        os.makedirs(self.out, exist_ok=True)
        with open(os.path.join(self.out, "gpu-benchmark.log"), "w") as f:
            f.write("\n".join(self.lines) + "\n")
        with open(os.path.join(self.out, "gpu-benchmark.md"), "w") as f:
            f.write(tables)


def main(argv=None):
    args = _parse(argv)
    args.tune_budget = args.tune_budget_s
    if args.child:
        out = {"plain": plain, "tpukit": with_tpukit, "tune": tune}[args.child](args)
        print(json.dumps(out))
        return 0
    report, skipped = Report(args.out), []
    began = time.perf_counter()
    gpus = _gpu_names()
    if not gpus and not args.dry_run:
        report.say(
            "No GPU: nvidia-smi lists none here. Run this on a GPU, or with --dry-run (small sizes, any device)."
        )
        return 1
    where = "dry" if args.dry_run else "gpu"
    if args.rounds is None:
        args.rounds = 1 if args.dry_run else 2
    if args.budget_s is None:
        args.budget_s = float("inf") if args.dry_run else 300.0  # a dry run checks the code path: all of it
    sizes = SIZES[where]
    args.tune_budget = TUNE_BUDGET_S[where]
    args.accelerator = "gpu" if gpus else "cpu"
    if args.dry_run and gpus:
        skipped.append(("--dry-run", f"small sizes on {gpus[0]}: the figures are no measurement"))
    backends = []
    for b in filter(None, (b.strip() for b in args.backends.split(","))):
        if _installed(b) and _installed("keras"):
            backends.append(b)
        else:
            skipped.append((f"backend {b}", f"{b if not _installed(b) else 'keras'} is not installed here"))
    if "jax" in backends and gpus:
        ok, why = _jax_sees_gpu()
        if not ok:
            backends.remove("jax")
            skipped.append(("backend jax", why))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    feed = args.plain_feed if args.plain_feed != "auto" else ("tfdata" if _installed("tensorflow") else "numpy")
    if feed == "numpy":
        skipped.append(
            (
                "tf.data baseline",
                "TensorFlow is not installed here: the plain script feeds fit NumPy "
                "arrays (fit(x, y, batch_size, shuffle=True))",
            )
        )
    size, batch, epochs, limit = sizes
    report.say(
        f"benchmarks/gpu.py on {gpus[0] if gpus else 'the CPU (no GPU)'}{' (dry run)' if args.dry_run else ''}, "
        f"{datetime.date.today()}: {DATASET} ({size} examples), batch {batch}, {epochs} epochs; backends "
        f"{', '.join(backends) or 'none'}; plain baseline fed by {feed}"
    )
    rows = [(model, backend, precision) for model in models for backend in backends for precision in precisions]
    failed, figures, info = {}, {(row, k): [] for row in rows for k in KINDS}, {}
    for backend in backends:  # untimed: fills the caches both kinds use, and checks the setup once
        data, wall = _run("tpukit", backend, "mlp", "float32", args, sizes)
        if data is None:
            skipped.append((f"backend {backend}", f"tpukit's warm-up run failed: {wall}"))
            rows = [r for r in rows if r[1] != backend]
        else:
            report.say(
                f"warm-up {backend}: {data['device']} ({data['kind']}), {wall:.1f} s; runtime precision auto "
                f"-> {data['runtime_precision']}"
            )
            info[backend] = data
    round_s, tunes = [], {}

    def save(rounds=None):  # the tables so far, to --out: a run stopped at its limit leaves what it measured
        report.save(
            _tables(
                rows, figures, failed, tunes, skipped, args, sizes, feed, gpus, rounds or max(1, len(round_s)), info
            )
        )

    for r in range(args.rounds):
        if r == 1 and not args.no_tune:  # after the first round, before the rest: the pick is worth more than a round
            _tune_all(models, backends, args, sizes, began, skipped, tunes, report, save)
        if round_s and time.perf_counter() - began + max(round_s) > args.budget_s:
            skipped.append(
                (
                    f"rounds {r + 1}-{args.rounds}",
                    f"the next round (~{max(round_s):.0f} s) would end past --budget-s {args.budget_s:.0f}",
                )
            )
            break
        started = time.perf_counter()
        for row in rows:
            if row in failed:
                continue
            model, backend, precision = row
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                data, wall = _run(kind, backend, model, precision, args, sizes)
                if data is None:
                    failed[row] = f"{kind}: {wall}"
                    break
                figures[row, kind].append((data, wall))
            if row in failed:
                report.say(f"round {r + 1} {_name(row):32s}: failed ({failed[row]})")
                continue
            (p, pw), (t, tw) = figures[row, "plain"][-1], figures[row, "tpukit"][-1]
            report.say(
                f"round {r + 1} {_name(row):32s}: plain {p['examples_per_sec']:9,.0f} ex/s {pw:5.1f} s  "
                f"tpukit {t['examples_per_sec']:9,.0f} ex/s {tw:5.1f} s  compiles {p['compiles']}/"
                f"{t['compiles']}  ratios {t['examples_per_sec'] / p['examples_per_sec']:.3f}, {pw / tw:.3f}"
            )
            save(r + 1)
        round_s.append(time.perf_counter() - started)
    if not tunes and not args.no_tune:
        _tune_all(models, backends, args, sizes, began, skipped, tunes, report, save)
    for row, why in failed.items():
        skipped.append((_name(row), why))
    done_rounds = max((len(figures[row, "tpukit"]) for row in rows), default=0)
    tables = _tables(rows, figures, failed, tunes, skipped, args, sizes, feed, gpus, done_rounds, info)
    report.say("")
    report.say(tables)
    report.say(f"({time.perf_counter() - began:.0f} s in all)")
    report.save(tables)
    return 0


def _tune_all(models, backends, args, sizes, began, skipped, tunes, report, save):
    """tune_batch_size per model and backend at precision "auto", on TUNE_SIZE_TIMES as many examples.

    One takes about 40 s on an H100 (each size tried compiles a fresh model), so none starts later than
    TUNE_LATE_S after --budget-s."""
    for model in models:
        for backend in backends:
            if time.perf_counter() - began > args.budget_s + TUNE_LATE_S:
                skipped.append(
                    (f"tune_batch_size {model} on {backend}", f"{TUNE_LATE_S} s past --budget-s {args.budget_s:.0f}")
                )
                continue
            data, wall = _run("tune", backend, model, "auto", args, (TUNE_SIZE_TIMES * sizes[0], *sizes[1:]))
            tunes[model, backend] = data if data is not None else {"error": wall}
            report.say(
                f"tune {model} on {backend}: "
                f"{tunes[model, backend].get('recommended', tunes[model, backend].get('error'))}"
            )
            save()


def _jax_sees_gpu():
    code = "import jax; d = jax.devices('gpu'); print(d[0].device_kind)"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return False, "JAX did not list its GPUs within 120 s"
    if done.returncode:
        lines = done.stderr.strip().splitlines()
        return False, f"JAX sees no GPU here: {(lines[-1] if lines else '')[:160]}"
    return True, ""


def _name(row):
    model, backend, precision = row
    return f"{model} {backend} {precision}"


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _mfu(speed, flops, peak):
    if not speed or not flops or not peak:
        return "-"
    return f"{100 * speed * flops / peak:.2f}%"


def _tables(rows, figures, failed, tunes, skipped, args, sizes, feed, gpus, rounds, info):
    size, batch, epochs, _ = sizes
    command = "python benchmarks/gpu.py " + " ".join(a for a in sys.argv[1:])
    out = [
        f"Device: {gpus[0] if gpus else 'CPU (no GPU)'}; {datetime.date.today()}; `{command.strip()}`",
        f"Data: {DATASET}, {size} examples (10% held out for validation), batch {batch}, {epochs} epochs; "
        f"{rounds} interleaved round(s) in fresh processes, medians; plain baseline fed by {feed}. Above 1: tpukit "
        "faster (steady: tpukit/plain examples/s after the first epoch; wall: plain/tpukit whole-process "
        "seconds). Compiles: train_step compilations, plain/tpukit (JAX only). MFU: steady examples/s x tpukit's "
        "training FLOPs per example / the datasheet peak for the precision (tpukit.hardware.specs.PEAK_FLOPS).",
        "",
        "| model | backend | precision | plain ex/s | tpukit ex/s | steady ratio | plain wall s | tpukit wall s "
        "| wall ratio | compiles | MFU plain | MFU tpukit | peak TFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        model, backend, precision = row
        plain, ours = figures[row, "plain"], figures[row, "tpukit"]
        n = min(len(plain), len(ours))
        if not n:
            out.append(f"| {model} | {backend} | {precision} | skipped: {failed.get(row, 'not run')} ||||||||||")
            continue
        plain, ours = plain[:n], ours[:n]
        speed = statistics.median(t[0]["examples_per_sec"] / p[0]["examples_per_sec"] for p, t in zip(plain, ours))
        wall = statistics.median(p[1] / t[1] for p, t in zip(plain, ours))
        p_speed, t_speed = (_median(f[0]["examples_per_sec"] for f in runs) for runs in (plain, ours))
        p_wall, t_wall = (_median(f[1] for f in runs) for runs in (plain, ours))
        compiles = "/".join(
            ",".join(str(f[0]["compiles"]) for f in runs) if runs[0][0]["compiles"] is not None else "-"
            for runs in (plain, ours)
        )
        flops, peak = ours[0][0].get("flops_per_example"), ours[0][0].get("peak_flops")
        peak_text = f"{peak / 1e12:.1f}" if peak else "unknown"
        out.append(
            f"| {model} | {backend} | {precision} | {p_speed:,.0f} | {t_speed:,.0f} | {speed:.2f} | "
            f"{p_wall:.1f} | {t_wall:.1f} | {wall:.2f} | {compiles} | {_mfu(p_speed, flops, peak)} | "
            f"{_mfu(t_speed, flops, peak)} | {peak_text} |"
        )
    if tunes:
        out += [
            "",
            "tune_batch_size at precision auto (per-replica batch: examples/s of each size tried):",
            "",
            "| model | backend | auto precision | pick | tried |",
            "|---|---|---|---|---|",
        ]
        for (model, backend), t in tunes.items():
            pick = t.get("recommended", f"error: {t.get('error')}")
            out.append(
                f"| {model} | {backend} | {t.get('precision', '-')} | {pick} | {', '.join(t.get('trials', []))} |"
            )
    if info:
        out += [""] + [
            f"Runtime ({b}): {d['device']}, compute capability {d.get('compute_capability')}; precision "
            f"auto -> {d['runtime_precision']}"
            for b, d in info.items()
        ]
    out += [""] + ([f"Skipped {what}: {why}" for what, why in skipped] or ["Skipped nothing."])
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
