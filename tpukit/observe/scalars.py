"""TensorBoard scalars without TensorFlow or TensorBoard: per-epoch metrics through tensorboardX.

Keras' TensorBoard callback writes with `tf.summary`, so it needs TensorFlow,
which Colab's TPU runtime does not have; and the tensorboard package is not
there either (installing it would move Colab's protobuf: tensorboard 2.21 needs
protobuf 6). tensorboardX's `SummaryWriter` writes the same event files with
only numpy, packaging and protobuf >= 3.20, and imports neither TensorFlow nor
TensorBoard. `EpochScalars` keeps Keras' layout (`<logdir>/train` and
`<logdir>/validation`, tags `epoch_loss`, `epoch_accuracy`, ...,
`epoch_learning_rate`), so TensorBoard, once installed to view them
(`tpukit.colab.setup()`), reads them like Keras' own. It is used where
TensorFlow is installed too: one writer for both backends, and about 0.4 ms an
epoch against Keras' callback's 3 ms (docs/decisions.md).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Dict, Optional

import keras

# tensorboardX flushes on its own writer thread at most this often; an epoch's scalars reach the disk within it,
# and all of them when training ends (`close`).
FLUSH_S = 1


class EpochScalars(keras.callbacks.Callback):
    """Writes each epoch's logs as TensorBoard scalars; `val_` metrics go to the validation run.

    A writer opens on the first epoch that has something to write, and closes at the end of training.
    """

    def __init__(self, logdir: str):
        super().__init__()
        self.logdir = logdir
        self._writers: Dict[str, object] = {}

    def on_train_begin(self, logs=None):
        # Import tensorboardX on another thread while the first step compiles, instead of in the first epoch's end
        # on fit's thread (~0.01 s after TensorFlow, which loaded protobuf; more on JAX).
        threading.Thread(target=_import_writer, name="tpukit-tensorboardX-import", daemon=True).start()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        train = {k: v for k, v in logs.items() if not k.startswith("val_")}
        if "learning_rate" not in train:  # as Keras' TensorBoard callback adds it
            train["learning_rate"] = _learning_rate(self.model)
        self._write("train", epoch, train)
        self._write("validation", epoch, {k[4:]: v for k, v in logs.items() if k.startswith("val_")})

    def on_train_end(self, logs=None):
        self.close()

    def close(self):
        """Write what is queued and close the files (tensorboardX's writer thread drains its queue first)."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def _write(self, run: str, step: int, values: Dict[str, float]) -> None:
        scalars = {f"epoch_{k}": f for k, v in sorted(values.items()) if (f := _number(v)) is not None}
        if not scalars:
            return
        if run not in self._writers:
            SummaryWriter = _import_writer()
            self._writers[run] = SummaryWriter(
                os.path.join(self.logdir, run), flush_secs=FLUSH_S, filename_suffix=".tpukit"
            )
        writer = self._writers[run]
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, global_step=step)


# Modules tensorboardX imports at its own import that a run never needs: the clients for gs:// and s3:// logdirs (a
# run's logdir is local: its lock and atomic writes need a local file system) and torch (for torch tensors; Colab's
# CPU and GPU runtimes ship it, and it takes seconds to import). google-cloud-storage alone took 0.15-0.3 s of
# GIL-bound import, 90% of tensorboardX's, while the first step compiled (docs/decisions.md, issue 18). One that is
# already imported is used as it is.
_UNNEEDED = ("google.cloud.storage", "boto3", "torch")
_import_lock = threading.Lock()


def _import_writer():
    """tensorboardX's SummaryWriter, imported without the modules it does not need here (`_UNNEEDED`)."""
    with _import_lock:  # the pre-import thread and an epoch's end may both get here; the second finds it loaded
        if "tensorboardX" not in sys.modules:
            hidden = [name for name in _UNNEEDED if name not in sys.modules]
            for name in hidden:
                sys.modules[name] = None  # an import of it raises ImportError, which tensorboardX expects
            try:
                import tensorboardX  # noqa: F401
            finally:
                for name in hidden:
                    if sys.modules.get(name, 0) is None:
                        del sys.modules[name]
        from tensorboardX import SummaryWriter

    return SummaryWriter


def _learning_rate(model) -> Optional[float]:
    """The optimizer's current learning rate (a schedule's value at this step), or None."""
    try:
        return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
    except (AttributeError, TypeError, ValueError):
        return None


def _number(value) -> Optional[float]:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
