"""tpukit.observe.profiling: real `fit` runs profiled into tmp dirs, read back with xprof and TensorBoard."""

import gzip
import html
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest

from conftest import REPO
from tpukit.observe import profiling
from tpukit.observe import tensorboard

STEPS_PER_EPOCH = 10
EPOCHS = 2


@pytest.fixture(scope="module")
def tf():
    import tensorflow

    return tensorflow


def _fit(logdir, start, stop, extra=()):
    """Train a tiny model for 2 epochs of 10 steps with a ProfileCallback; return the callback."""
    import keras

    rng = np.random.default_rng(0)
    x = rng.random((16 * STEPS_PER_EPOCH, 8), dtype=np.float32)
    y = rng.integers(0, 3, 16 * STEPS_PER_EPOCH)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callback = profiling.ProfileCallback(str(logdir), start, stop)
    try:
        model.fit(x, y, batch_size=16, epochs=EPOCHS, callbacks=[callback, *extra], verbose=0)
    finally:
        callback.close()  # as the trainer does
    return callback


def _step_numbers(summary):
    return sorted(int(name.rsplit(" ", 1)[-1]) for name, _ in summary.steps)


def _profiler_running(tf):
    from tensorflow.python.profiler import profiler_v2  # the public API has no "is running"

    return getattr(profiler_v2, "_profiler", None) is not None


@pytest.fixture(autouse=True)
def no_profiler_left_running(tf):
    yield
    if _profiler_running(tf):
        tf.profiler.experimental.stop(save=False)
        pytest.fail("test left the TensorFlow profiler running")


@pytest.fixture(scope="module")
def capture(tmp_path_factory, tf):
    """A logdir with one capture of steps 3-6 of a 20-step fit."""
    logdir = tmp_path_factory.mktemp("profiled")
    callback = _fit(logdir, 3, 6)
    return str(logdir), callback


def test_import_does_not_load_tensorflow():
    code = "import sys, tpukit.observe.profiling; assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_window_writes_one_capture_with_step_times(capture):
    logdir, callback = capture
    assert profiling.find_captures(logdir) == callback.files
    assert len(callback.files) == 1 and callback.files[0].endswith(".xplane.pb")
    assert not callback.profiling

    summary = profiling.summarize(callback.files[0])
    assert summary.path == callback.files[0]
    assert summary.step_time_ms > 0
    assert summary.step_time_ms_min <= summary.step_time_ms <= summary.step_time_ms_max
    assert len(summary.steps) >= 3 and set(_step_numbers(summary)) <= {3, 4, 5, 6}
    assert summary.top_ops and all(op.self_time_us >= 0 for op in summary.top_ops)
    assert len(summary.top_ops) <= 10
    assert summary.input_percent is None or 0 <= summary.input_percent <= 100
    text = summary.to_text()
    assert f"{summary.step_time_ms:.2f} ms" in text
    assert summary.top_ops[0].name in text
    assert json.loads(json.dumps(summary.to_dict()))["step_time_ms"] == summary.step_time_ms


def test_summarize_accepts_capture_dir_and_logdir(capture):
    logdir, callback = capture
    from_file = profiling.summarize(callback.files[0])
    assert profiling.summarize(os.path.dirname(callback.files[0])) == from_file
    assert profiling.summarize(logdir) == from_file


def test_summarize_without_capture_says_so_in_one_line_of_profile_error(tmp_path):
    """Each path that holds no capture is a ProfileError (tpukit's, exported as tpukit.ProfileError) whose one line
    names what summarize_profile expected and what it got."""
    import tpukit

    (tmp_path / "notes.txt").write_text("not a profile")
    (tmp_path / "garbage.xplane.pb").write_bytes(b"\x00not an XSpace")
    (tmp_path / "empty").mkdir()
    expected = "expected an .xplane.pb file, a capture directory (<logdir>/plugins/profile/<time>) or a logdir"
    for path, said in (
        (tmp_path / "empty", f"no profile capture under {tmp_path / 'empty'}"),
        (tmp_path / "missing", f"Received: {tmp_path / 'missing'}, which does not exist."),
        (tmp_path / "notes.txt", f"Received: {tmp_path / 'notes.txt'}, a file of another kind."),
        (tmp_path / "garbage.xplane.pb", f"{tmp_path / 'garbage.xplane.pb'}"),
        (None, "as a str or pathlib.Path. Received: None."),
    ):
        with pytest.raises(tpukit.ProfileError) as caught:
            tpukit.summarize_profile(path)
        message = str(caught.value)
        assert message.startswith("summarize_profile: ") and said in message and expected in message, message
        assert len(message.splitlines()) == 1


