"""JAX's persistent compilation cache: a second process with the same cache reads the training step back, and says so.

Real JAX in subprocesses (this pytest process runs Keras on TensorFlow), a tiny model, every cache in a temporary
directory: the user's own `JAX_COMPILATION_CACHE_DIR` is taken out of the children's environment, so nothing here
reads or writes the home directory's.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, unset_env
from tpukit.training import compile_cache

pytest.importorskip("jax")

RUN = """
import json, os, sys
import jax
import tpukit
logdir, cache = sys.argv[1], {"None": None}.get(sys.argv[2], sys.argv[2])
config = tpukit.RunConfig(model="mlp", dataset="digits", dataset_size=256, epochs=1, batch_size=32, backend="jax",
                          replicas=1, validation_split=None, logdir=logdir, compilation_cache=cache)
result = tpukit.train(config, verbose=0)
print(json.dumps({"status": result.status, "compiles": result.compiles, "compile_s": result.compile_s,
                  "notes": [n for n in result.notes if n.startswith("compile:")],
                  "recorded": json.load(open(os.path.join(result.run_dir, "result.json")))["notes"],
                  "after": [jax.config.jax_compilation_cache_dir,
                            jax.config.jax_persistent_cache_min_compile_time_secs]}))
"""


def _run(logdir, cache, **env):
    environment = {k: v for k, v in os.environ.items() if k != compile_cache.ENVIRONMENT}
    environment.update({"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax", **env})
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(logdir), str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_with_the_same_cache_reads_the_training_step_back(tmp_path):
    cache = tmp_path / "cache"
    first = _run(tmp_path / "a", cache)
    second = _run(tmp_path / "b", cache)  # another logdir: the cache alone is shared
    assert first["status"] == second["status"] == "completed"
    assert first["compiles"] == second["compiles"] == 1  # a served compile is still the step's one compile
    (said,) = first["notes"]
    assert said.startswith("compile: train_step compiled once, ") and said.endswith(
        f": not in JAX's persistent compilation cache at {cache} yet, kept there for the next run"
    ), said
    (said,) = second["notes"]
    assert (
        said.startswith("compile: train_step compiled once, ")
        and (f": served by JAX's persistent compilation cache at {cache} (it saved ") in said
    ), said
    assert said in second["recorded"]  # result.json keeps it
    assert second["compile_s"] < first["compile_s"]
    assert any(name.startswith("jit_train_step") for name in os.listdir(cache))
    # the run put JAX's settings back: the process's own JAX code sees them as it had them
    assert first["after"] == second["after"] == [None, 1.0]


@pytest.mark.slow
def test_auto_keeps_the_cache_in_the_logdir_or_where_jax_compilation_cache_dir_says_and_off_keeps_none(tmp_path):
    auto = _run(tmp_path / "auto", "auto")
    assert os.path.isdir(tmp_path / "auto" / compile_cache.FOLDER)
    assert f"at {tmp_path / 'auto' / compile_cache.FOLDER} yet" in auto["notes"][0]
    users = tmp_path / "users_cache"
    _run(tmp_path / "env", "auto", JAX_COMPILATION_CACHE_DIR=str(users))
    assert os.listdir(users) and not os.path.exists(tmp_path / "env" / compile_cache.FOLDER)
    for off in ("None", "off"):
        result = _run(tmp_path / off, off)
        (said,) = result["notes"]
        assert re.fullmatch(
            r"compile: train_step compiled once, \d+\.\d\d s; JAX's persistent compilation cache is "
            r"off",
            said,
        ), said
        assert [p for p in os.listdir(tmp_path / off) if not p.startswith("2")] == []  # the run's directory alone


def test_where_each_setting_keeps_the_cache(monkeypatch, tmp_path):
    unset_env(monkeypatch, compile_cache.ENVIRONMENT)
    assert compile_cache.directory_for("auto", "runs") == os.path.join("runs", ".jax-cache")
    assert compile_cache.directory_for(None, "runs") is compile_cache.directory_for("off", "runs") is None
    assert compile_cache.directory_for("~/jax", "runs") == os.path.join(os.path.expanduser("~"), "jax")
    monkeypatch.setenv(compile_cache.ENVIRONMENT, str(tmp_path))
    assert compile_cache.directory_for("auto", "runs") == str(tmp_path)
    assert compile_cache.directory_for("/elsewhere", "runs") == "/elsewhere"  # a path set in the config wins
    assert compile_cache.directory_for("auto", "runs", configured="/set/in/jax.config") == "/set/in/jax.config"
