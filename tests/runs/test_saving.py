"""The trained model comes back: result.model, the user's own object, tpukit.load, export, init_from.

TensorFlow runs in this process; JAX runs in fresh processes (Keras fixes its
backend at import). Predictions are compared after a load in a fresh process
and after plain `keras.saving.load_model` of the exported file.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest

import tpukit
from tpukit.models import modeling
from tpukit.runs import directory, records
from tpukit.runs import saving
from tpukit.data import sources
from tpukit.config import ConfigError, RunConfig
from tpukit.training.api import train
from conftest import REPO, run_cli
from usermodels import SavableNet, images, savable_net, user_cnn

SPEC = sources.DataSpec((32, 32, 3), "uint8", (), "int32", 4, None)


def _config(tmp_path, **changes):
    return RunConfig(**{"epochs": 1, "batch_size": 32, "logdir": str(tmp_path / "runs"), "deterministic": True,
                        **changes})


def _fresh(code, backend="tensorflow", timeout=240):
    """Run `code` in a fresh Python process (the tests folder importable); its last stdout line is JSON."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "KERAS_BACKEND": backend,
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- result.model and the user's own object --------------------------------------------------------------------

def test_a_built_model_is_trained_in_place_said_in_one_line_and_is_result_model(tmp_path):
    x, y = images(256)
    model = user_cnn(SPEC)
    before = [w.copy() for w in model.get_weights()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = train(_config(tmp_path), model=model, data=(x, y))
    notes = [w for w in caught if issubclass(w.category, modeling.ModelNote)]
    assert len(notes) == 1 and issubclass(notes[0].category, modeling.TrainedInPlace)
    assert "\n" not in str(notes[0].message) and "in place" in str(notes[0].message)
    assert result.status == "completed" and result.model is model
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))  # the user's object trained
    assert result.fingerprint == tpukit.fingerprint(model)
    # usable outside the run's scope
    assert model.predict(x[:4], verbose=0).shape == (4, 4)
    assert set(model.evaluate(x[:64], y[:64], verbose=0, return_dict=True)) >= {"loss", "accuracy"}
    model.save(tmp_path / "mine.keras")
    assert not {"_model", "model_slot"} & set(json.loads(Path(result.run_dir, "result.json").read_text()))  # never in the record


def test_under_mirrored_strategy_a_model_built_outside_it_is_cloned_and_said_so(tmp_path):
    x, y = images(256)
    model = user_cnn(SPEC)
    before = [w.copy() for w in model.get_weights()]
    with pytest.warns(modeling.ClonedModelWarning, match=r"MirroredStrategy over 2 replicas.*result\.model"):
        result = train(_config(tmp_path, replicas=2, batch_size=16), model=model, data=(x, y))
    assert result.model is not model and all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert result.model.predict(x[:4], verbose=0).shape == (4, 4)  # outside the strategy's scope
    assert result.model.evaluate(x[:32], y[:32], verbose=0, return_dict=True)["loss"] > 0


def test_a_model_built_inside_the_strategys_scope_is_trained_in_place(tmp_path):
    x, y = images(256)
    runtime = tpukit.connect(replicas=2)
    with runtime.strategy.scope():
        model = user_cnn(SPEC)
    with pytest.warns(modeling.TrainedInPlace):
        result = train(_config(tmp_path, replicas=2, batch_size=16), runtime, model=model, data=(x, y))
    assert result.model is model


# ---- load, export: zoo, functional, subclassed ----------------------------------------------------------------

def test_zoo_run_loads_in_a_fresh_process_and_exports_float32_keras_and_saved_model(tmp_path):
    result = train(_config(tmp_path, model="mlp", dataset="digits", precision="mixed_bfloat16"))
    sample = np.random.default_rng(0).integers(0, 17, (6, 8, 8, 1)).astype("uint8")
    np.save(tmp_path / "x.npy", sample)
    expected = result.model.predict(sample, verbose=0)
    exported = result.export(tmp_path / "out" / "mlp.keras")
    assert exported.keras_path.endswith("mlp.keras") and Path(exported.saved_model, "saved_model.pb").is_file()
    got = _fresh(f"""
import json, numpy as np, keras, tpukit
x = np.load({str(tmp_path / 'x.npy')!r})
run = tpukit.load({result.run_dir!r})
loaded = run.model.predict(x, verbose=0)
plain = keras.saving.load_model({exported.keras_path!r})
print(json.dumps({{"loaded": loaded.tolist(), "plain": plain.predict(x, verbose=0).tolist(),
                  "policy": keras.config.dtype_policy().name, "history": sorted(run.history),
                  "epochs": run.epochs_done, "model": run.config["model"], "type": type(run).__name__,
                  "layer_policies": sorted({{l.dtype_policy.name for l in plain.layers}})}}))
""")
    assert np.array_equal(np.array(got["loaded"], "float32"), expected)  # same weights, same policy: equal
    assert got["policy"] == "float32" and got["layer_policies"] == ["float32"]  # float32-safe
    np.testing.assert_allclose(np.array(got["plain"]), expected, atol=2e-3)  # bf16 compute vs float32
    assert got["epochs"] == 1 and got["model"] == "mlp" and "loss" in got["history"] and got["type"] == "RunResult"


