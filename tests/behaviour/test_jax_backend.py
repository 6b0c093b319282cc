"""The JAX backend: the same engine through Keras 3 on JAX, on 8 simulated CPU devices.

Keras fixes its backend at import and JAX its CPU device count at start, so
every JAX test runs in a fresh process; this pytest process runs TensorFlow.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytest.importorskip("jax")

CLI = [
    "--backend",
    "jax",
    "--replicas",
    "8",
    "--precision",
    "mixed_bfloat16",
    "--deterministic",
    "--profile",
    "2:4",
    "--json",
    "--dataset",
    "digits",
    "--model",
    "mlp",
    "--epochs",
    "2",
    "--batch-size",
    "16",
]


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), "KERAS_BACKEND": ""}


def _python(code, timeout=180):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_cli_on_jax_8_devices_bf16_capture_and_same_fingerprint_in_two_processes(tmp_path):
    from tpukit.observe import profiling

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tpukit", "train", *CLI, "--logdir", str(tmp_path / name)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            cwd=REPO,
        )
        for name in ("a", "b")
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    a, b = results
    assert a["status"] == "completed" and a["backend"] == "jax" and a["accelerator"] == "cpu"
    assert a["replicas"] == 8 and len(a["devices"]) == 8 and a["global_batch_size"] == 128
    assert a["precision"] == "mixed_bfloat16"
    assert a["fingerprint"] == b["fingerprint"]
    capture = a["profile_files"][0]
    assert Path(capture).exists() and capture.endswith(".xplane.pb")
    summary = profiling.summarize(capture)  # the profile plugin's own converters
    assert summary.step_time_ms > 0 and len(summary.steps) >= 3


def test_jax_runtime_data_parallel_and_layer_dtypes_under_mixed_bfloat16():
    result = _python("""
import json, tpukit
from tpukit.models import zoo as models
from tpukit import precision
runtime = tpukit.connect(backend="jax", replicas=8)
import keras
with precision.policy("mixed_bfloat16"), runtime.strategy.scope():
    model = models.build("mlp", input_shape=(8, 8, 1), num_classes=10)
dense = [l for l in model.layers if isinstance(l, keras.layers.Dense)][0]
print(json.dumps({"backend": keras.backend.backend(), "replicas": runtime.replicas, "kind": runtime.kind,
                  "strategy": type(runtime.strategy).__name__, "compute": dense.compute_dtype,
                  "variable": dense.variable_dtype, "output": str(model.outputs[0].dtype),
                  "policy_after": keras.config.dtype_policy().name, "describe": runtime.describe()}))
""")
    assert result["backend"] == "jax" and result["replicas"] == 8 and result["kind"] == "cpu"
    assert result["strategy"] == "DataParallel"
    assert (result["compute"], result["variable"], result["output"]) == ("bfloat16", "float32", "float32")
    assert result["policy_after"] == "float32"
    assert "8 simulated replicas" in result["describe"] and "(jax;" in result["describe"]
    assert "Strategy: keras.distribution.DataParallel over 8 CPU devices: each takes its share" in result["describe"]


def test_auto_picks_jax_for_a_tpu_tensorflow_cannot_drive_fake_tpu_vm():
    """Fake TPU VM (no TPU here): the installed tensorflow-cpu cannot drive it, so auto chooses JAX."""
    result = _python("""
import json, sys
from tpukit.hardware import connect, tpu
tpu.tpu_vm_present = lambda: True   # the fake: pretend /dev/accel* exists
name, why = connect.backend_for("auto")
print(json.dumps({"name": name, "why": why, "keras_loaded": "keras" in sys.modules}))
""")
    assert result["name"] == "jax"
    assert "has no TPU support" in result["why"] and "tensorflow-cpu 2." in result["why"]
    assert result["keras_loaded"] is False  # the choice is made before Keras is imported


def test_auto_picks_tensorflow_without_a_tpu_and_switching_later_is_refused():
    from tpukit import backend

    assert backend.choose("auto", tpu_needs_jax=lambda: None)[0] == "tensorflow"
    with pytest.raises(backend.BackendError, match="already loaded with the tensorflow backend.*Restart the runtime"):
        backend.select("jax")
    assert backend.select("tensorflow") == "tensorflow"
    with pytest.raises(ValueError, match="Unknown backend 'torch'"):
        backend.choose("torch", tpu_needs_jax=lambda: None)


def test_cli_refuses_to_switch_backends_in_one_process_message():
    result = _python("""
import json, keras, tpukit
try:
    tpukit.connect(backend="jax")
    message = ""
except tpukit.BackendError as e:
    message = str(e)
