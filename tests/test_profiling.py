"""tpukit.profiling: real `fit` runs profiled into tmp dirs, read back with xprof and TensorBoard."""

import gzip
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest

from tpukit import profiling, tensorboard

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
    code = "import sys, tpukit.profiling; assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules"
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


def test_summarize_without_capture_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="No profile capture under"):
        profiling.summarize(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        profiling.summarize(tmp_path / "missing")


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
        assert tensorboard.profile_url(result, run=callback.files[0]).startswith(result.url + "?run=" + run)
    finally:
        if not isinstance(result, tensorboard.Failed):
            tensorboard.stop(result)


def test_input_verdict_follows_xprof_wording():
    from tpukit.profiling import _input_verdict

    assert _input_verdict("Your program is NOT input-bound because only 0.1% ...") is False
    assert _input_verdict("Your program is HIGHLY input-bound because 80% ...") is True
    assert _input_verdict("Your program is MODERATELY input-bound because 30% ...") is True
    # "POTENTIALLY" comes from unattributed 'All Others' time, not from waiting on input: no verdict.
    assert _input_verdict("Your program is POTENTIALLY input-bound because 43.6% ... 'All Others' time") is None
