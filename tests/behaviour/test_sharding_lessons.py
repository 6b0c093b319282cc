"""The sharding lessons of notebooks 01 and 07 split each batch over 8 devices: measured from the arrays, not the text.

Each notebook runs in a fresh kernel with Keras on JAX, TPUKIT_SMOKE=1 and TPUKIT_SOLUTIONS=1, and without the
8 CPU devices the test process gets (the notebook must ask for them itself, as on Colab). One cell added after the
notebook's setup records every batch Keras' JAX trainer hands to the devices (`_distribute_data`, where `fit`,
`evaluate` and `predict` lay a batch out under the active distribution, or put it whole on one device with none),
with the cell it ran in; one cell added at the end prints, as JSON, the shards of those batches and of the
lessons' own arrays and weights. A `fit` outside the distribution's scope feeds one whole batch to one device, and
fails here.
"""

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from conftest import execute_notebook

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
DEVICES = 8
CELL_TIMEOUT_S = 300

# Found, not imported: this process never imports Keras (the kernel does, with KERAS_BACKEND=jax).
_missing = [m for m in ("jax", "keras", "jupytext", "nbclient", "ipykernel") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"needs {', '.join(_missing)}")

# Runs in the kernel right after the notebook's setup cell (Keras is imported by then; JAX may have started).
RECORDER = r'''
import hashlib as _hashlib
import jax as _jax
import keras.src.backend.jax.trainer as _trainer

_FED = []  # one entry per batch Keras laid out: the cell it ran in, its shape and its shards
_CELL = [None]


def _tpukit_cell(info):
    _CELL[0] = _hashlib.sha1(info.raw_cell.encode()).hexdigest()


get_ipython().events.register("pre_run_cell", _tpukit_cell)


def _shards(array):
    """Each addressable shard: its device and the [start, stop) it holds of every dimension."""
    return [{"device": shard.device.id, "shape": list(shard.data.shape),
             "index": [[sl.start or 0, array.shape[d] if sl.stop is None else sl.stop]
                       for d, sl in enumerate(shard.index)]}
            for shard in array.addressable_shards]


_tpukit_distribute = _trainer._distribute_data


def _tpukit_recording(data, *args, **kwargs):
    out = _tpukit_distribute(data, *args, **kwargs)
    if len(_FED) < 100:
        x = _jax.tree_util.tree_leaves(out)[0]
        _FED.append({"cell": _CELL[0], "shape": list(x.shape), "shards": _shards(x)})
    return out


_trainer._distribute_data = _tpukit_recording
'''

PROBE_01 = r"""
import json as _json
_kernel = model.weights[0].value
print("PROBE " + _json.dumps({
    "fed": _FED, "global_batch": GLOBAL_BATCH,
    "first": {"shape": list(first.shape), "shards": _shards(first)},
    "kernel": {"shape": list(_kernel.shape), "shards": _shards(_kernel)},
}))
"""

PROBE_07 = r"""
import json as _json
_dp = data_parallel["model"].weights[0].value
_hidden = model_parallel["model"].get_layer("hidden").kernel.value
print("PROBE " + _json.dumps({
    "fed": _FED,
    "images": {"shape": list(images.shape), "shards": _shards(images)},
    "dp_kernel": {"shape": list(_dp.shape), "shards": _shards(_dp)},
    "hidden": {"shape": list(_hidden.shape), "spec": [str(a) for a in _hidden.sharding.spec],
               "shards": _shards(_hidden)},
}))
"""


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "COLAB_TPU_ADDR", "TPU_NAME")}
    env.update(
        KERAS_BACKEND="jax",
        TPUKIT_SMOKE="1",
        TPUKIT_SOLUTIONS="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
        MPLBACKEND="Agg",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags)  # a fresh runtime's one CPU device: the notebook asks for its 8
    return env


def _digest(source):
    return hashlib.sha1(source.encode()).hexdigest()


def _run(stem, last_marker, probe, kernel_dir, tmp_path):
    """Run the notebook up to the code cell containing `last_marker`, with the recorder and the probe; the probe's
    JSON and the digests of the notebook's code cells."""
    import jupytext
    from nbformat.v4 import new_code_cell

    notebook = jupytext.read(NOTEBOOKS / f"{stem}.py")
    notebook.cells = [c for c in notebook.cells if "tf" not in c.metadata.get("tags", [])]  # the TPU track's cells
    code = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    last = next(i for i in code if last_marker in notebook.cells[i].source)
    cells = notebook.cells[: last + 1]
    cells.insert(code[1] + 1, new_code_cell(RECORDER))
    cells.append(new_code_cell(probe))
    notebook.cells = cells
    execute_notebook(notebook, kernel_dir, tmp_path, _env(), CELL_TIMEOUT_S)
    text = "".join(o.get("text", "") for o in notebook.cells[-1].outputs if o.get("output_type") == "stream")
    line = next(l for l in text.splitlines() if l.startswith("PROBE "))
    return json.loads(line[len("PROBE ") :]), {c.source: _digest(c.source) for c in cells if c.cell_type == "code"}


