"""train()'s progress text, as Keras' verbose: a line updated in place during each epoch and one line kept per epoch
(1, "auto"), the epoch lines only (2), nothing (0); live in a real Jupyter kernel while the cell runs."""

import io
import os
import re
import textwrap

import pytest

from tpukit.config import ConfigError, RunConfig
from tpukit.observe import meter as progress_model
from tpukit.training import callbacks
from tpukit.training.api import train
from conftest import REPO

SMALL = dict(dataset="digits", model="mlp", epochs=2, batch_size=32)
EPOCH_LINE = re.compile(
    r"^epoch (\d)/2  step 40/40  accuracy [\d.]+  loss [\d.]+  val_accuracy [\d.]+  val_loss [\d.]+"
    r"  [\d,]+ examples/s  (\d+\.\ds|\d+ms)$"
)  # under 0.1 s in ms


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    """A stream that says it is a terminal, so the logger refreshes its line in place."""

    def isatty(self):
        return True


def shown(text: str) -> list:
    """What a terminal (or a notebook's stream output, which treats "\\r" the same way) shows for `text`: each "\\r"
    writes the rest of its line over the start of the line so far."""
    lines = []
    for line in text.split("\n"):
        screen = ""
        for part in line.split("\r"):
            screen = part + screen[len(part) :]
        lines.append(screen.rstrip())
    return lines


def _drive(logger, clock, steps=10, epochs=2, step_s=0.1, first_s=2.0, stop_at=None):
    logger.set_params({"steps": steps, "epochs": epochs})
    logger.on_train_begin()
    for epoch in range(epochs):
        logger.on_epoch_begin(epoch)
        for batch in range(steps):
            if (epoch, batch) == stop_at:
                return  # Ctrl-C: Keras calls no end hook
            clock.now += first_s if (epoch, batch) == (0, 0) else step_s
            logger.on_train_batch_end(batch, {"loss": 1.0 / (batch + 1)})
        clock.now += 1.0
        logger.on_epoch_end(epoch, {"loss": 0.1, "val_loss": 0.2})
    logger.on_train_end()


def test_the_live_line_is_refreshed_in_place_a_few_times_a_second_and_each_epoch_keeps_one_line():
    clock, stream = Clock(), Terminal()
    logger = callbacks.ProgressLogger(2, 10, stream=stream, clock=clock, global_batch=64, every_s=0.25)
    assert logger.live  # a terminal
    _drive(logger, clock)
    text = stream.getvalue()
    assert text.startswith("epoch 1/2  step 0/10  first step (compiling)…")  # while the first step compiles
    refreshes = re.findall(r"(?:^|[\r\n])epoch \d/2  step (\d+)/10  loss [\d.]+  (?!val_)", text)  # not the kept lines
    # Steps of 0.1 s, a refresh at most every 0.25 s: the compiling step, then every third step.
    assert refreshes == ["1", "4", "7", "10", "3", "6", "9"], text
    assert "\repoch 1/2  step 4/10  loss 0.2500  640 examples/s  2.3s  ETA 2s" in text  # elapsed, then the ETA
    assert shown(text) == [
        "epoch 1/2  step 10/10  loss 0.1000  val_loss 0.2000  640 examples/s  3.9s",
        "epoch 2/2  step 10/10  loss 0.1000  val_loss 0.2000  640 examples/s  2.0s",
        "",
    ]


def test_a_run_ended_by_ctrl_c_ends_its_live_line():
    clock, stream = Clock(), Terminal()
    logger = callbacks.ProgressLogger(2, 10, stream=stream, clock=clock, global_batch=64, every_s=0.0)
    _drive(logger, clock, stop_at=(1, 5))
    logger.close()  # train() does, however fit ended
    logger.close()  # and only one line end
    assert shown(stream.getvalue())[-2:] == ["epoch 2/2  step 5/10  loss 0.2000  640 examples/s  0.5s  ETA 1s", ""]