def test_window_across_epoch_boundary(tmp_path):
    callback = _fit(tmp_path, 8, 12)
    assert len(callback.files) == 1
    steps = _step_numbers(profiling.summarize(callback.files[0]))
    assert len(steps) >= 3 and set(steps) <= {8, 9, 10, 11, 12}
    assert min(steps) < STEPS_PER_EPOCH <= max(steps)  # steps from both epochs


def test_window_beyond_the_end_stops_at_train_end(tmp_path):
    callback = _fit(tmp_path, 16, 100)
    assert not callback.profiling
    assert len(callback.files) == 1
    steps = _step_numbers(profiling.summarize(callback.files[0]))
    assert steps and set(steps) <= {16, 17, 18, 19}


def test_interrupt_mid_window_then_close(tmp_path, tf):
    import keras

    class Interrupt(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.step = 0

        def on_train_batch_begin(self, batch, logs=None):
            if self.step == 5:  # the ProfileCallback, listed first, has entered step 5's trace
                raise KeyboardInterrupt
            self.step += 1

    interrupt = Interrupt()
    with pytest.raises(KeyboardInterrupt):
        _fit(tmp_path, 3, 8, extra=[interrupt])
    assert interrupt.step == 5
    captures = profiling.find_captures(tmp_path)
    assert len(captures) == 1
    assert set(_step_numbers(profiling.summarize(captures[0]))) <= {3, 4, 5}
    # No profiler is left running: a fresh session starts and stops.
    tf.profiler.experimental.start(str(tmp_path / "fresh"))
    tf.profiler.experimental.stop()


def test_close_is_idempotent_and_keeps_files(capture):
    _, callback = capture
    files = list(callback.files)
    callback.close()
    callback.close()
    assert callback.files == files


def test_running_profiler_is_left_alone(tmp_path, tf):
    other = tmp_path / "other"
    tf.profiler.experimental.start(str(other))
    try:
        with pytest.warns(profiling.ProfilerBusyWarning, match="already running"):
            callback = _fit(tmp_path / "mine", 3, 6)
        assert callback.files == []
        assert profiling.find_captures(tmp_path / "mine") == []
    finally:
        tf.profiler.experimental.stop()  # raises if the callback had stopped it
    assert len(profiling.find_captures(other)) == 1


@pytest.mark.parametrize(
    "start, stop, match",
    [(-1, 3, "start=-1"), (5, 2, "start=5, stop=2"), (1.0, 2, "start=1.0"), (0, True, "stop=True")],
)
def test_bad_window_raises(tmp_path, start, stop, match):
    with pytest.raises(ValueError, match=match):
        profiling.ProfileCallback(str(tmp_path), start, stop)


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url):
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    with _NO_PROXY.open(request, timeout=60) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return json.loads(body.decode("utf-8"))


@pytest.mark.slow
def test_tensorboard_profile_overview_has_step_times(capture):
    """TensorBoard's own profile overview, over HTTP, shows step times (no "No step marker observed")."""
    logdir, callback = capture
    result = tensorboard.start(logdir)
    try:
        assert isinstance(result, (tensorboard.Launched, tensorboard.Reused)), result
        assert result.url.startswith("http://127.0.0.1:")
        base = result.url + "data/plugin/profile/"
        deadline = time.monotonic() + 30
        while not (runs := _get(base + "runs")) and time.monotonic() < deadline:
            time.sleep(0.5)
        run = os.path.basename(os.path.dirname(callback.files[0]))
        assert runs == [run]
        assert "overview_page" in _get(base + "run_tools?" + urllib.parse.urlencode({"run": run}))
        hosts = _get(base + "hosts?" + urllib.parse.urlencode({"run": run, "tag": "overview_page"}))
        host = os.path.basename(callback.files[0])[: -len(".xplane.pb")]
        assert {"hostname": host} in hosts
        overview = _get(base + "data?" + urllib.parse.urlencode({"run": run, "tag": "overview_page", "host": host}))
        step_table = next(t for t in overview if "stepnum" in [c["id"] for c in t.get("cols", [])])
        assert len(step_table["rows"]) >= 3
        assert float(step_table["p"]["steptime_ms_average"]) > 0
        url = tensorboard.profile_url(result, run=callback.files[0])
        assert url.startswith(result.url + "data/plugin/profile/index.html?") and f"&run={run}&" in url
        with _NO_PROXY.open(url, timeout=60) as response:  # XProf's own page, which TensorBoard serves
            body = response.read()
            page = gzip.decompress(body) if response.headers.get("Content-Encoding") == "gzip" else body
            assert response.status == 200 and b"<app>" in page
    finally:
        if not isinstance(result, tensorboard.Failed):
            tensorboard.stop(result)