print(json.dumps({"message": message, "backend": keras.backend.backend()}))
""")
    assert result["backend"] == "tensorflow"
    assert "cannot switch to jax" in result["message"] and "KERAS_BACKEND=jax" in result["message"]


def test_tpu_type_from_jax_device_kind_fake_tpu():
    """Fake device kinds (strings JAX reports on TPU VMs)."""
    from tpukit.hardware.specs import PEAK_FLOPS, tpu_type_from_kind

    assert tpu_type_from_kind("TPU v5 lite") == "TPU v5e"
    assert tpu_type_from_kind("TPU v6 lite") == "TPU v6e"
    assert tpu_type_from_kind("TPU v2") == "TPU v2"
    assert PEAK_FLOPS[tpu_type_from_kind("TPU v6 lite")]["bf16"] > 0


def _python_with(code, env_extra=None, timeout=420):
    env = {**_env(), "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}", **(env_extra or {})}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


USER_MODELS_ON_JAX = """
import json, sys, threading, numpy as np, tpukit
runtime = tpukit.connect(backend="jax", replicas=REPLICAS)  # before Keras loads
import keras
from usermodels import TinyNet, images, regressor, text_classifier, tokens, two_inputs, user_cnn
from sklearn.datasets import load_diabetes
logdir = sys.argv[1]
def config(**kw):
    return tpukit.RunConfig(**{"epochs": 1, "batch_size": 8, "logdir": logdir, **kw})
out = {}
x, y = images(512)
extra = np.random.default_rng(0).normal(size=(512, 4)).astype("float32")
xd, yd = load_diabetes(return_X_y=True)
xt, yt = tokens(1024)
runs = {
    "cnn": tpukit.train(config(), runtime, model=user_cnn, data=(x, y)),
    "subclassed": tpukit.train(config(), runtime, model=lambda: TinyNet(4), data=(x, y)),
    "two_inputs": tpukit.train(config(), runtime, model=two_inputs, data=({"image": x, "extra": extra}, y)),
    "regression": tpukit.train(config(loss="mse", metrics=("mae",)), runtime, model=regressor,
                               data=(xd.astype("float32"), yd.astype("float32"))),
    "text": tpukit.train(config(epochs=3, deterministic=True, steps_per_execution=1), runtime, model=text_classifier,
                         data=(xt, yt)),
}
for name, r in runs.items():
    out[name] = {"status": r.status, "replicas": r.config["replicas"], "val": r.validation_metrics,
                 "flops": r.flops_per_example, "how": r.flops_source, "fingerprint": r.fingerprint}
class CallAt(keras.callbacks.Callback):
    def __init__(self, step, action):
        super().__init__(); self.step, self.action, self.seen = step, action, 0
    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step: self.action()
flag = threading.Event()
stop_at = (len(yt) - round(0.1 * len(yt))) // (8 * runtime.replicas) + 6  # inside the second epoch
stopped = tpukit.train(config(epochs=3, deterministic=True, steps_per_execution=1), runtime, model=text_classifier,
                       data=(xt, yt), callbacks=[CallAt(stop_at, flag.set)], stop=flag)
resumed = tpukit.resume(stopped.run_dir, runtime, model=text_classifier, data=(xt, yt))
out["stop_resume"] = {"stopped": stopped.status, "done": stopped.epochs_done, "status": resumed.status,
                      "fingerprint": resumed.fingerprint}
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("feeder, replicas", [("tf.data", 8), ("numpy", 8), ("numpy", 1)])
def test_user_models_and_data_on_jax_with_either_feeder(tmp_path, feeder, replicas):
    """Functional, subclassed, two-input, regression and text models; stop and resume; both input feeders."""
    code = USER_MODELS_ON_JAX.replace("sys.argv[1]", repr(str(tmp_path))).replace("REPLICAS", str(replicas))
    out = _python_with(code, {"TPUKIT_FEEDER": feeder})
    for name in ("cnn", "subclassed", "two_inputs", "regression", "text"):
        assert out[name]["status"] == "completed" and out[name]["replicas"] == replicas, (name, out[name])
        assert out[name]["val"], name
    assert out["regression"]["val"].keys() == {"loss", "mae"}
    assert out["subclassed"]["how"].startswith("XLA cost analysis")
    matmuls = 3 * 2 * (32 * 32 * 3 * 32 + 32 * 4)
    # XLA's count is the matmuls plus the elementwise work it keeps, which moves with jax (+9% on 0.10.2).
    assert matmuls <= out["subclassed"]["flops"] <= 1.15 * matmuls, (out["subclassed"]["flops"], matmuls)
    assert out["stop_resume"]["stopped"] == "stopped" and out["stop_resume"]["done"] == 1
    assert out["stop_resume"]["status"] == "completed"
    assert out["stop_resume"]["fingerprint"] == out["text"]["fingerprint"]  # exact resume on JAX