@pytest.mark.parametrize("kind", ["functional", "subclassed"])
def test_users_model_loads_in_a_fresh_process_and_its_export_predicts_the_same(tmp_path, kind):
    x, y = images(256)
    model = user_cnn(SPEC) if kind == "functional" else SavableNet(4)
    factory = "usermodels:user_cnn" if kind == "functional" else "usermodels:savable_net"
    with pytest.warns(modeling.TrainedInPlace):
        result = train(_config(tmp_path, precision="float32"), model=model, data=(x, y))
    np.save(tmp_path / "x.npy", x[:8])
    expected = result.model.predict(x[:8], verbose=0)
    exported = result.export(tmp_path / "export")
    assert Path(exported.keras_path).name == "model.keras" and "load_model" in exported.note
    got = _fresh(f"""
import json, numpy as np, keras, tpukit, usermodels
from tpukit import registry
x = np.load({str(tmp_path / 'x.npy')!r})
loaded = tpukit.load({result.run_dir!r}, model=registry.entry("model", {factory!r}).target).model
plain = keras.saving.load_model({exported.keras_path!r})
print(json.dumps({{"loaded": loaded.predict(x, verbose=0).tolist(), "plain": plain.predict(x, verbose=0).tolist()}}))
""")
    assert np.array_equal(np.array(got["loaded"], "float32"), expected)
    assert np.array_equal(np.array(got["plain"], "float32"), expected)


def test_a_stopped_run_loads_its_last_whole_epoch(tmp_path):
    from run_support import CallAt

    x, y = images(256)
    import threading

    stop = threading.Event()
    config = _config(tmp_path, epochs=3, precision="float32", validation_split=None,
                     steps_per_execution=1)  # a stop at a step
    result = train(config, model=savable_net, data=(x, y), stop=stop, callbacks=[CallAt(12, stop.set)])
    assert result.status == "stopped" and result.epochs_done == 1  # 8 steps an epoch: stopped in the second
    path, what = saving.weights_file(result.run_dir)
    assert "last whole epoch (1" in what and path.parent.name == "backup"
    loaded = tpukit.load(result.run_dir, model=savable_net).model
    assert tpukit.fingerprint(loaded) != result.fingerprint  # not the weights of the cut epoch
    # the loaded result (no model kept in memory) rebuilds it too
    assert records.load(result.run_dir).status == "stopped"


def test_a_model_handed_over_as_an_object_says_what_to_pass_to_load(tmp_path):
    x, y = images(256)
    result = train(_config(tmp_path), model=user_cnn, data=(x, y))
    assert tpukit.load(result.run_dir).config["model"] == "usermodels:user_cnn"  # an import path: rebuilds alone
    model = user_cnn(SPEC)
    with pytest.warns(modeling.TrainedInPlace):
        mine = train(_config(tmp_path), model=model, data=(x, y))
    with pytest.raises(modeling.ModelError, match=r"tpukit\.load\(run_dir, model=") as e:
        tpukit.load(mine.run_dir).model
    assert "\n" not in str(e.value)


# ---- init_from ---------------------------------------------------------------------------------------------------

def test_init_from_starts_from_a_runs_weights_recorded_and_deterministic(tmp_path):
    x, y = images(256)
    first = train(_config(tmp_path), model=user_cnn, data=(x, y))
    config = _config(tmp_path, init_from=first.run_dir, learning_rate=1e-4)
    a = train(config, model=user_cnn, data=(x, y))
    b = train(config, model=user_cnn, data=(x, y))
    assert a.fingerprint == b.fingerprint and a.fingerprint != first.fingerprint
    assert a.config["init_from"] == first.run_dir
    assert json.loads(Path(a.run_dir, "config.json").read_text())["init_from"] == first.run_dir
    assert any(n.startswith("init_from: started from the final weights") for n in a.notes)
    scratch = train(_config(tmp_path, learning_rate=1e-4), model=user_cnn, data=(x, y))
    assert scratch.fingerprint != a.fingerprint  # the weights did come from the run


