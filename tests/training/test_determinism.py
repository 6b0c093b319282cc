"""Seeds, op determinism and fingerprints."""

import numpy as np

from tpukit.training import determinism


def test_fingerprint_is_short_stable_and_bit_sensitive():
    weights = [np.arange(6, dtype="float32").reshape(2, 3), np.ones(3, dtype="float32")]
    fp = determinism.fingerprint(weights)
    assert len(fp) == 16 and fp == determinism.fingerprint([w.copy() for w in weights])
    nudged = [weights[0].copy(), weights[1].copy()]
    nudged[1][0] = np.nextafter(np.float32(1), np.float32(2))  # one bit
    assert determinism.fingerprint(nudged) != fp
    assert determinism.fingerprint([weights[0].astype("float64"), weights[1]]) != fp


def test_same_seed_same_initial_weights():
    import keras

    def build():
        determinism.set_seed(7)
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(2)])

    assert determinism.fingerprint(build()) == determinism.fingerprint(build())
    determinism.set_seed(8)
    other = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(2)])
    assert determinism.fingerprint(other) != determinism.fingerprint(build())


def test_setup_says_what_holds():
    text = determinism.setup(3, deterministic=True)
    assert "op determinism on" in text and determinism.op_determinism_enabled()
    # Once on, TensorFlow cannot turn it off: setup says so instead of pretending.
    assert "cannot turn it off" in determinism.setup(3, deterministic=False)


def test_op_determinism_turned_on_by_the_user_is_seen():
    """A user's own tf.config.experimental.enable_op_determinism() counts: XLA stays off, the panel says so."""
    import subprocess
    import sys

    code = (
        "import tensorflow as tf\n"
        "from tpukit.training import determinism\n"
        "before = determinism.op_determinism_enabled()\n"
        "tf.config.experimental.enable_op_determinism()\n"
        "print(before, determinism.op_determinism_enabled())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True"], done.stdout


def test_on_a_runtime_whose_determinism_is_xlas_setup_seeds_keras_and_switches_nothing_on():
    """On JAX the runtime says determinism is XLA's (`determinism_by_xla`): setup neither turns TensorFlow's op
    determinism on nor imports TensorFlow to seed it, and says where determinism comes from."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, sys, tpukit\n"
        "runtime = tpukit.connect(backend='jax')\n"
        "from tpukit.training import determinism\n"
        "text = determinism.setup(3, True, runtime)\n"
        "print(json.dumps({'text': text, 'by_xla': runtime.determinism_by_xla, "
        "'tf': 'tensorflow' in sys.modules, 'op': determinism.op_determinism_enabled()}))\n"
    )
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "text": "seed 3 set; XLA ops are deterministic here (GPU: set at connect): same config, same weights.",
        "by_xla": True,
        "tf": False,
        "op": False,
    }