def test_a_log_line_during_the_run_ends_the_live_line_first_and_the_filter_goes_with_the_run():
    """TensorFlow's retracing WARNING (its logger, on the terminal the progress is on) landed inside the live line."""
    import logging

    clock, stream = Clock(), Terminal()
    handler = logging.StreamHandler(stream)
    tensorflow = logging.getLogger("tensorflow")
    tensorflow.addHandler(handler)
    try:
        logger = callbacks.ProgressLogger(2, 10, stream=stream, clock=clock, global_batch=64, every_s=0.0)
        logger.set_params({"steps": 10, "epochs": 2})
        logger.on_train_begin()
        logger.on_epoch_begin(0)
        clock.now += 0.1
        logger.on_train_batch_end(0, {"loss": 1.0})
        tensorflow.warning("5 out of the last 5 calls to <function f> triggered tf.function retracing.")
        clock.now += 0.1
        logger.on_train_batch_end(1, {"loss": 0.5})
        logger.close()
        tensorflow.warning("after the run")
    finally:
        tensorflow.removeHandler(handler)
    lines = shown(stream.getvalue())
    assert lines[0].startswith("epoch 1/2  step 1/10  loss 1.0000"), lines  # ended before the warning
    assert lines[1] == "5 out of the last 5 calls to <function f> triggered tf.function retracing.", lines
    assert lines[2].startswith("epoch 1/2  step 2/10  loss 0.5000") and lines[3] == "after the run", lines
    assert not handler.filters  # removed with the run


def test_a_file_or_a_pipe_gets_whole_lines_only():
    clock, stream = Clock(), io.StringIO()
    logger = callbacks.ProgressLogger(2, 10, stream=stream, clock=clock, global_batch=64, every_s=0.0)
    assert not logger.live
    _drive(logger, clock)
    assert "\r" not in stream.getvalue() and len(stream.getvalue().splitlines()) == 2


@pytest.mark.parametrize("verbose", [3, "yes", -1])
def test_verbose_takes_keras_values_only(verbose):
    with pytest.raises(ConfigError, match=re.escape(f"Received: verbose={verbose!r}")):
        progress_model.text_progress(verbose, None)


def test_verbose_resolves_as_keras_and_progress_defaults_to_stdout(capsys):
    tty, pipe = Terminal(), io.StringIO()
    assert progress_model.text_progress(0, tty) is None
    assert progress_model.text_progress("auto", tty) == progress_model.TextProgress(tty, live=True)
    assert progress_model.text_progress(1, tty) == progress_model.TextProgress(tty, live=True)
    assert progress_model.text_progress(2, tty) == progress_model.TextProgress(tty, live=False)
    assert progress_model.text_progress(1, pipe) == progress_model.TextProgress(pipe, live=False)
    import sys

    assert progress_model.text_progress("auto", None).stream is sys.stdout  # read at the call: capsys's


def test_verbose_0_prints_nothing_and_2_one_line_per_epoch(tmp_path, capsys):
    config = RunConfig(**SMALL, logdir=str(tmp_path), steps_per_execution=1)
    assert train(config, verbose=0).status == "completed"
    out = capsys.readouterr()
    assert out.out == "", out.out
    assert train(config, verbose=2).status == "completed"
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(EPOCH_LINE.match(line) for line in lines), lines
    assert [EPOCH_LINE.match(line).group(1) for line in lines] == ["1", "2"]
    terminal = Terminal()  # verbose="auto" on a terminal: live lines, then the same kept lines
    assert train(config, progress=terminal).status == "completed"
    assert "\r" in terminal.getvalue()
    kept = [line for line in shown(terminal.getvalue()) if line]
    assert len(kept) == 2 and all(EPOCH_LINE.match(line) for line in kept), kept