def test_init_from_weights_that_do_not_fit_fail_in_one_line_before_a_run_dir(tmp_path):
    x, y = images(256)
    first = train(_config(tmp_path), model=user_cnn, data=(x, y))
    before = set(Path(tmp_path / "runs").iterdir())
    with pytest.raises(modeling.ModelError, match=r"^RunConfig\.init_from: .*do not fit.*Received: init_from=") as e:
        train(_config(tmp_path, init_from=first.run_dir), model=savable_net, data=(x, y))
    assert "\n" not in str(e.value) and set(Path(tmp_path / "runs").iterdir()) == before
    with pytest.raises(ConfigError, match="init_from"):
        RunConfig(init_from="")


def test_weights_of_another_width_name_the_layer_and_both_shapes_in_one_short_line(tmp_path):
    def mlp(width):
        return lambda: keras.Sequential([keras.Input((4,)), keras.layers.Dense(width, name="hidden"),
                                         keras.layers.Dense(2, name="head")])

    x, y = np.random.default_rng(0).normal(size=(64, 4)).astype("float32"), np.arange(64) % 2
    config = RunConfig(epochs=1, batch_size=16, logdir=str(tmp_path), validation_split=None, precision="float32")
    first = train(config, model=mlp(8), data=(x, y))
    with pytest.raises(modeling.ModelError) as e:
        tpukit.load(first.run_dir, model=mlp(16)).model
    message = str(e.value)
    assert "layer hidden: kernel (4, 16) here, (4, 8) in the run" in message and len(message) < 240, message
    assert "variable.assign" not in message


def test_bad_input_gets_one_line(tmp_path):
    not_a_run = tmp_path / "nothing"
    not_a_run.mkdir()
    with pytest.raises(directory.RunDirError, match="not a tpukit run directory") as e:
        tpukit.load(not_a_run)
    assert "\n" not in str(e.value)
    empty = directory.new_run_dir(str(tmp_path / "runs"), "empty")
    directory.write_json(empty / "config.json", RunConfig().to_dict())
    records.save_result(records.RunResult(run_dir=str(empty), status="stopped", config=RunConfig().to_dict()))
    with pytest.raises(directory.RunDirError, match="holds no weights: the run stopped before its first whole epoch"):
        tpukit.load(empty)
    with pytest.raises(directory.RunDirError, match="holds no weights"):
        train(_config(tmp_path, init_from=str(empty)), model=user_cnn, data=images(256))
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    (tmp_path / "a-file").write_text("")
    with pytest.raises(saving.ExportError, match=r"cannot export to .*a-file/m\.keras: .* is not a writable") as e:
        saving.export(model, tmp_path / "a-file" / "m.keras")
    assert "\n" not in str(e.value)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if not os.access(locked, os.W_OK):  # as root a read-only folder is still writable: the file case above
            with pytest.raises(saving.ExportError, match=r"cannot export to .*not a writable directory"):
                saving.export(model, locked / "m.keras")
    finally:
        locked.chmod(0o700)
    with pytest.raises(saving.ExportError, match="it is a directory"):
        (tmp_path / "d.keras").mkdir()
        saving.export(model, tmp_path / "d.keras")


