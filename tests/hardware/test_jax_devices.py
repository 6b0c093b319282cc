"""`backend="jax"` with a GPU present, on the CPU: the same `connect` and `train` code a GPU would run.

Faked: `jax.devices` (for "gpu" and for the default backend) returns the real CPU device wrapped in a proxy
whose `platform` is "cuda" and whose `device_kind` and `compute_capability` are a GPU's, every other attribute
the real device's; `jax.devices("cpu")` is untouched. tpukit reads only those three, and on one device
(`OneDevice`) it places nothing itself, so Keras trains on the real CPU while the runtime, the precision, the
steps per execution and the MFU are the GPU's. One device only: `DataParallel` over two proxies fails in jaxlib
(`batched_device_put(): incompatible function arguments`: it takes only real `jaxlib._jax.Device`s).

Keras fixes its backend at import, so each test runs in a fresh process. The fake imports JAX, which starts no
backend; the first `jax.devices` call, inside `connect`, does, and the fake records XLA_FLAGS at that call.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

pytest.importorskip("jax")

FAKE = """
import json, os, sys
import jax

_real, flags_at_start = jax.devices, []

class FakeGPU:
    platform = "cuda"
    def __init__(self, real, name, cc):
        self._real, self.device_kind, self.compute_capability = real, name, cc
    def __getattr__(self, attr):
        return getattr(self._real, attr)
    def __str__(self):
        return f"cuda:{self._real.id}"

def fake_gpu(name, cc):
    def devices(backend=None):
        if not flags_at_start:  # the first call starts JAX's backends, which read XLA_FLAGS
            flags_at_start.append(os.environ.get("XLA_FLAGS", ""))
        if backend in (None, "gpu", "cuda"):
            return [FakeGPU(d, name, cc) for d in _real("cpu")][:1]
        return _real(backend)
    jax.devices = devices

def facts(r):
    return {"kind": r.kind, "backend": r.backend, "precision": r.precision, "reason": r.precision_reason,
            "strategy": type(r.strategy).__name__, "replicas": r.replicas, "facts": list(r.device_facts),
            "skipped": dict(r.skipped), "peak16": r.peak_flops("mixed_float16"), "peak32": r.peak_flops("float32"),
            "strategy_reason": r.strategy_reason, "describe": r.describe()}

def refusal(runtime, logdir):  # what train() says of a deterministic run on `runtime` (None: it trained)
    config = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1, batch_size=32, deterministic=True,
                              logdir=logdir)
    try:
        tpukit.train(config, runtime)
    except tpukit.ConfigError as e:
        return str(e)

import tpukit
"""


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), "KERAS_BACKEND": ""}


def _python(code, timeout=300):
    proc = subprocess.run(
        [sys.executable, "-c", FAKE + code], capture_output=True, text=True, timeout=timeout, env=_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_connect_jax_to_a_t4_gives_one_device_and_mixed_float16_fake_gpu():
    from tpukit.hardware.specs import PEAK_FLOPS

    out = _python("""
fake_gpu("Tesla T4", "7.5")
print(json.dumps(facts(tpukit.connect(accelerator="gpu", backend="jax"))))
""")
    assert (out["kind"], out["backend"], out["strategy"], out["replicas"]) == ("gpu", "jax", "OneDevice", 1)
    assert out["precision"] == "mixed_float16" and "compute capability 7.5 >= 7.0" in out["reason"]
    [t4] = out["facts"]
    assert (t4["name"], t4["compute_capability"], t4["peak_flops"]) == ("Tesla T4", [7, 5], PEAK_FLOPS["Tesla T4"])
    assert out["peak16"] == 65e12
    assert out["strategy_reason"].startswith("one GPU device, no keras.distribution, as plain Keras on JAX runs it")
    assert f"Strategy: {out['strategy_reason']}" in out["describe"].splitlines()


def test_auto_finds_a_p100_and_keeps_float32_below_compute_capability_7_fake_gpu():
    out = _python("""
