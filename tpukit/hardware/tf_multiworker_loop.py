"""Train under TensorFlow's MultiWorkerMirroredStrategy with a loop of tpukit's own, in place of Keras' `fit`.

Why: Keras 3's `fit` cannot run under MultiWorkerMirroredStrategy (keras-team/keras#20585). Its train function
reduces each step's metrics across workers with `strategy.reduce(..., axis=0)` on scalars, which fails
("Invalid reduction dimension 0 for input with 0 dimensions", Keras 3.15), and its data adapter hands the
step a `PerReplica` it cannot convert. This loop keeps everything else of `fit`: the model's own `train_step`
and `test_step` run in `strategy.run` over a distributed dataset (`experimental_distribute_dataset`: worker i
feeds the i-th share of every global batch, as tpukit's tf.data feed asks with its DATA auto-shard policy),
each step's metrics are averaged over every replica, and the same Keras callbacks are called in the same
order as `fit` calls them. So progress, TensorBoard scalars, records, epoch backups and resume are alike.

Every worker must run the same steps, or one waits forever in an all-reduce for another that left. So a
stop (a stop request, SIGTERM, Ctrl-C, a NaN loss, early stopping) is agreed after each step and each
epoch: an all-reduce of every worker's vote, and all stop when one asks.

Checked with TF 2.21 / Keras 3.15 on the CPU: 2 workers of 1 device end bitwise equal to one process with
MirroredStrategy over 2 devices, and to each other.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Dict, Iterable, Optional

from tpukit.errors import TpukitError


def fit(model, strategy, train, *, epochs: int, initial_epoch: int, steps: int, callbacks: Iterable, validation=None):
    """Train `model` (built and compiled in `strategy.scope()`) as `model.fit` would; returns its History.

    Args:
        train: a tf.data.Dataset of global batches, at least `(epochs - initial_epoch) * steps` of them.
        steps: steps per epoch.
        callbacks: Keras callbacks, called as `fit` calls them (a stop sets `model.stop_training`).
        validation: a tf.data.Dataset of global batches, evaluated after each epoch, or None.

    Raises:
        KeyboardInterrupt: Ctrl-C was pressed; every worker stopped after the same step first.
        WorkerLost: another worker stopped answering (killed, failed, unreachable).
    """
    with _lost_worker_said():
        return _fit(
            model,
            strategy,
            train,
            epochs=epochs,
            initial_epoch=initial_epoch,
            steps=steps,
            callbacks=callbacks,
            validation=validation,
        )


def _fit(model, strategy, train, *, epochs, initial_epoch, steps, callbacks, validation):
    import keras

    hooks = keras.callbacks.CallbackList(
        list(callbacks), add_history=True, add_progbar=False, model=model, verbose=0, epochs=epochs, steps=steps
    )
    loop = _Loop(model, strategy)
    loop.build(train)
    batches = iter(strategy.experimental_distribute_dataset(train))
    model.stop_training = False
    with _interrupt_votes() as interrupted:
        hooks.on_train_begin()
        epoch_logs: Optional[Dict[str, float]] = None
        for epoch in range(initial_epoch, epochs):
            model.reset_metrics()
            hooks.on_epoch_begin(epoch)
            logs = {}
            for step in range(steps):
                hooks.on_train_batch_begin(step)
                logs = loop.train_step(batches)
                hooks.on_train_batch_end(step, logs)
                if loop.agree_to_stop(model.stop_training or interrupted.is_set()):
                    model.stop_training = True
                    break
            epoch_logs = _floats(logs)
            if validation is not None and not interrupted.is_set():
                epoch_logs.update({f"val_{k}": v for k, v in loop.evaluate(validation, hooks).items()})
            hooks.on_epoch_end(epoch, epoch_logs)
            if loop.agree_to_stop(model.stop_training or interrupted.is_set()):
                model.stop_training = True
                break
        if epochs > 0 and isinstance(model.optimizer, keras.optimizers.Optimizer):
            model.optimizer.finalize_variable_values(model.trainable_weights)
        hooks.on_train_end(logs=epoch_logs)
    if interrupted.is_set():
        raise KeyboardInterrupt("interrupted; every worker stopped after the same step")
    return model.history


def evaluate(model, strategy, data) -> Dict[str, float]:
    """`model.evaluate(data, return_dict=True)` under the strategy: metrics over every replica's batches."""
    with _lost_worker_said():
        return _Loop(model, strategy).evaluate(data)