def test_cli_export_and_init_from(tmp_path):
    x, y = images(256)
    first = train(_config(tmp_path, model="mlp", dataset="digits"))
    out = run_cli("export", first.run_dir, str(tmp_path / "cli.keras"))
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stdout and (tmp_path / "cli.keras").is_file() and (tmp_path / "cli_saved_model").is_dir()
    bad = run_cli("export", str(tmp_path), str(tmp_path / "x.keras"))
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "not a tpukit run directory" in bad.stderr
    for form, says in (("onnx", "--format: expected one of keras, preset, hf. Received: 'onnx'"),
                       ("hf", "format='hf' writes a KerasHub model, and this is a Functional: use format='keras'.")):
        refused = run_cli("export", first.run_dir, str(tmp_path / form), "--format", form)
        assert refused.returncode in (1, 2) and says in refused.stderr and refused.stderr.strip().count("\n") == 0, (
            refused.stderr
        )
        assert not (tmp_path / form).exists()
    args = ["train", "--model", "mlp", "--dataset", "digits", "--epochs", "1", "--deterministic", "--json",
            "--logdir", str(tmp_path / "cli"), "--init-from", first.run_dir]
    runs = [run_cli(*args) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:]
    a, b = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert a["fingerprint"] == b["fingerprint"]
    assert json.loads(Path(a["run_dir"], "config.json").read_text())["init_from"] == first.run_dir
    wrong = run_cli("train", "--model", "cnn", "--dataset", "digits", "--epochs", "1", "--logdir",
                    str(tmp_path / "cli"), "--init-from", first.run_dir)
    error = [line for line in wrong.stderr.splitlines() if line.startswith("python -m tpukit: error:")]
    assert wrong.returncode == 2 and len(error) == 1 and "do not fit" in error[0] and "expected" in error[0]


# ---- JAX ---------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_on_jax_the_users_object_trains_in_place_loads_in_a_fresh_process_and_exports(tmp_path):
    pytest.importorskip("jax")
    trained = _fresh(f"""
import json, warnings, numpy as np, tpukit
runtime = tpukit.connect(backend="jax", replicas=8)
import keras, usermodels
from tpukit.models import modeling
from tpukit.data import sources
x, y = usermodels.images(256)
spec = sources.DataSpec((32, 32, 3), "uint8", (), "int32", 4, None)
config = tpukit.RunConfig(epochs=1, batch_size=8, deterministic=True, precision="float32",
                          logdir={str(tmp_path / 'runs')!r})
out = {{}}
for kind, model in (("functional", usermodels.user_cnn(spec)), ("subclassed", usermodels.SavableNet(4))):
    model(x[:2])
    before = model.get_weights()[0].copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tpukit.train(config, runtime, model=model, data=(x, y))
    exported = result.export({str(tmp_path)!r} + "/" + kind)
    out[kind] = dict(run_dir=result.run_dir, same=result.model is model,
                     changed=not np.array_equal(before, model.get_weights()[0]),
                     in_place=any(issubclass(w.category, modeling.TrainedInPlace) for w in caught),
                     predicted=result.model.predict(x[:8], verbose=0).tolist(), keras_path=exported.keras_path,
                     saved_model=exported.saved_model, note=exported.note)
zoo = tpukit.train(config.replace(model="mlp", dataset="digits"), runtime)
sample = np.zeros((4, 8, 8, 1), "uint8") + 3
out["zoo"] = dict(run_dir=zoo.run_dir, predicted=zoo.model.predict(sample, verbose=0).tolist(),
                  keras_path=zoo.export({str(tmp_path / 'zoo.keras')!r}).keras_path)
print(json.dumps(out))
""", backend="", timeout=400)
    for kind in ("functional", "subclassed"):
        got = trained[kind]
        assert got["same"] and got["changed"] and got["in_place"]
        assert got["saved_model"] is None and "on JAX no SavedModel" in got["note"]
    for backend in ("jax", "tensorflow"):  # a fresh JAX process, and plain Keras on TensorFlow
        loaded = _fresh(f"""
import json, numpy as np, keras, tpukit, usermodels
x, y = usermodels.images(256)
runs = {json.dumps({k: trained[k]['run_dir'] for k in trained})}
paths = {json.dumps({k: trained[k]['keras_path'] for k in trained})}
factories = {{"functional": usermodels.user_cnn, "subclassed": usermodels.savable_net, "zoo": None}}
sample = np.zeros((4, 8, 8, 1), "uint8") + 3
out = {{}}
for kind, run_dir in runs.items():
    data = sample if kind == "zoo" else x[:8]
    out[kind] = dict(loaded=tpukit.load(run_dir, model=factories[kind]).model.predict(data, verbose=0).tolist(),
                     plain=keras.saving.load_model(paths[kind]).predict(data, verbose=0).tolist())
print(json.dumps(out))
""", backend=backend, timeout=300)
        for kind in ("functional", "subclassed", "zoo"):
            expected = np.array(trained[kind]["predicted"])
            np.testing.assert_allclose(np.array(loaded[kind]["loaded"]), expected, atol=1e-6, err_msg=backend)
            np.testing.assert_allclose(np.array(loaded[kind]["plain"]), expected, atol=1e-6, err_msg=backend)