# --- the summary on both backends ---------------------------------------------

_JAX_FIT = """
import json, sys
import numpy as np
import keras
from tpukit.observe import profiling

rng = np.random.default_rng(0)
x, y = rng.random((160, 8), dtype=np.float32), rng.integers(0, 3, 160)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
callback = profiling.ProfileCallback(sys.argv[1], 3, 6)
try:
    model.fit(x, y, batch_size=16, epochs=2, callbacks=[callback], verbose=0)
finally:
    callback.close()
print(json.dumps({"backend": keras.backend.backend(), "files": callback.files}))
"""

_SUMMARIZE_WITHOUT_TF = """
import json, sys
from tpukit.observe import profiling

summary = profiling.summarize(sys.argv[1])
print(json.dumps({"tensorflow": "tensorflow" in sys.modules, "text": summary.to_text()}))
"""


def _run_python(code, *args, **env):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), **env}
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def jax_capture(tmp_path_factory):
    """A capture of steps 3-6 of a 20-step fit under Keras on JAX (CPU), made in a fresh process."""
    pytest.importorskip("jax")
    logdir = tmp_path_factory.mktemp("profiled-jax")
    out = _run_python(_JAX_FIT, logdir, KERAS_BACKEND="jax")
    assert out["backend"] == "jax" and len(out["files"]) == 1
    return out["files"][0]


_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")


def _assert_plain_and_consistent(summary):
    """No HTML, no pointer to page sections, and a verdict that follows the summary's own numbers."""
    text = summary.to_text()
    assert "<a href" not in text and not _HTML_TAG.search(text) and "&lt;" not in text and "&gt;" not in text
    assert "section" not in text.lower()
    assert "possibly" not in text.lower() and "potentially" not in text.lower()
    if summary.input_percent is None:
        assert summary.input_bound is None
        assert "Input    not measured" in text and "input-bound" not in summary.input_conclusion
        assert summary.input_verdict.startswith("not measured")
    else:
        assert summary.input_bound == (summary.input_percent >= 5.0)
        waiting = {"tf.data": "waiting for input", "trace": "fetching the next batch"}[summary.input_source]
        shown = f"{summary.input_percent:.1f}% of step time {waiting}"
        assert shown in summary.input_conclusion and shown in summary.input_verdict
        word = "input-bound" if summary.input_bound else "not input-bound"
        assert summary.input_conclusion.endswith(f": {word}.") or f": {word} (" in summary.input_conclusion
        assert summary.input_verdict.startswith(word + " (")
    assert summary.top_ops and summary.top_ops_source
    assert f"Top ops by self time ({summary.top_ops_source})" in text
    for op in summary.top_ops:
        assert op.name in text and op.self_time_us > 0 and 0 < op.self_time_percent <= 100
    assert sum(op.self_time_percent for op in summary.top_ops) <= 100.0 + 1e-6
    assert [op.self_time_us for op in summary.top_ops] == sorted(
        (op.self_time_us for op in summary.top_ops), reverse=True
    )
    return text


def test_jax_capture_summary_has_xla_ops_and_no_input_verdict_it_cannot_measure(jax_capture):
    summary = profiling.summarize(jax_capture)
    assert summary.hardware_type == "CPU_ONLY"
    assert len(summary.steps) >= 3 and set(_step_numbers(summary)) <= {3, 4, 5, 6} and summary.step_time_ms > 0
    # JAX has no tf.data in the trace (xprof reports 0% input, which measures nothing): the input is the data
    # iterator's next() calls that Python's tracer recorded inside the steps.
    assert summary.input_source == "trace" and 0 < summary.input_percent < 100
    assert summary.input_bound is (summary.input_percent >= 5.0)
    assert "fetching the next batch (the data iterator's next() calls in the trace)" in summary.input_conclusion
    # XLA:CPU ops from the host's thread lines, from the jitted train step, with the dense layers' dots.
    assert summary.top_ops_source == "XLA ops in the trace"
    assert all(re.fullmatch(r"jit_\w+/[\w.\-]+", op.path) for op in summary.top_ops), summary.top_ops
    assert any(op.path.startswith("jit_train_step/") for op in summary.top_ops)
    assert any("dot" in op.category or op.name.endswith(("dot", "dot (grad)")) for op in summary.top_ops)
    text = _assert_plain_and_consistent(summary)
    # xprof sees no op in it (the XLA ops are in the trace only) and counts them as 'All Others': no measurement.
    assert summary.other_percent is None and "Other " not in text
    assert "TensorBoard's Profile tab" in summary.recommendation  # never "next step: –"
    print(text)