def test_ctrl_c_in_train_leaves_the_live_line_ended(tmp_path):
    import keras

    class Interrupt(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 20:
                raise KeyboardInterrupt

    terminal = Terminal()
    config = RunConfig(**SMALL, logdir=str(tmp_path), steps_per_execution=1)
    result = train(config, callbacks=[Interrupt()], progress=terminal)
    assert result.status == "stopped"
    assert terminal.getvalue().endswith("\n")  # what prints next (the summary) starts a line of its own
    assert re.match(r"epoch 1/2  step \d+/40  accuracy", shown(terminal.getvalue())[-2]), terminal.getvalue()


# ---- in a notebook ---------------------------------------------------------------------------------------------

CELL = textwrap.dedent("""
    import time
    import keras
    import tpukit

    class Slow(keras.callbacks.Callback):  # 40 steps of 30 ms or more an epoch: time to see the line move
        async_safe = True  # on JAX the step-end hooks, tpukit's progress line among them, still run in Keras' threads

        def on_train_batch_begin(self, batch, logs=None):  # fit calls it on its own thread, before each step
            time.sleep(0.03)

    config = tpukit.RunConfig(dataset="digits", model="mlp", epochs=2, batch_size=32, steps_per_execution=1,
                              logdir="runs")
    result = tpukit.train(config, callbacks=[Slow()])
    print("STATUS", result.status)
""")


def _kernel_env(backend):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "COLAB_TPU_ADDR", "TPU_NAME", "KERAS_BACKEND")}
    env.update(
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
        KERAS_BACKEND=backend,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags)  # a fresh runtime's one CPU device
    return env


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_train_in_a_notebook_shows_a_live_line_while_the_cell_runs(backend, kernel_dir, tmp_path):
    """The stream output a notebook receives while `tpukit.train()` runs, with no argument about progress: a line
    with the step count that moves before the cell's reply arrives, and, once the "\\r" are applied as the front end
    applies them, one line per epoch."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="tpukit-test", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    km.start_kernel(env=_kernel_env(backend), cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        msg_id = kc.execute(CELL)
        received = []  # (stdout text, whether the execute reply had arrived when it did)
        while True:
            msg = kc.get_iopub_msg(timeout=300)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                received.append((content["text"], kc.shell_channel.msg_ready()))
            elif kind == "error":
                pytest.fail("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "idle":
                break
        reply = kc.get_shell_msg(timeout=30)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    live = [(text, late) for text, late in received if re.search(r"\repoch 1/2  step ([1-9]|[1-3]\d)/40  ", text)]
    assert live, f"no line of a step in the first epoch reached the notebook: {received}"
    assert not live[0][1], "the first live line arrived after the cell's reply"
    assert re.search(r"(\d+\.\ds|\d+ms)  ETA ", live[-1][0]), live[-1][0]  # elapsed and ETA
    text = "".join(t for t, _ in received)
    kept = [line for line in shown(text) if line]
    assert len(kept) == 3 and all(EPOCH_LINE.match(line) for line in kept[:2]), kept
    assert kept[2] == "STATUS completed"


def test_an_epoch_run_as_one_call_says_compiling_then_shows_its_rate_and_never_zero_seconds():
    """Steps per execution = the epoch's steps: Keras reports one step per call. The first call compiles and is
    not timed (meter.Meter), so the first epoch line says so instead of an examples/s; a 40 ms epoch reads "40ms",
    never "0.0s"."""
    clock, stream = Clock(), io.StringIO()
    logger = callbacks.ProgressLogger(2, 20, stream=stream, clock=clock, global_batch=64)
    logger.set_params({"steps": 20, "epochs": 2})
    logger.on_train_begin()
    for epoch, call_s in ((0, 0.6), (1, 0.04)):
        logger.on_epoch_begin(epoch)
        clock.now += call_s
        logger.on_train_batch_end(19, {"loss": 0.5})
        logger.on_epoch_end(epoch, {"loss": 0.5})
    logger.on_train_end()
    first, second = stream.getvalue().splitlines()
    assert first == "epoch 1/2  step 20/20  loss 0.5000  0.6s  (compiling: no step timed for examples/s)"
    assert second == "epoch 2/2  step 20/20  loss 0.5000  32,000 examples/s  40ms"


@pytest.mark.parametrize("value, text", [(12.34, "12.3s"), (0.1, "0.1s"), (0.04, "40ms"), (0.0004, "<1ms")])
def test_the_text_lines_show_short_times_in_milliseconds(value, text):
    assert progress_model.seconds(value) == text


def test_a_resumed_epoch_stopped_before_its_first_step_does_not_claim_to_compile():
    clock, stream = Clock(), io.StringIO()
    logger = callbacks.ProgressLogger(3, 20, stream=stream, clock=clock, global_batch=64)
    logger.set_params({"steps": 20, "epochs": 3})
    logger.on_train_begin()
    logger.on_epoch_begin(1)  # resumed at the second epoch, stopped at once
    clock.now += 0.3
    logger.on_epoch_end(1, {})
    assert "compiling" not in stream.getvalue(), stream.getvalue()