fake_gpu("Tesla P100-PCIE-16GB", "6.0")
print(json.dumps(facts(tpukit.connect(backend="jax"))))
""")
    assert (out["kind"], out["strategy"], out["skipped"]) == ("gpu", "OneDevice", {"tpu": "JAX sees no TPU device"})
    assert out["precision"] == "float32"
    assert "Tesla P100-PCIE-16GB has compute capability below 7.0 (no Tensor Cores)" in out["reason"]
    assert out["facts"][0]["compute_capability"] == [6, 0] and out["peak32"] == 9.3e12


def test_deterministic_auto_precision_run_on_a_t4_twice_same_weights_fake_gpu(tmp_path):
    """Auto precision is the T4's mixed_float16 (with a LossScaleOptimizer); XLA's deterministic GPU ops flag is set
    before JAX starts; MFU is against the T4's float16 peak; auto steps per execution has no CPU call-time cap."""
    out = _python(f"""
fake_gpu("Tesla T4", "7.5")
before = "--xla_gpu_deterministic_ops=true" in os.environ.get("XLA_FLAGS", "")
runtime = tpukit.connect(accelerator="gpu", backend="jax", deterministic=True)
config = tpukit.RunConfig(dataset="digits", model="mlp", epochs=1, batch_size=32, precision="auto",
                          deterministic=True, logdir={str(tmp_path)!r})
import keras
# A step hook that is not async_safe keeps Keras from running the hooks in its thread pool, where the two calls'
# reports can arrive out of order and leave a 2-call epoch with no timed step (examples/s None, so no MFU).
in_order = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: None)
runs = [tpukit.train(config, runtime, callbacks=[in_order]) for _ in range(2)]
print(json.dumps({{"before": before, "at_start": flags_at_start[0], "keras": keras.backend.backend(),
                  "optimizer": type(runs[0].model.optimizer).__name__, "runs": [{{
    "status": r.status, "precision": r.config["precision"], "reason": r.precision_reason, "policy": r.model_policy,
    "fingerprint": r.fingerprint, "mfu": r.mfu, "flops": r.flops_per_example, "eps": r.examples_per_sec,
    "spe": r.config["steps_per_execution"], "steps": r.steps_per_epoch,
    "notes": [n for n in r.notes if n.startswith("steps_per_execution")]}} for r in runs]}}))
""")
    assert out["before"] is False and "--xla_gpu_deterministic_ops=true" in out["at_start"].split()
    assert out["keras"] == "jax" and out["optimizer"] == "LossScaleOptimizer"
    a, b = out["runs"]
    for r in (a, b):
        assert r["status"] == "completed" and r["precision"] == r["policy"] == "mixed_float16"
        assert "compute capability 7.5" in r["reason"]
        assert r["mfu"] == pytest.approx(r["flops"] * r["eps"] / 65e12) and 0 < r["mfu"] < 1
        assert (r["steps"], r["spe"]) == (40, 20)  # digits: 1293 training examples, batch 32
        assert r["notes"] == [
            "steps_per_execution: auto → 20 on GPU: fewer calls from the host, each running 20 "
            "steps; the largest divisor of the 40 steps per epoch up to 32, so epochs stay whole"
        ]
    assert a["fingerprint"] == b["fingerprint"]


def test_a_deterministic_run_on_a_gpu_started_without_the_flag_is_refused_in_one_line_fake_gpu(tmp_path):
    """XLA reads its deterministic-ops flag when JAX starts: a runtime connected without it cannot give a
    deterministic run, and connecting again with deterministic=True after JAX started does not either."""
    out = _python(f"""
fake_gpu("Tesla T4", "7.5")
runtime = tpukit.connect(accelerator="gpu", backend="jax")
said = refusal(runtime, {str(tmp_path)!r})
again = tpukit.connect(accelerator="gpu", backend="jax", deterministic=True)
print(json.dumps({{"said": said, "flag": runtime.xla_deterministic_ops, "again": again.xla_deterministic_ops,
                  "runs": os.listdir({str(tmp_path)!r})}}))
""")
    assert out["said"] and "\n" not in out["said"] and "tpukit.connect(deterministic=True)" in out["said"]
    assert out["flag"] is False and out["again"] is False and out["runs"] == []  # refused before a run dir


def test_jax_started_by_the_users_code_before_connect_keeps_the_flag_off_fake_gpu(tmp_path):
    """The user's own JAX code ran first (its backends started): connect(deterministic=True) sets the flag too late,
    and the runtime says so, so a deterministic run is refused rather than run nondeterministically."""
    out = _python(f"""
import jax.numpy as jnp
jnp.zeros(1).block_until_ready()   # the user's code starts JAX's backends
fake_gpu("Tesla T4", "7.5")
runtime = tpukit.connect(accelerator="gpu", backend="jax", deterministic=True)
print(json.dumps({{"flag": runtime.xla_deterministic_ops, "said": refusal(runtime, {str(tmp_path)!r})}}))
""")
    assert out["flag"] is False and "restart the runtime" in out["said"]