def test_jax_capture_is_summarized_without_tensorflow(jax_capture):
    out = _run_python(_SUMMARIZE_WITHOUT_TF, jax_capture)
    assert out["tensorflow"] is False
    assert "Top ops by self time (XLA ops in the trace)" in out["text"] and " dense" in out["text"]


def test_tf_capture_summary_measures_input_and_lists_the_models_ops(capture):
    _, callback = capture
    summary = profiling.summarize(callback.files[0])
    # Keras on TensorFlow feeds through tf.data, which xprof measures.
    assert summary.input_percent is not None and 0 <= summary.input_percent <= 100
    assert summary.top_ops_source == "host"
    assert any("sequential" in op.path for op in summary.top_ops), summary.top_ops
    _assert_plain_and_consistent(summary)


def test_panel_html_escapes_nothing_that_was_meant_as_html(capture, jax_capture):
    from tpukit.ui import tables

    for path in (capture[1].files[0], jax_capture):
        summary = profiling.summarize(path)
        page = tables.profile(summary)
        assert "&lt;a" not in page and "<a " not in page and "Section 3" not in page
        assert html.escape(summary.recommendation) in page


def test_panel_html_shows_the_summarys_own_verdict(jax_capture):
    from tpukit.ui import tables

    summary = profiling.summarize(jax_capture)
    page = html.unescape(tables.profile(summary))
    assert summary.input_verdict in page and "possibly" not in page


@pytest.mark.parametrize(
    "percent, bound, words",
    [
        (0.0, False, "0.0% of step time waiting for input: not input-bound."),
        (4.94, False, "4.9% of step time waiting for input: not input-bound."),
        (5.0, True, "5.0% of step time waiting for input: input-bound"),
        (17.5, True, "17.5% of step time waiting for input: input-bound"),
        (None, None, "not measured"),
    ],
)
def test_input_sentence_agrees_with_the_number(percent, bound, words):
    from tpukit.observe.profiling.summary import _INPUT_BOUND_PERCENT, _input_sentence

    assert (None if percent is None else percent >= _INPUT_BOUND_PERCENT) is bound
    assert _input_sentence(percent, bound).startswith(words)


def test_xprof_html_becomes_plain_text_without_section_pointers():
    from tpukit.observe.profiling.xprof import _plain

    nextstep = (
        'Consider using <a href="https://www.tensorflow.org/guide/data" target="_blank">the tf.data API</a> '
        "to enable profiler's host-side analysis for input pipeline. Profiler currently does not support "
        "custom input pipeline (please ignore Section 3 below)."
    )
    assert _plain(nextstep) == (
        "Consider using the tf.data API (https://www.tensorflow.org/guide/data) to enable "
        "profiler's host-side analysis for input pipeline."
    )
    assert _plain("Look at Section 3 for the breakdown of input time on the host.") == ""
    assert _plain("Only 1.0% of device computation is 16 bit &amp; <b>more</b>.") == (
        "Only 1.0% of device computation is 16 bit & more."
    )


def test_xla_ops_self_time_leaves_out_nested_ops():
    from tpukit.observe.profiling import xla_ops

    def op(name, ts, dur, tid=1):
        return {
            "ph": "X",
            "pid": 1,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "name": name,
            "args": {"hlo_op": name, "hlo_module": "jit_step"},
        }

    events = [
        op("while.1", 0, 100),
        op("dot.2", 10, 30),
        op("fusion.3", 50, 20),  # nested in the while loop
        op("dot.2", 200, 30, tid=2),  # the same op on another thread (another device)
        {"ph": "X", "pid": 1, "tid": 1, "ts": 120, "dur": 500, "name": "PjitFunction(step)", "args": {}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 150, "dur": 1, "name": "end: dot.2", "args": {"flow": "1"}},
    ]
    ops = {o.path: o for o in xla_ops.from_trace(events)}
    assert {name: o.self_time_us for name, o in ops.items()} == {
        "jit_step/dot.2": 60.0,
        "jit_step/while.1": 50.0,
        "jit_step/fusion.3": 20.0,
    }
    assert ops["jit_step/dot.2"].category == "dot" and ops["jit_step/while.1"].category == "while"
    assert sum(o.self_time_percent for o in ops.values()) == pytest.approx(100.0)
    assert xla_ops.from_trace([]) == ()