def _assert_split(array, ways, dim=0, what="the batch"):
    """8 shards on 8 devices; along `dim`, `ways` distinct ranges of equal size that tile the whole dimension, each
    held by 8 / ways devices; every other dimension whole."""
    shards, size = array["shards"], array["shape"][dim]
    assert len(shards) == DEVICES and len({s["device"] for s in shards}) == DEVICES, (
        f"{what}: {len(shards)} shard(s) on {len({s['device'] for s in shards})} device(s), not {DEVICES}: {shards}"
    )
    ranges = sorted({tuple(s["index"][dim]) for s in shards})
    assert len(ranges) == ways and all(stop - start == size // ways for start, stop in ranges), (
        f"{what}: {size} along dimension {dim} should be split {ways} ways of {size // ways}: {ranges}"
    )
    assert ranges[0][0] == 0 and ranges[-1][1] == size and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), (
        f"{what}: the slices do not tile 0..{size}: {ranges}"
    )
    for s in shards:
        assert s["shape"][dim] == size // ways, f"{what}: a device holds {s['shape']}"
        others = [n for d, n in enumerate(array["shape"]) if d != dim]
        assert [n for d, n in enumerate(s["shape"]) if d != dim] == others, f"{what}: a shard {s['shape']} is cut"
    for start, stop in ranges:
        holders = [s for s in shards if tuple(s["index"][dim]) == (start, stop)]
        assert len(holders) == DEVICES // ways, f"{what}: rows {start}..{stop} on {len(holders)} devices"


def _fed_in(probe, digests, marker):
    digest = next(d for source, d in digests.items() if marker in source)
    fed = [entry for entry in probe["fed"] if entry["cell"] == digest]
    assert fed, (
        f"Keras laid out no batch in the cell with {marker!r}: did fit run outside the distribution's scope? "
        "(With no distribution, Keras on a CPU hands it the NumPy batch as it is.)"
    )
    return fed


@pytest.mark.slow
def test_notebook_01_splits_every_batch_keras_trains_on(kernel_dir, tmp_path):
    probe, digests = _run("01_connect_and_distribute", "model.fit(", PROBE_01, kernel_dir, tmp_path)
    global_batch = probe["global_batch"]
    assert global_batch % DEVICES == 0
    _assert_split(probe["first"], DEVICES, what="the lesson's first batch")
    fed = _fed_in(probe, digests, "model.fit(")
    for entry in fed:  # fit, evaluate and predict: every batch split 8 ways, global_batch / 8 rows on each device
        assert entry["shape"][0] == global_batch, entry["shape"]
        _assert_split(entry, DEVICES, what="a batch Keras fed the model")
    kernel = probe["kernel"]  # built inside the scope: a whole copy on each of the 8 devices
    assert len(kernel["shards"]) == DEVICES and all(s["shape"] == kernel["shape"] for s in kernel["shards"]), kernel


@pytest.mark.slow
def test_notebook_07_data_and_model_parallel_layouts(kernel_dir, tmp_path):
    probe, digests = _run("07_jax_and_tpu_scale_out", 'run_on_jax("model_parallel.py"', PROBE_07, kernel_dir, tmp_path)
    _assert_split(probe["images"], DEVICES, what="the lesson's images")
    for entry in _fed_in(probe, digests, 'run_on_jax("data_parallel.py"'):
        _assert_split(entry, DEVICES, what="a batch DataParallel fed")
    dp = probe["dp_kernel"]
    assert len(dp["shards"]) == DEVICES and all(s["shape"] == dp["shape"] for s in dp["shards"]), dp
    # ModelParallel over a 2 x 4 mesh ("batch", "model"): each batch split 2 ways, the hidden kernel's columns 4 ways
    for entry in _fed_in(probe, digests, 'run_on_jax("model_parallel.py"'):
        _assert_split(entry, 2, what="a batch ModelParallel fed")
    hidden = probe["hidden"]
    assert hidden["spec"] == ["None", "model"], hidden["spec"]
    _assert_split(hidden, 4, dim=1, what="the hidden kernel's columns")