def test_a_jax_run_never_loads_tensorflow_and_its_seed_still_holds():
    """Issue 18: on JAX a run feeds NumPy and seeds Keras with TensorFlow left out, as on Colab's TPU runtime
    (which has none), so a process that has TensorFlow installed never pays its import. Same config, same
    weights; `determinism.set_seed` still seeds TensorFlow once the user loads it."""
    out = _python_with("""
import json, sys, tempfile, tpukit
from tpukit.training import determinism
config = tpukit.RunConfig(dataset="digits", model="mlp", epochs=2, batch_size=32, backend="jax",
                          logdir=tempfile.mkdtemp())
a, b = tpukit.train(config), tpukit.train(config)
loaded = "tensorflow" in sys.modules
determinism.set_seed(3)
import tensorflow as tf
first = float(tf.random.uniform(()))
determinism.set_seed(3)
print(json.dumps({"status": [a.status, b.status], "same": a.fingerprint == b.fingerprint, "tf_loaded": loaded,
                  "tf_seeded": first == float(tf.random.uniform(()))}))
""")
    assert out == {"status": ["completed", "completed"], "same": True, "tf_loaded": False, "tf_seeded": True}


def test_both_feeders_give_the_same_batches_on_jax_fake_free():
    """The NumPy feeder (no TensorFlow) and tf.data feed identical batches: one definition of the order."""
    out = _python_with("""
import json, numpy as np
from tpukit.data import pipeline
from tpukit.data import sources
part = sources.Arrays({"a": np.arange(100 * 3).reshape(100, 3), "b": np.arange(100)}, np.arange(100) % 7)
tf_batches = [(x["a"].numpy().tolist(), y.numpy().tolist()) for x, y in
              pipeline.train_feed(part, feeder="tf.data", global_batch=16, seed=3, epochs=3, initial_epoch=1)]
feed = pipeline.train_feed(part, feeder="numpy", global_batch=16, seed=3, epochs=3, initial_epoch=1)
np_batches = [(feed[i][0]["a"].tolist(), feed[i][1].tolist()) for i in range(len(feed))]
print(json.dumps({"same": tf_batches == np_batches, "n": len(np_batches)}))
""")
    assert out == {"same": True, "n": 12}


def test_the_panel_connects_and_trains_with_the_backend_its_config_names():
    """RunConfig(backend="jax") in a fresh kernel: Connect and Train use JAX (the panel used to connect TensorFlow)."""
    out = _python_with("""
import json, tpukit
from panel_support import headless_panel
panel = headless_panel(dict(backend="jax", replicas=8, dataset="digits", model="mlp", epochs=1, batch_size=16,
                            logdir=__import__("tempfile").mkdtemp()))
runtime = panel.connect()
result = panel.train(wait=True)
print(json.dumps({"backend": runtime.backend, "replicas": runtime.replicas, "status": result.status,
                  "trained_on": result.config["backend"]}))
""")
    assert out == {"backend": "jax", "replicas": 8, "status": "completed", "trained_on": "jax"}


STEPS_PER_EXECUTION_ON_JAX = """
import json, sys, tpukit
runtime = tpukit.connect(backend="jax", replicas=8)
out = {}
for spe in ("auto", 1, 20, 40):  # digits, batch 4 x 8: 40 steps per epoch
    r = tpukit.train(tpukit.RunConfig(dataset="digits", model="mlp", epochs=2, batch_size=4, deterministic=True,
                                      steps_per_execution=spe, logdir=sys.argv[1]), runtime)
    out[str(spe)] = {"status": r.status, "epochs": r.epochs_done, "resolved": r.config["steps_per_execution"],
                     "notes": [n for n in r.notes if n.startswith("steps_per_execution")],
                     "fingerprint": r.fingerprint, "loss": r.history["loss"], "step_ms": r.step_time_ms}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_steps_per_execution_on_jax_8_devices_trains_the_same_weights(tmp_path):
    """Checked: Keras 3.15 on JAX runs several steps per call under DataParallel over 8 simulated devices (no refusal
    there); the steps are the same, so the weights are bitwise those of one step per call. On the CPU auto runs
    the mlp's sub-millisecond steps 20 per call (the largest divisor of 40 up to 32)."""
    out = _python_with(STEPS_PER_EXECUTION_ON_JAX.replace("sys.argv[1]", repr(str(tmp_path))))
    assert out["auto"]["resolved"] == 20
    assert out["auto"]["notes"][0].startswith("steps_per_execution: auto → 20 on the CPU, where a step takes")
    for spe in ("1", "20", "40"):
        assert out[spe]["status"] == "completed" and out[spe]["epochs"] == 2, out[spe]
        assert out[spe]["resolved"] == int(spe) and not out[spe]["notes"] and out[spe]["step_ms"] > 0
        assert out[spe]["fingerprint"] == out["auto"]["fingerprint"] and out[spe]["loss"] == out["auto"]["loss"]