# --- XLA-compiled steps: the top ops account for the step ----------------------

_TRAIN_UNDER_XLA = """
import json, sys
import tpukit

config = tpukit.RunConfig(backend=sys.argv[2], accelerator="cpu", dataset="mnist5k", model="cnn", epochs=1,
                          steps_per_epoch=8, batch_size=64, precision="float32", jit_compile=True, profile=(3, 6),
                          validation_split=None, logdir=sys.argv[1], name="xla")
result = tpukit.train(config)
print(json.dumps({"status": result.status, "jit_compile": result.config["jit_compile"],
                  "files": list(result.profile_files)}))
"""


def _top_ops_step_share(summary):
    """The top ops' self time as a fraction of the profiled steps' time, from the summary's own fields."""
    return sum(op.self_time_us for op in summary.top_ops) / (1000.0 * sum(ms for _, ms in summary.steps))


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_xla_step_summary_top_ops_cover_most_of_the_step(tmp_path, backend):
    """`make demo`'s model and data (the zoo CNN on mnist5k, batch 64) under XLA (jit_compile=True), in a fresh
    process: the summary's top ops add up to at least half of the profiled steps' time, on TensorFlow as on JAX,
    and the summary says how much."""
    if backend == "jax":
        pytest.importorskip("jax")
    out = _run_python(_TRAIN_UNDER_XLA, tmp_path, backend, KERAS_BACKEND=backend)
    assert out["status"] == "completed" and out["jit_compile"] is True and len(out["files"]) == 1
    summary = profiling.summarize(out["files"][0])
    assert len(summary.steps) >= 3 and summary.step_time_ms > 0
    share = _top_ops_step_share(summary)
    assert share >= 0.5, summary.to_text()
    assert summary.top_ops_step_percent == pytest.approx(100.0 * share)
    assert f"{summary.top_ops_step_percent:.0f}% of the step time" in summary.to_text()
    # Those are the compiled train step's ops (XLA's, named <hlo module>/<hlo op>), not the tf.data ops around it.
    step_module = {"tensorflow": "_inference_one_step_on_data", "jax": "jit_train_step"}[backend]
    compiled = [op for op in summary.top_ops if step_module in op.path]
    assert "XLA" in summary.top_ops_source and summary.top_ops[0] in compiled, summary.to_text()
    assert sum(op.self_time_us for op in compiled) / (1000.0 * sum(ms for _, ms in summary.steps)) >= 0.5
    _assert_plain_and_consistent(summary)
    print(summary.to_text(), f"\ntop ops cover {100 * share:.0f}% of the step time ({backend})")


def test_xla_op_gets_the_time_after_it_until_the_next_op_in_a_profiled_step():
    """XLA:CPU under TensorFlow ends a convolution's event when the thread pool takes its work over: the gap after
    it, until its module's next op starts, is its work."""
    from tpukit.observe.profiling import xla_ops

    def op(name, ts, dur, tid):
        return {
            "ph": "X",
            "pid": 1,
            "tid": tid,
            "ts": ts,
            "dur": dur,
            "name": name,
            "args": {"hlo_op": name, "hlo_module": "step"},
        }

    events = [
        {"ph": "X", "pid": 1, "tid": 9, "ts": 0, "dur": 1000, "name": "train 3", "args": {"step_num": "3"}},
        op("conv.1", 100, 100, tid=1),
        op("conv.2", 150, 150, tid=2),  # at once on two threads, till 300
        op("fusion", 500, 100, tid=1),  # the 200 us before it, when no op ran, are conv.2's (which ended last)
        op("fusion", 2000, 100, tid=1),  # outside the profiled steps: only its own time
    ]
    ops = {o.path: o for o in xla_ops.from_trace(events)}
    assert {name: o.self_time_us for name, o in ops.items()} == {
        "step/conv.2": 350.0,
        "step/fusion": 200.0,
        "step/conv.1": 100.0,
    }
    assert sum(o.self_time_percent for o in ops.values()) == pytest.approx(100.0)