class WorkerLost(TpukitError, RuntimeError):
    """Another worker of the cluster stopped answering in an all-reduce: the job cannot go on."""


@contextlib.contextmanager
def _lost_worker_said():
    """An all-reduce that fails because a worker left (TensorFlow raises UnavailableError, or Aborted,
    Cancelled, DeadlineExceeded, with its whole graph in the message) becomes WorkerLost, in one line."""
    import tensorflow as tf

    lost = (
        tf.errors.UnavailableError,
        tf.errors.AbortedError,
        tf.errors.CancelledError,
        tf.errors.DeadlineExceededError,
    )
    try:
        yield
    except lost as e:
        raise WorkerLost(
            f"another worker of the cluster stopped answering ({type(e).__name__} in an all-reduce); "
            "the run keeps its last whole epoch: resume it in one process with python -m tpukit "
            "train --resume RUN_DIR"
        ) from None


class _Loop:
    """The traced step functions of one model under one strategy."""

    def __init__(self, model, strategy):
        import tensorflow as tf

        self.model, self.strategy = model, strategy

        def mean(outputs):
            return {k: strategy.reduce("MEAN", v, axis=None) for k, v in outputs.items()}

        @tf.function
        def train_step(iterator):
            return mean(strategy.run(model.train_step, args=(next(iterator),)))

        @tf.function
        def test_step(batch):
            return mean(strategy.run(model.test_step, args=(batch,)))

        @tf.function
        def votes(vote):
            return strategy.reduce("SUM", strategy.run(lambda: tf.identity(vote)), axis=None)

        self.train_step, self.test_step, self._votes = train_step, test_step, votes

    def build(self, data) -> None:
        """Create every variable (layers, metrics, optimizer) before the step is traced, as `fit` does: a
        variable made inside the traced step with more than one device per worker fails ("You must feed a value
        for placeholder tensor")."""
        model = self.model
        with self.strategy.scope():
            if hasattr(model, "_symbolic_build"):  # what fit calls (private; in Keras since 3.0)
                model._symbolic_build(data_batch=next(iter(data)))
            if model.optimizer is not None and not model.optimizer.built:
                model.optimizer.build(model.trainable_variables)

    def agree_to_stop(self, vote: bool) -> bool:
        """True on every worker when any worker votes to stop (an all-reduce of the votes)."""
        import tensorflow as tf

        return float(self._votes(tf.constant(1.0 if vote else 0.0))) > 0

    def evaluate(self, data, hooks=None) -> Dict[str, float]:
        self.model.reset_metrics()
        if hooks is not None:
            hooks.on_test_begin()
        logs = {}
        for step, batch in enumerate(self.strategy.experimental_distribute_dataset(data)):
            if hooks is not None:
                hooks.on_test_batch_begin(step)
            logs = self.test_step(batch)
            if hooks is not None:
                hooks.on_test_batch_end(step, logs)
        logs = _floats(logs)
        if hooks is not None:
            hooks.on_test_end(logs)
        return logs


def _floats(logs) -> Dict[str, float]:
    return {k: float(v) for k, v in (logs or {}).items()}


@contextlib.contextmanager
def _interrupt_votes():
    """While the loop runs in the main thread, the first Ctrl-C becomes this worker's vote to stop (a
    KeyboardInterrupt raised between two all-reduces would leave the other workers waiting); a second one
    raises at once."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag.is_set():
            raise KeyboardInterrupt
        flag.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
