"""Train a RunConfig: build and compile in the strategy's scope, fit with tpukit's callbacks, keep everything.

`train()` is the one entry point the notebooks, the panel and the CLI share.
It creates a fresh run directory (or continues one with `resume()`), writes
config.json and a result.json that is updated every epoch, and returns a
`RunResult`. A stop request, Ctrl-C (KeyboardInterrupt) or a NaN loss ends the
run cleanly with what was done so far; a killed process can be resumed from
its last whole epoch and, when deterministic, ends with the same weights.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import warnings
from pathlib import Path
from typing import Iterable, Optional

from tpukit import records
from tpukit.config import ConfigError, PaddingWarning, RunConfig
from tpukit.records import RunResult


def train(
    config: RunConfig,
    runtime=None,
    callbacks: Iterable = (),
    *,
    stop: Optional[threading.Event] = None,
    progress=None,
) -> RunResult:
    """Run `config` on `runtime` (connected from the config when None) and return its RunResult.

    Args:
        config: the run.
        runtime: a `Runtime` from `tpukit.connect`; None connects as the config says.
        callbacks: extra Keras callbacks, called after tpukit's own.
        stop: a threading.Event; setting it ends training after the current step.
        progress: a text stream for progress lines (the CLI passes stderr), or None.
    """
    return _Run(config, runtime, callbacks, stop, progress).execute()


def resume(run_dir, runtime=None, callbacks: Iterable = (), *, stop=None, progress=None) -> RunResult:
    """Continue a stopped or killed run in its own directory, from its last whole epoch."""
    config = records.load_config(run_dir)
    return _Run(config, runtime, callbacks, stop, progress, run_dir=Path(run_dir)).execute()


class _Run:
    """One execution of a run: the steps of `train`, each a small method."""

    def __init__(self, config, runtime, callbacks, stop, progress, run_dir=None):
        self.config = config
        self.runtime = runtime
        self.extra_callbacks = list(callbacks)
        self.stop = stop or threading.Event()
        self.progress = progress
        self.run_dir = run_dir
        self.resuming = run_dir is not None
        self.started = time.time()

    # ---- the steps -----------------------------------------------------------
    def execute(self) -> RunResult:
        from tpukit import determinism, precision
        from tpukit import runtime as rt

        config = self.config
        runtime = self.runtime or rt.connect(config.accelerator, backend=config.backend, tpu=config.tpu,
                                             replicas=config.replicas, deterministic=config.deterministic)
        if config.backend not in ("auto", runtime.backend):
            raise ConfigError(f"RunConfig.backend: the runtime runs {runtime.backend}, not {config.backend}. "
                              f"Received: backend={config.backend!r}.")
        if runtime.workers > 1:
            raise rt.ConnectError(
                "Keras 3's fit cannot train under MultiWorkerMirroredStrategy yet (keras-team/keras#20585): "
                "the cluster is connected, use runtime.strategy in a custom training loop for now."
            )
        config.check_for(runtime.kind, runtime.replicas)
        if runtime.backend == "tensorflow" and runtime.replicas > 1 and config.steps_per_execution > 1:
            raise ConfigError(
                f"RunConfig.steps_per_execution: Keras 3.15 fails to run more than one step per execution under "
                f"MirroredStrategy ({runtime.replicas} replicas); use 1 there. "
                f"Received: steps_per_execution={config.steps_per_execution}."
            )
        policy, self.precision_reason = precision.resolve(config.precision, runtime)
        advice = config.padding_advice(runtime.kind)
        if advice:
            warnings.warn(advice, PaddingWarning, stacklevel=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PaddingWarning)  # already said above
            self.config = config = config.replace(replicas=runtime.replicas, precision=policy, backend=runtime.backend)
        self.runtime = runtime
        self._open_run_dir()
        determinism.setup(config.seed, config.deterministic)
        with precision.policy(policy), runtime.strategy.scope():
            return self._fit()

    def _open_run_dir(self):
        if self.run_dir is None:
            self.run_dir = records.new_run_dir(self.config.logdir, self.config.run_name)
        records.write_json(self.run_dir / "config.json", self.config.to_dict())

    def _fit(self) -> RunResult:
        import keras

        from tpukit import data, models

        config = self.config
        global_batch = config.batch_size * self.runtime.replicas
        dataset = data.load(config.dataset, size=config.dataset_size, seed=config.seed)
        steps = config.steps_per_epoch or data.steps_per_epoch(dataset, global_batch)
        self.initial_epoch, self.history = self._restore_point()
        train_ds = data.train_dataset(dataset, global_batch=global_batch, seed=config.seed, epochs=config.epochs,
                                      initial_epoch=self.initial_epoch, steps_per_epoch=steps)
        eval_ds = data.eval_dataset(dataset, global_batch=global_batch)
        model = models.build(config.model, input_shape=dataset.info.image_shape, num_classes=dataset.info.num_classes)
        from tpukit import precision

        model.compile(
            optimizer=precision.make_optimizer(config.optimizer, config.learning_rate, config.precision),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            metrics=["accuracy"],
            steps_per_execution=config.steps_per_execution,
            jit_compile=config.jit_compile,
        )
        self.model = model
        callbacks = self._callbacks(steps, global_batch)
        self._save(status="running")
        status, message = "completed", ""
        try:
            model.fit(train_ds, validation_data=eval_ds, epochs=config.epochs, initial_epoch=self.initial_epoch,
                      steps_per_epoch=steps, callbacks=callbacks, shuffle=False, verbose=0)
        except KeyboardInterrupt:
            status, message = "stopped", "interrupted (KeyboardInterrupt); resume continues from the last whole epoch"
        except Exception as e:
            self._close_profiler()
            self._save(status="failed", message=f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}")
            raise
        finally:
            self._close_profiler()
        if self.recorder.nan_step is not None:
            status, message = "failed", self._nan_message()
        elif self.stopper.stopped_early and status == "completed":
            status, message = "stopped", "stopped on request; resume continues from the last whole epoch"
        elif self.early_stopper is not None and self.early_stopper.stopped_epoch:
            message = f"early stopping after epoch {self.early_stopper.stopped_epoch + 1} (no val_loss gain)"
        return self._finish(status, message)

    def _restore_point(self):
        """Where a resumed run starts: the epoch after its last backup, and the history up to it."""
        if not self.resuming:
            return 0, []
        meta = self.run_dir / "backup" / "training_metadata.json"
        epoch = json.loads(meta.read_text())["epoch"] if meta.exists() else 0
        previous = records.load(self.run_dir)
        rows = _rows(previous.history)
        return epoch, [r for r in rows if r["epoch"] < epoch]

    def _callbacks(self, steps, global_batch):
        import keras

        from tpukit import callbacks as cb

        config = self.config
        self.stopper = cb.StopOnRequest(self.stop)
        self.recorder = cb.RunRecorder(global_batch, config.steps_per_execution, on_epoch=self._on_epoch)
        out = [
            self.recorder,
            self.stopper,
            cb.EpochBackup(str(self.run_dir / "backup"), steps),
            keras.callbacks.TensorBoard(log_dir=str(self.run_dir), profile_batch=0, write_graph=False),
        ]
        self.profiler = None
        if config.profile is not None:
            from tpukit.profiling import ProfileCallback

            self.profiler = ProfileCallback(str(self.run_dir), *config.profile)
            out.append(self.profiler)
        self.early_stopper = None
        if config.early_stopping:
            self.early_stopper = keras.callbacks.EarlyStopping(
                monitor="val_loss", patience=config.early_stopping, restore_best_weights=False)
            out.append(self.early_stopper)
        if self.progress is not None:
            out.append(cb.ProgressLogger(config.epochs, steps, stream=self.progress))
        return out + self.extra_callbacks

    def _on_epoch(self, epoch, row):
        self.history.append(row)
        self._save(status="running")

    def _close_profiler(self):
        if self.profiler is not None:
            self.profiler.close()

    def _nan_message(self) -> str:
        config = self.config
        cause = ("float16 overflows above 65504; keep loss scaling on (tpukit wraps the optimizer) or use "
                 "mixed_bfloat16" if config.precision == "mixed_float16"
                 else f"the learning rate {config.learning_rate} may be too high")
        return f"loss became NaN at step {self.recorder.nan_step}: likely cause: {cause}."

    # ---- results ---------------------------------------------------------------
    def _result(self, status: str, message: str = "", final: bool = False) -> RunResult:
        from tpukit import determinism, models

        rec = getattr(self, "recorder", None)
        fields = dict(run_dir=str(self.run_dir), status=status, config=self.config.to_dict(),
                      history=_columns(self.history), epochs_done=len(self.history),
                      precision_reason=self.precision_reason, runtime=self.runtime.to_dict(),
                      message=message, started=self.started)
        if self.history:
            fields["final_metrics"] = {k: v for k, v in self.history[-1].items() if k != "epoch"}
        if rec is not None:
            fields.update(examples_per_sec=rec.examples_per_sec(), step_time_ms=rec.step_time_ms(),
                          time_to_first_step_s=rec.time_to_first_step())
        if final:
            flops = models.flops_per_example(self.model)
            peak = self.runtime.peak_flops(self.config.precision)
            eps = fields.get("examples_per_sec")
            fields.update(
                fingerprint=determinism.fingerprint(self.model), flops_per_example=flops,
                mfu=(flops * eps / peak) if (flops and eps and peak) else None, ended=time.time(),
                profile_files=tuple(self.profiler.files) if self.profiler is not None else (),
            )
        return RunResult(**fields)

    def _save(self, status: str, message: str = "") -> None:
        records.save_result(self._result(status, message))

    def _finish(self, status: str, message: str) -> RunResult:
        self.model.save_weights(str(self.run_dir / "model.weights.h5"))
        result = self._result(status, message, final=True)
        records.save_result(result)
        if status == "completed":
            shutil.rmtree(self.run_dir / "backup", ignore_errors=True)
        return result


def _columns(rows):
    keys = [k for k in (rows[0] if rows else {}) if k != "epoch"]
    return {k: [r.get(k) for r in rows] for k in keys}


def _rows(history):
    n = len(next(iter(history.values()), []))
    return [{"epoch": i, **{k: v[i] for k, v in history.items()}} for i in range(n)]