def test_xla_ops_rank_with_host_ops_and_stand_in_for_the_ops_that_launch_them():
    from tpukit.observe.profiling.summary import OpStat
    from tpukit.observe.profiling.xprof import _top_ops

    xla = (OpStat("step/conv", "conv", 600.0, 60.0), OpStat("step/dot", "dot", 400.0, 40.0))
    host = [OpStat("Iterator::Root", "Dataset", 1000.0, 50.0), OpStat("cluster_0", "_XlaRun", 1000.0, 50.0)]
    ops, source = _top_ops([], host, xla)
    assert source == "XLA ops in the trace and host ops"
    assert [(o.name, o.self_time_percent) for o in ops] == [
        ("Iterator::Root", 50.0),
        ("step/conv", 30.0),
        ("step/dot", 20.0),
    ]
    assert _top_ops([], host, ()) == (tuple(host), "host")
    assert _top_ops([], [], xla) == (xla, "XLA ops in the trace")
    device = [OpStat("conv", "Conv2D", 5.0, 100.0)]
    assert _top_ops(device, host, xla) == (tuple(device), "device")


@pytest.mark.parametrize(
    "op_us, covered, rest",
    [
        (1000.0, 10.0, "Rest     20% of the step time in smaller ops, 70% in no op the profiler names (waiting"),
        (6000.0, 60.0, "Rest     20% of the step time in smaller ops, 20% in no op the profiler names (waiting"),
        (
            9000.0,
            90.0,
            "Rest     20% of the step time in smaller ops; with the top ops that is more than the step: "
            "ops ran on several threads at once.",
        ),
        (15000.0, 150.0, "Rest     20% of the step time in smaller ops."),
    ],
)
def test_summary_states_its_coverage_once_and_names_the_rest(op_us, covered, rest):
    """The top ops' share of the step is said once, on their heading; the line under the table says where the
    rest went (smaller ops, no op), and the advice points at the trace viewer without repeating the number."""
    from tpukit.observe.profiling.summary import OpStat, from_measurements

    ops = (OpStat("step/conv", "conv", op_us / 2, 50.0), OpStat("step/dot", "dot", op_us / 2, 50.0))
    summary = from_measurements(
        "x.xplane.pb",
        "CPU_ONLY",
        [("train 1", 4.0), ("train 2", 6.0)],
        None,
        None,
        ops,
        "XLA ops in the trace",
        [],
        ops_us=op_us + 2000.0,
    )
    assert summary.top_ops_step_percent == pytest.approx(covered)
    assert summary.to_dict()["top_ops_step_percent"] == pytest.approx(covered)
    assert summary.smaller_ops_step_percent == pytest.approx(20.0)
    assert summary.no_op_step_percent == (pytest.approx(100 - covered - 20) if covered < 80 else None)
    text = summary.to_text()
    assert f"Top ops by self time (XLA ops in the trace): {covered:.0f}% of the step time" in text
    assert text.count(f"{covered:.0f}%") == 1, text
    assert text.count("several threads at once") == (covered > 80)
    assert rest in text
    assert "Coverage" not in text and "cover only" not in text
    assert ("shows what the rest of the step does" in summary.recommendation) == (covered < 50)
    no_steps = from_measurements("x.xplane.pb", "CPU_ONLY", [], None, None, ops, "XLA ops in the trace", [])
    assert no_steps.top_ops_step_percent is None and "of the step time" not in no_steps.to_text()


def test_without_xprofs_converter_the_trace_alone_gives_the_same_steps_and_xla_ops(jax_capture):
    """Where xprof cannot import (Colab's CPU runtime: its wheels are generated for protobuf 6, the runtime has 5),
    the summary reads the capture's XSpace itself: the same profiled steps and step times as xprof's, the same top
    XLA ops, no input verdict, and a recommendation that says what is missing instead of pointing at the Profile
    tab. Runs the trace-only path on a real capture, beside xprof's own reading of it."""
    from tpukit.observe.profiling import xprof as reader

    full = profiling.summarize(jax_capture)
    shown, xplanes = reader._xplanes_for(jax_capture)
    alone = reader._summarize_trace_only(shown, xplanes, "xprof is not installed")
    assert _step_numbers(alone) == _step_numbers(full)
    assert alone.step_time_ms == pytest.approx(full.step_time_ms, rel=0.02)
    assert [op.name for op in alone.top_ops][:3] == [op.name for op in full.top_ops][:3]
    assert alone.input_source == full.input_source == "trace"
    assert alone.input_percent == pytest.approx(full.input_percent, rel=0.05)
    assert alone.recommendation.startswith("Read from the capture's trace only: xprof is not installed")
    assert "Profile tab" not in alone.recommendation
    _assert_plain_and_consistent(alone)
