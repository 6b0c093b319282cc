"""The CLI contract: bad arguments exit 2 in a few lines, --json ends stdout, runs reproduce across processes."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from run_support import last_json as _last_json
from tpukit.training import api as training
from tpukit.training import plan
from tpukit.config import RunConfig

JSON_KEYS = {
    "run_dir",
    "status",
    "backend",
    "accelerator",
    "replicas",
    "precision",
    "deterministic",
    "seed",
    "batch_size",
    "global_batch_size",
    "epochs",
    "history",
    "examples_per_sec",
    "step_time_ms",
    "fingerprint",
    "profile_files",
    "steps_per_execution",
    "steps_per_epoch",
}


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--batch-size", "0"], "batch_size=0"),
        (["--batch-size", "-8"], "batch_size=-8"),
        (["--batch-size", "abc"], "invalid int value: 'abc'"),
        (["--precision", "fp8"], "precision='fp8'"),
        (["--dataset", "imagenet"], "dataset='imagenet'"),
        (["--model", "vit"], "model='vit'"),
        (["--accelerator", "npu"], "accelerator='npu'"),
        (["--replicas", "0"], "replicas=0"),
        (["--profile", "4:2"], "profile=(4, 2)"),
        (["--profile", "four"], "expected START:STOP"),
        (["--epochs", "0"], "epochs=0"),
        (["--accelerator", "tpu", "--precision", "mixed_float16"], "use 'mixed_bfloat16'"),
        (["--resume", "/nonexistent/run"], "/nonexistent/run does not exist; expected a run directory"),
        (["--seed", str(2**32)], "seed=4294967296"),
        (["--epochs", "10000000"], "epochs=10000000"),
        (["--name", "x" * 300], "at most 100 characters"),
        (["--dataset", "shapes", "--dataset-size", str(10**12)], "dataset_size=1000000000000"),
        (
            ["--model", "mlp", "--dataset", "digits", "--lora-rank", "8"],
            "RunConfig.lora_rank=8 applies to a model with LoRA adapters (a KerasHub preset), and the model mlp has none",
        ),
        (["--model", "mlp", "--dataset", "digits", "--sequence-length", "64"], "RunConfig.sequence_length=64"),
    ],
)
def test_bad_arguments_exit_2_with_a_short_message(args, expected):
    proc = run_cli("train", *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert 1 <= len(proc.stderr.strip().splitlines()) <= 3


@pytest.mark.parametrize(
    "extra",
    [
        ["--lora-rank", "8"],
        ["--dataset", "other.jsonl"],  # --model is taken: where the run's preset directory moved (resume decides)
        ["--lora-alpha=16"],
        ["--sequence-length", "64", "--learning-rate", "1e-4"],
    ],
)
def test_settings_beside_resume_are_one_line_not_ignored(extra, tmp_path, capfd):
    from tpukit.cli import main

    assert main.main(["train", "--resume", str(tmp_path / "a_run"), *extra, "--json"]) == main.EXIT_BAD_ARGS
    err = capfd.readouterr().err.strip()
    typed = sorted(t.split("=")[0] for t in extra if t.startswith("--"))
    assert err == (
        f"python -m tpukit: error: --resume continues {tmp_path / 'a_run'} with the settings it was started "
        f"with, so {', '.join(typed)} would be ignored; drop them (only --epochs N extends a completed "
        "run), or start a new run with them."
    ), err


def test_the_cli_sets_only_the_options_typed():
    from tpukit.cli import main
    from tpukit.models.source import KIND_SETTINGS

    argv = ["train", "--model", "mlp", "--epochs", "2"]
    args = main._parser().parse_args(argv)
    args.typed = main._typed(argv)
    config = main._config_from(args)
    assert config.is_set("model") and config.is_set("epochs") and not config.is_set("batch_size")
    assert not any(config.is_set(name) for name in KIND_SETTINGS)


def test_method_preference_and_data_are_options_of_train():
    """`train --method dpo --data pairs.jsonl --preference beta=0.2`: --data is --dataset, as train(data=) names it."""
    from tpukit.cli import main

    argv = ["train", "--model", "./p", "--method", "dpo", "--data", "pairs.jsonl", "--preference", "beta=0.2"]
    args = main._parser().parse_args(argv)
    args.typed = main._typed(argv)
    config = main._config_from(args)
    assert (config.method, config.dataset, config.preference.beta) == ("dpo", "pairs.jsonl", 0.2)
    assert config.is_set("dataset") and config.is_set("preference")
    bad = run_cli("train", "--method", "dpo", "--preference", "beta")
    assert bad.returncode == 2 and "expected KEY=VALUE pairs such as beta=0.2. Received: 'beta'" in bad.stderr


def test_a_preference_method_on_a_model_that_is_no_preset_is_one_line():
    out = run_cli("train", "--model", "mlp", "--dataset", "digits", "--method", "dpo", "--epochs", "1")
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert "RunConfig.method='dpo' applies to a model with answers to score for preference tuning" in line, out.stderr


def test_import_tpukit_does_not_import_tensorflow_or_keras():
    code = (
        "import sys, tpukit, tpukit.config, tpukit.cli.main; tpukit.RunConfig();"
        "bad=[m for m in ('tensorflow','keras','ipywidgets') if m in sys.modules]; assert not bad, bad"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert proc.returncode == 0, proc.stderr


def _train_json(*args, logdir, env=None, **popen):
    cmd = [sys.executable, "-m", "tpukit", "train", "--json", "--logdir", str(logdir), *args]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, **popen)


def _finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
def test_json_contract_and_bitwise_determinism_across_processes_8_replicas(tmp_path):
    args = [
        "--replicas",
        "8",
        "--deterministic",
        "--profile",
        "2:4",
        "--dataset",
        "digits",
        "--model",
        "mlp",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--precision",
        "mixed_bfloat16",
    ]
    a, b = _train_json(*args, logdir=tmp_path / "a"), _train_json(*args, logdir=tmp_path / "b")
    ra, rb = _last_json(_finish(a)), _last_json(_finish(b))
    assert JSON_KEYS <= set(ra)
    assert ra["status"] == "completed" and ra["replicas"] == 8 and ra["global_batch_size"] == 128
    planned = plan.make(RunConfig(dataset="digits", model="mlp", batch_size=16, replicas=8), 8)
    assert ra["steps_per_epoch"] == planned.steps_per_epoch > 0  # the run counted what the plan said
    assert ra["backend"] == "tensorflow" and ra["accelerator"] == "cpu" and ra["precision"] == "mixed_bfloat16"
    assert ra["profile_files"] and Path(ra["profile_files"][0]).exists()
    assert ra["fingerprint"] == rb["fingerprint"]
    assert ra["run_dir"] != rb["run_dir"]


def _wait_for_backup(run_root, proc, epoch, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for meta in Path(run_root).glob("*/backup/latest.json"):
            try:
                if json.loads(meta.read_text())["epochs_done"] >= epoch:
                    return meta.parents[1]
            except (ValueError, KeyError, OSError):
                pass
        assert proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    raise AssertionError("no backup appeared")


@pytest.mark.slow
def test_sigkilled_deterministic_run_resumes_to_the_same_fingerprint(tmp_path):
    """Kill -9 after epoch 1, resume: the same weights as the run left alone (and as a second plain process)."""
    args = [
        "--deterministic",
        "--dataset",
        "shapes",
        "--dataset-size",
        "4096",
        "--model",
        "mlp",
        "--epochs",
        "5",
        "--batch-size",
        "32",
    ]
    victim = _train_json(*args, logdir=tmp_path / "victim")
    plain = _train_json(*args, logdir=tmp_path / "plain")
    run_dir = _wait_for_backup(tmp_path / "victim", victim, epoch=1)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert json.loads((run_dir / "result.json").read_text())["status"] == "running"  # killed: no chance to say more
    plain2 = _train_json(*args, logdir=tmp_path / "plain2")
    resumed = _last_json(run_cli("train", "--resume", str(run_dir), "--json"))
    reference, plain2 = _last_json(_finish(plain)), _last_json(_finish(plain2))
    assert resumed["status"] == "completed" and resumed["run_dir"] == str(run_dir)
    assert resumed["fingerprint"] == reference["fingerprint"] == plain2["fingerprint"]
    assert resumed["epochs_done"] == 5
    assert resumed["history"]["loss"] == reference["history"]["loss"]
    again = run_cli("train", "--resume", str(run_dir))
    assert again.returncode == 1 and "is a completed run (5 epochs)" in again.stderr and "--epochs N" in again.stderr
    extended = _last_json(run_cli("train", "--resume", str(run_dir), "--epochs", "6", "--json"))
    assert extended["status"] == "completed" and extended["epochs_done"] == 6 and extended["run_dir"] != str(run_dir)
    assert json.loads((Path(extended["run_dir"]) / "result.json").read_text())["parent"] == str(run_dir)


def test_doctor_reports_the_runtime_and_versions():
    info = _last_json(run_cli("doctor", "--json"))
    assert info["runtime"]["kind"] == "cpu" and info["versions"]["keras"].startswith("3.")
    assert "tpu" in info["runtime"]["skipped"]


@pytest.mark.slow
def test_cli_trains_a_user_model_and_dataset_by_import_path_and_resumes_it(tmp_path):
    """`--model usermodels:text_classifier --dataset usermodels:load_tokens`: killed after epoch 1, then --resume."""
    env = {"PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}"}
    args = [
        "--model",
        "usermodels:text_classifier",
        "--dataset",
        "usermodels:load_tokens",
        "--deterministic",
        "--epochs",
        "4",
        "--batch-size",
        "8",
        "--precision",
        "float32",
    ]
    victim = _train_json(*args, logdir=tmp_path / "victim", env=env)
    run_dir = _wait_for_backup(tmp_path / "victim", victim, epoch=1)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["model"] == "usermodels:text_classifier" and config["dataset"] == "usermodels:load_tokens"
    reference = _last_json(run_cli("train", "--json", "--logdir", str(tmp_path / "plain"), *args, env=env))
    resumed = _last_json(run_cli("train", "--resume", str(run_dir), "--json", env=env))
    assert resumed["status"] == "completed" and resumed["epochs_done"] == 4
    assert resumed["fingerprint"] == reference["fingerprint"]
    assert resumed["model"] == "usermodels:text_classifier" and resumed["validation_metrics"]


def test_resume_of_a_damaged_run_and_a_bad_tensorboard_port_are_one_line(tmp_path):
    run = tmp_path / "20260101-000000-x"
    run.mkdir()
    (run / "config.json").write_text('{"epochs": 2, "batch_s')
    proc = run_cli("train", "--resume", str(run), timeout=60)
    assert proc.returncode == 1 and f"{run / 'config.json'} cannot be read (JSONDecodeError)" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("tensorboard", "--port", "0", "--logdir", str(tmp_path), timeout=60)
    assert proc.returncode == 2 and "expected a port from 1 to 65535" in proc.stderr


def test_cli_import_path_that_fails_is_one_line(tmp_path):
    proc = run_cli("train", "--model", "no_such_pkg.models:build", timeout=60)
    assert proc.returncode == 2 and "importing 'no_such_pkg.models' failed: ModuleNotFoundError" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_logdir_that_cannot_be_written_is_one_line_before_connecting(tmp_path, where):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    logdir = afile if where == "a file" else afile / "runs"
    proc = run_cli("train", "--logdir", str(logdir), "--model", "mlp", "--dataset", "digits", timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"python -m tpukit: logdir {logdir} is not a writable directory "
        f"({'File exists' if where == 'a file' else 'Not a directory'}); choose another with RunConfig(logdir=...) "
        "or --logdir."
    ]


def test_debug_shows_the_traceback_the_one_line_hides():
    proc = run_cli("train", "--model", "vit", "--debug", timeout=60)
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "RegistryError: unknown model 'vit'" in proc.stderr


# Ctrl-C at a known point of start-up, not after a sleep (where it lands would depend on this machine's speed): a
# module on PYTHONPATH that Python loads at start (sitecustomize) sends the process SIGINT as it begins to import a
# given module, and with "swallow" catches the KeyboardInterrupt there, as a library that catches everything would.
_INTERRUPT_AT_IMPORT = """
import os, signal, sys