LEAN_ON_JAX = """
import json, sys, threading, time, tempfile, tpukit
runtime = tpukit.connect(backend="jax", replicas=REPLICAS)
import keras

class WhereStepsEnd(keras.callbacks.Callback):
    async_safe = True  # if every other callback is too, Keras runs step hooks in its thread pool

    def __init__(self):
        super().__init__()
        self.threads = set()

    def on_train_batch_end(self, batch, logs=None):
        self.threads.add(threading.current_thread() is threading.main_thread())

logdir = tempfile.mkdtemp()
config = tpukit.RunConfig(dataset="digits", model="mlp", epochs=3, batch_size=16, precision="float32",
                          deterministic=True, logdir=logdir)
probe = WhereStepsEnd()
first = tpukit.train(config, runtime, callbacks=[probe])

# Stop: set during the second epoch, at its 6th step; the steps after it are counted, not timed.
stop = threading.Event()

class StopInEpoch2(keras.callbacks.Callback):
    epoch, after_stop = 0, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 1 and batch == 5:
            threading.Thread(target=stop.set).start()  # from another thread, as the panel's Stop button
        elif stop.is_set():
            self.after_stop += 1

stopper = StopInEpoch2()
halted = tpukit.train(config.replace(steps_per_execution=1), runtime, callbacks=[stopper], stop=stop)
resumed = tpukit.resume(halted.run_dir, runtime)
import numpy as np
poisoned = np.random.default_rng(0).normal(size=(512, 64)).astype("float32")
poisoned[300:] = np.nan  # XLA's CPU kernels keep a huge learning rate's loss finite here; a NaN input is not
dense = lambda: keras.Sequential([keras.Input((64,)), keras.layers.Dense(10, activation="softmax")])
nan = tpukit.train(config.replace(epochs=1), runtime, model=dense, data=(poisoned, np.arange(512) % 10))
print(json.dumps({"strategy": type(runtime.strategy).__name__, "compiles": first.compiles,
                  "compile_s": first.compile_s, "step_hooks_on_main_thread": sorted(probe.threads),
                  "halted": halted.status, "after_stop": stopper.after_stop, "halted_epochs": halted.epochs_done, "resumed": resumed.status,
                  "resumed_compiles": resumed.compiles, "nan": [nan.status, nan.message],
                  "json": json.load(open(first.run_dir + "/result.json"))["compiles"]}))
"""


@pytest.mark.slow
def test_one_device_jax_runs_lean_one_compile_async_step_hooks_and_stop_and_nan_still_work():
    """Issue 18 on one device (Colab's v5e-1): no keras.distribution (DataParallel over one device compiled
    train_step 3 times and ran at 0.72); tpukit's step hooks are async_safe, so Keras never waits for a step's
    loss between steps; Stop and the NaN check still work from the worker threads."""
    out = _python_with(LEAN_ON_JAX.replace("REPLICAS", "1"))
    assert out["strategy"] == "OneDevice"
    assert out["compiles"] == 1 and out["json"] == 1 and out["compile_s"] > 0
    assert out["step_hooks_on_main_thread"] == [False]  # every step hook ran in Keras' thread pool
    assert out["halted"] == "stopped" and out["halted_epochs"] == 1 and out["after_stop"] <= 2, out
    assert out["resumed"] == "completed" and out["resumed_compiles"] == 1
    assert out["nan"][0] == "failed" and out["nan"][1].startswith("loss became NaN at step "), out["nan"]


def test_jax_on_8_devices_compiles_train_step_once_in_a_3_epoch_run():
    out = _python_with("""
import json, tempfile, tpukit
runtime = tpukit.connect(backend="jax", replicas=8)
r = tpukit.train(tpukit.RunConfig(dataset="digits", model="mlp", epochs=3, batch_size=8, logdir=tempfile.mkdtemp(),
                                  steps_per_execution=1), runtime)
print(json.dumps({"strategy": type(runtime.strategy).__name__, "compiles": r.compiles, "status": r.status}))
""")
    assert out == {"strategy": "DataParallel", "compiles": 1, "status": "completed"}