class _InterruptAt:
    def __init__(self, name, swallow):
        self.name, self.swallow, self.done = name, swallow, False

    def find_spec(self, name, path=None, target=None):
        if name == self.name and not self.done:
            self.done = True
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):  # Python runs the handler between two of these
                    pass
            except BaseException:
                if not self.swallow:
                    raise
        return None

sys.meta_path.insert(0, _InterruptAt(os.environ["INTERRUPT_AT"], os.environ.get("SWALLOW") == "1"))
"""


@pytest.mark.parametrize(
    "module, swallow", [("numpy", False), ("tensorflow", False), ("keras", False), ("keras", True)]
)
def test_ctrl_c_during_start_up_is_one_line(tmp_path, module, swallow):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_INTERRUPT_AT_IMPORT)
    # A shell that starts a job in the background (`make test &`) ignores SIGINT in it, and children inherit that:
    # give the CLI the default handler, as an interactive terminal does.
    proc = _train_json(
        "--model",
        "mlp",
        "--dataset",
        "digits",
        logdir=tmp_path / "runs",
        env={"PYTHONPATH": f"{hooks}{os.pathsep}{REPO}", "INTERRUPT_AT": module, "SWALLOW": "1" if swallow else "0"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and "Traceback" not in err, err
    if swallow:  # noticed as training starts: the run is recorded as stopped before its first step
        result = json.loads(out.strip().splitlines()[-1])
        assert result["status"] == "stopped" and result["epochs_done"] == 0 and Path(result["run_dir"]).is_dir()
    else:
        assert err.strip().splitlines()[-1] == "python -m tpukit: interrupted"


def test_warnings_take_one_line_each(capsys):
    import warnings

    from tpukit.cli import main as cli

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = cli._one_line_warning
        warnings.warn("the batch is padded:\n  12% of each step is waste", UserWarning)
    assert capsys.readouterr().err == "UserWarning: the batch is padded: 12% of each step is waste\n"


def test_the_cli_hides_tensorflows_log_lines_unless_verbose(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO)
    args = [
        sys.executable,
        "-m",
        "tpukit",
        "train",
        "--model",
        "mlp",
        "--dataset",
        "digits",
        "--epochs",
        "1",
        "--logdir",
        str(tmp_path),
    ]
    quiet = subprocess.run(args, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    verbose = subprocess.run(args + ["--verbose"], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert quiet.returncode == verbose.returncode == 0
    noise = ("cpu_feature_guard", "oneDNN", "absl::InitializeLog", "Traceback")
    assert not [line for line in quiet.stderr.splitlines() if any(n in line for n in noise)], quiet.stderr
    assert "cpu_feature_guard" in verbose.stderr  # TensorFlow's own start-up line, shown when asked for


def test_the_stderr_filter_drops_native_log_lines_and_keeps_the_rest_through_os_exit():
    """What Abseil writes before its set-up goes; every other line, a partial progress line and the last line
    before os._exit (which skips atexit) come through."""
    code = (
        "import os, sys\n"
        "from tpukit.cli import nativelog\n"
        "assert nativelog.hide_native_log_lines()\n"
        "os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n')\n"
        "os.write(2, b'I0000 00:00:1795523283.364743    8845 port.cc:153] oneDNN custom operations are on.\\n')\n"
        "sys.stderr.write('\\repoch 1/2  step 3/40'); sys.stderr.flush()\n"
        "sys.stderr.write('\\nIn the end: stopped\\n'); sys.stderr.flush()\n"
        "nativelog.flush()\n"
        "os._exit(130)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert done.returncode == 130
    assert done.stderr == b"\repoch 1/2  step 3/40\nIn the end: stopped\n", done.stderr


def test_the_stderr_filter_keeps_what_a_crashing_process_wrote_last():
    """A C++ abort (gloo's 'terminate called ... what(): ...') writes its line end last: a filter thread died
    with the process and lost it, gluing the next line on; the filter process reads to the end."""
    code = (
        "import os\n"
        "from tpukit.cli import nativelog\n"
        "assert nativelog.hide_native_log_lines()\n"
        "os.write(2, b\"terminate called after throwing an instance of 'gloo::EnforceNotMet'\\n\")\n"
        "os.write(2, b'  what():  size mismatch')\n"
        "os.write(2, b'\\n')\n"
        "os.abort()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert done.returncode == -signal.SIGABRT
    assert done.stderr.endswith(b"  what():  size mismatch\n"), done.stderr


def test_a_one_line_message_is_one_write_even_with_pythonunbuffered():
    """With PYTHONUNBUFFERED, print() writes its line end in a second system call; a worker the launcher stopped
    between the two left its last line without an end, and the launcher's own line ran on after it (seen in CI).
    nativelog.say writes the line and its end at once, into the real unbuffered stderr."""
    code = (
        "import io, os, sys\n"
        "from tpukit.cli import nativelog\n"
        "writes = []\n"
        "class Raw(io.RawIOBase):\n"
        "    def writable(self): return True\n"
        "    def write(self, b): writes.append(bytes(b)); return len(b)\n"
        "stream = io.TextIOWrapper(Raw(), write_through=True, line_buffering=sys.stderr.line_buffering)\n"
        "assert sys.stderr.write_through\n"
        "nativelog.say('python -m tpukit: the last line', stream)\n"
        "print(writes)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[b'python -m tpukit: the last line\\n']"


def _stderr_at_exit(cmd, **popen):
    """Run `cmd` with stderr in a file and read the file the moment the exit status arrives (as `cmd 2>f; cat f`
    does): (status, stderr)."""
    import tempfile

    with tempfile.TemporaryFile() as f:
        code = subprocess.call(
            cmd, stderr=f, env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}, cwd=REPO, **popen
        )
        f.seek(0)
        return code, f.read()


def test_a_fast_failure_prints_its_line_before_the_exit_status_50_times_in_a_row():
    """With a filter process beside the CLI, the line of `train --resume /nonexistent/run` was not yet in the file
    when the status came, 8 runs in 10; the filter now exits last, with the CLI's status."""
    for _ in range(50):
        code, err = _stderr_at_exit([sys.executable, "-m", "tpukit", "train", "--resume", "/nonexistent/run"])
        assert (
            code == 2
            and err.startswith(b"python -m tpukit: error: ")
            and b"does not exist; expected a run directory" in err
        ), err


@pytest.mark.parametrize(
    "end, status",
    [
        ("raise SystemExit(0)", 0),
        ("raise SystemExit(1)", 1),
        ("sys.exit(2)", 2),
        ("os._exit(130)", 130),
        ("os.abort()", -signal.SIGABRT),
        ("os.kill(os.getpid(), 9)", -9),
    ],
)
def test_the_last_line_is_there_when_the_status_arrives_however_the_program_ends(end, status):
    code = (
        "import os, sys\n"
        "from tpukit.cli import nativelog\n"
        "assert nativelog.hide_native_log_lines()\n"
        "os.write(2, b'I0000 00:00:1795523283.364743    8845 port.cc:153] oneDNN custom operations are on.\\n')\n"
        "sys.stderr.write('python -m tpukit: the last line\\n'); sys.stderr.flush()\n"
        "os.write(2, b'  what():  a native abort writes its line end last')\n"
        "os.write(2, b'\\n')\n"
        f"{end}\n"
    )
    for _ in range(10):
        assert _stderr_at_exit([sys.executable, "-c", code]) == (
            status,
            b"python -m tpukit: the last line\n  what():  a native abort writes its line end last\n",
        )


def test_the_filter_passes_signals_on_and_takes_the_program_with_it_when_killed():
    """The pid a caller holds is the filter's: SIGTERM (and SIGINT from kill) reach the program, and SIGKILL ends
    it too (PR_SET_PDEATHSIG), as they would without a filter."""
    code = (
        "import os, signal, sys, time\n"
        "from tpukit.cli import nativelog\n"
        "assert nativelog.hide_native_log_lines()\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got SIGTERM', file=sys.stderr), os._exit(143)))\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for sig, expected in ((signal.SIGTERM, 143), (signal.SIGINT, -signal.SIGINT), (signal.SIGKILL, -9)):
        # SIGINT as a terminal gives it: a shell's background job (`bash .ci/run &`) inherits it ignored, and an
        # ignored signal stays ignored in the program too (nativelog), as it would without a filter.
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        program = int(proc.stdout.readline())
        assert program != proc.pid
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # name the signal and what each process was doing
            states = {"filter": _state(proc.pid), "program": _state(program)}
            for pid in (program, proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            pytest.fail(f"{sig.name}: no exit within 30 s; process states {states}; stderr {proc.communicate()[1]!r}")
        assert proc.returncode == expected, err
        if sig == signal.SIGTERM:
            assert err == b"got SIGTERM\n"
        if sig == signal.SIGINT:
            assert err.strip().endswith(b"KeyboardInterrupt"), err
        deadline = time.monotonic() + 5
        while Path(f"/proc/{program}").exists() and b"Z" not in _state(program) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{program}").exists() or b"Z" in _state(program), "the program outlived its filter"


def _state(pid) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"Z"


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_one_examples_per_sec_the_epoch_lines_and_the_summary_agree(tmp_path, backend):
    """One definition (meter.Meter): the summary's figure is the epoch lines' figures taken together (their
    examples over their time), within 5%, on both backends; the JAX run compiles its train step once."""
    proc = _finish(
        _train_json(
            "--backend",
            backend,
            "--dataset",
            "digits",
            "--model",
            "mlp",
            "--epochs",
            "4",
            "--batch-size",
            "16",
            "--precision",
            "float32",
            logdir=tmp_path,
        )
    )
    result = _last_json(proc)
    steps, per_call, batch = result["steps_per_epoch"], result["steps_per_execution"], result["global_batch_size"]
    rates = [float(m.replace(",", "")) for m in re.findall(r"  ([\d,]+) examples/s", proc.stderr)]
    assert len(rates) == 4, proc.stderr
    timed = [steps - per_call] + [steps] * 3  # the run's first call compiles: not timed
    seconds = sum(n * batch / r for n, r in zip(timed, rates))
    together = sum(timed) * batch / seconds
    assert result["examples_per_sec"] == pytest.approx(together, rel=0.05)
    with open(Path(result["run_dir"]) / "result.json") as f:
        assert json.load(f)["examples_per_sec"] == result["examples_per_sec"]
    assert result["compiles"] == (1 if backend == "jax" else None)


def test_train_help_shows_defaults_names_and_the_engines_figures_without_importing_keras():
    """`train --help` as a Keras user reads it: each default, the dataset and model names, what "auto" steps per
    execution does (the engine's own figures) and the per-replica batch; and it stays light."""
    from tpukit.hardware.runtime import AUTO_STEPS_PER_EXECUTION, CPU_CALL_SECONDS

    code = (
        "import sys, contextlib, io\n"
        "from tpukit.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        main(['train', '--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
        "bad = [m for m in ('tensorflow', 'keras', 'jax', 'ipywidgets') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "print(out.getvalue())\n"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 10
    text = " ".join(proc.stdout.split())  # argparse wraps lines
    for default in (
        "(default: 64)",
        "(default: mnist5k)",
        "(default: cnn)",
        "(default: auto)",
        "(default: 0.1)",
        "(default: 42)",
        "(default: runs)",
        "(default: adam)",
        "default 3",
    ):
        assert default in text, default
    assert "mnist5k, digits, shapes" in text and "mlp, cnn, resnet" in text
    assert (
        f"up to {AUTO_STEPS_PER_EXECUTION}, on the CPU only while a call stays under "
        f"{1000 * CPU_CALL_SECONDS:.0f} ms" in text
    )
    assert "1 on the CPU" not in text
    assert "per replica" in text and "the global batch is this x replicas" in text
    assert "partial batch is dropped" in text


def test_train_prints_a_total_time_and_epoch_lines_that_never_say_zero_seconds(tmp_path):
    """The digits mlp (1,293 training examples, batch 64) runs each epoch as one call (steps per execution = its 20 steps): the first epoch's call
    compiles, so its line says so in place of an examples/s; the second's 40-odd ms are not "0.0s"; the last
    line is the command's wall time, and the TensorBoard hint is a command that runs from here."""
    proc = run_cli("train", "--dataset", "digits", "--model", "mlp", "--epochs", "2", "--logdir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    epochs = [line for line in proc.stderr.splitlines() if line.startswith("epoch ")]
    assert len(epochs) == 2, proc.stderr
    # Before them, where the step count differs from Keras' fit: whole global batches only.
    assert (
        "Batches: 64 examples per step; 1,293 training examples make 20 steps per epoch; 13 are left out of "
        "each epoch (whole batches only, so every step has one shape; Keras' fit would run a smaller step 21)"
    ) in proc.stderr.splitlines(), proc.stderr
    for line in epochs:
        assert re.search(r"  [\d,]+ examples/s  ", line) or "(compiling: no step timed for examples/s)" in line, line
        assert not re.search(r"\b0\.0s\b", line), line
    assert re.search(r"  [\d,]+ examples/s  ", epochs[1]), epochs[1]
    lines = proc.stdout.strip().splitlines()
    assert re.match(r"^Total time: \d+\.\ds \(wall clock from the command's start", lines[-1]), lines[-1]
    hint = next(line for line in lines if line.startswith("Open TensorBoard on these runs: "))
    command = hint.split(": ", 1)[1].split("  (")[0].split()
    assert command[1:] == ["-m", "tpukit", "tensorboard", "--logdir", str(tmp_path)], hint
    assert command[0] == "python" or os.path.samefile(os.path.join(REPO, command[0]), sys.executable), hint


def test_train_json_keeps_its_last_line_and_puts_the_total_time_on_stderr(tmp_path):
    proc = run_cli(
        "train", "--dataset", "digits", "--model", "mlp", "--epochs", "1", "--json", "--logdir", str(tmp_path)
    )
    assert _last_json(proc)["status"] == "completed"
    assert "Total time: " in proc.stderr and "Total time" not in proc.stdout


def test_tensorboard_says_how_to_stop_it_and_stop_does(tmp_path):
    from tpukit.backend import installed

    if not installed("tensorboard"):
        pytest.skip("TensorBoard is not installed")
    started = run_cli("tensorboard", "--logdir", str(tmp_path), timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        first, hint = started.stdout.strip().splitlines()[-2:]
        pid = int(re.search(r"\(pid (\d+),", first).group(1))
        assert hint.startswith("It runs in the background until stopped: ")
        assert f"tensorboard --stop --logdir {tmp_path} (or kill {pid})" in hint, hint
        stopped = run_cli("tensorboard", "--stop", "--logdir", str(tmp_path), timeout=60)
        assert stopped.returncode == 0 and f"Stopped TensorBoard for {tmp_path}" in stopped.stdout, stopped
        assert f"(pid {pid})" in stopped.stdout
        again = run_cli("tensorboard", "--stop", "--logdir", str(tmp_path), timeout=60)
        assert again.returncode == 0 and "No TensorBoard is running for" in again.stdout
    finally:
        from tpukit.observe import tensorboard

        for server in tensorboard.running(tmp_path):
            tensorboard.stop(server)


# What a profiler calls an op where a Keras user would want the layer: a graph path, XLA's module/instruction name.
_PROFILER_NAME = re.compile(r"StatefulPartitionedCall|gradient_tape|/|^jit_|^\w*fusion(\.\d+)?$")


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_a_profiled_runs_summary_names_layers_and_states_its_coverage_once(tmp_path, backend):
    """The zoo CNN profiled from the CLI on the CPU, on each backend: the summary it prints names each top op by its
    layer and op ("conv2d_1 Conv2DBackpropFilter", "conv2d_1 conv (grad)"), not by a graph path or an unnamed
    fusion; the names are distinct, in the text and in the panel chart's shortened labels; the top ops' share of
    the step is stated once, and the line under them says where the rest of the step went."""
    from tpukit.observe import profiling
    from tpukit.ui.plots import _short

    proc = run_cli(
        "train",
        "--backend",
        backend,
        "--dataset",
        "digits",
        "--model",
        "cnn",
        "--epochs",
        "1",
        "--profile",
        "2:4",
        "--logdir",
        str(tmp_path),
        "--name",
        "profiled",
        env={"KERAS_BACKEND": backend},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    capture = re.search(r"^profile capture: (\S+)$", proc.stdout, re.MULTILINE).group(1)
    block = proc.stdout.split("\nProfile  ", 1)[1].split("\n\n", 1)[0]
    summary = profiling.summarize(capture)
    named = [op.name for op in summary.top_ops]
    assert len(named) >= 5 and len(set(named)) == len(named), named
    assert all(name in block for name in named), block
    # judged without the path's end that tells apart ops of one name ("batch_normalization Sum (grad) (mul_1/Sum)"),
    # which `names.distinct` adds where a busy machine raises two such ops into the top ops
    readable = [re.sub(r" \((?!grad\))[^()]*\)$", "", name) for name in named]
    assert not [name for name in readable if _PROFILER_NAME.search(name)], block
    # the profiler's own name, kept apart: an op named by its layer has its graph path or XLA name beside it (an op of
    # its own, such as "Iterator::Root", which a busy machine can raise into the top ops, is named as the profiler does)
    assert all(op.path for op in summary.top_ops), [(o.name, o.path) for o in summary.top_ops]
    assert all(op.path != op.name for op in summary.top_ops if " " in op.name), [
        (o.name, o.path) for o in summary.top_ops
    ]
    convs = [name for name in named if re.match(r"conv2d(_\d)? ", name)]
    assert len({name.split()[0] for name in convs}) >= 2, block  # by layer
    assert any(name.endswith({"tensorflow": "Conv2DBackpropFilter", "jax": "grad)"}[backend]) for name in convs), block
    # XLA:CPU's weight-gradient convolutions keep no op name: they are named by the layer whose kernel they fit
    assert not [name for name in named if name.startswith("convolution")], block
    labels = [_short(name) for name in named]
    assert len(set(labels)) == len(labels), labels
    covered = f"{summary.top_ops_step_percent:.0f}% of the step time"
    assert f"Top ops by self time ({summary.top_ops_source}): {covered}" in block
    # stated once: the Rest line may hold the same figure for its own share ("Rest     71% of the step time in ...")
    stated = [line for line in proc.stdout.splitlines() if covered in line and not line.startswith("Rest ")]
    assert len(stated) == 1 and "cover only" not in proc.stdout, block
    assert re.search(r"^Rest     \d+% of the step time in smaller ops", block, re.MULTILINE), block
    # input measured on both backends (tf.data's analysis; the data iterator's next() calls in JAX's trace), and a
    # next step to take
    assert re.search(r"^Input    \d+\.\d% of step time (waiting for input|fetching the next batch)", block, re.M), block
    assert re.search(r"^Next     \S", block, re.MULTILINE), block


def test_remat_and_gradient_accumulation_flags_make_the_config():
    from tpukit.cli.main import _config_from, _parser

    config = _config_from(_parser().parse_args(["train", "--remat", "on", "--gradient-accumulation", "4"]))
    assert (config.remat, config.gradient_accumulation) == (True, 4)
    config = _config_from(_parser().parse_args(["train"]))
    assert (config.remat, config.gradient_accumulation) == ("auto", "auto")
    assert _config_from(_parser().parse_args(["train", "--remat", "off"])).remat is False


def test_the_cli_sets_where_jax_keeps_compiled_programs():
    from tpukit.cli import main

    def parsed(*args):
        return main._config_from(main._parser().parse_args(["train", *args])).compilation_cache

    assert parsed() == "auto" and parsed("--compilation-cache", "off") is None
    assert parsed("--compilation-cache", "/content/drive/MyDrive/jax-cache") == "/content/drive/MyDrive/jax-cache"
