"""One training run from start to end: connect, load, build, fit with tpukit's callbacks, record, keep the model.

`train()` and `resume()` (`tpukit.training.api`) create a `Run` and call it; everything a run does between
"a config" and "a RunResult" is here.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
import threading
import time
import warnings
from typing import Callable, Optional

from tpukit import precision as precisions
from tpukit.config import ConfigError, PaddingWarning
from tpukit.data import pipeline
from tpukit.hardware.connect import connect_for
from tpukit.models import memory, modeling
from tpukit.models import source as model_sources
from tpukit.registry import check_names, with_labels
from tpukit.runs import backups, directory, records
from tpukit.runs.records import RunResult
from tpukit.runs.records import Recording, first_epochs
from tpukit.training import compile_cache, compiles, determinism
from tpukit.training.plan import (
    RunPlan,
    batches_line,
    check_profile_window,
    estimated_step_seconds,
    resolve_steps_per_execution,
)
from tpukit.training.plan import resolve as resolve_plan
from tpukit.training.ending import RunEnding
from tpukit.training.run_data import RunData
from tpukit.training.signals import raise_if_interrupted, sigterm_stops


class Run(RunData, RunEnding):
    """One execution of a run: the steps of `train`, each a small method.

    `self.config` is the run's RunConfig as the user wrote it (named models and data labelled); once the hardware,
    the data and the model are known, `_plan` resolves it, once, into `self.plan` (`plan.RunPlan`), which everything
    after reads.
    """

    def __init__(
        self,
        config,
        runtime,
        callbacks,
        stop,
        progress,
        run_dir=None,
        inputs=(None, None, None, None),
        parent: Optional[RunResult] = None,
        previous: Optional[RunResult] = None,
        resume_from=None,
        announce: Optional[Callable[[str], None]] = None,
        moved_from: Optional[str] = None,
    ):
        model, data, self.validation_data, self.test_data = inputs
        self.config, self.model_arg, self.data_arg = with_labels(config, model, data)
        self.runtime = runtime
        self.plan = None
        self.cause = ""  # why a stopped run stopped, without the resume hint (RunResult.cause)
        self.extra_callbacks = list(callbacks)
        self.stop = stop or threading.Event()
        self.progress = progress
        self.run_dir = run_dir
        self.resuming = run_dir is not None
        # The run a resume continues, as api.resume read it (result.json is read once), or the run an extension grows
        self.previous = previous if previous is not None else (records.load(run_dir) if self.resuming else parent)
        self.parent = parent.run_dir if parent is not None else (self.previous.parent if self.resuming else None)
        self.resume_from = resume_from  # a resume: where `records.resume_check` found it continues (checked once)
        self.moved_from = moved_from  # a resume: the preset directory the run trained from, since moved
        self.started = time.time()
        self.policy = self.precision_reason = self.logdir = None  # resolved by `prepare`
        self.initial_epoch, self.kept_history, self.restore_from = 0, {}, None  # where a resume or extension starts
        self.compiles = None
        self.cache_dir = None  # JAX's persistent compilation cache this run uses (None: off, or TensorFlow)
        self.flops = None
        self.notes = []  # why each choice the plan made, then what the run did with the model
        self.record = None  # the Recording, once the run's directory exists
        self.test_metrics = {}
        self.samples = {}  # a language model's continuation of the run's prompt: prompt, before, after
        self.fitting = self.terminated = False
        self.memory_fix = None  # what to change where the step's estimate does not fit the device
        self.announce = announce or (lambda line: None)  # where it runs, how the batches fall: said before training

    @functools.cached_property
    def model_source(self):
        """What builds the run's model and answers for its kind (`models.source.ModelSource`), chosen once: a
        preset's tokenizer, which its text, its samples and its layout read, then loads once a run."""
        return model_sources.choose(self.model_arg, self.config)

    # ---- the steps -----------------------------------------------------------
    def execute(self) -> RunResult:
        with contextlib.ExitStack() as held:
            held.enter_context(sigterm_stops(self))
            if self.resuming:
                held.enter_context(directory.locked(self.run_dir))
                directory.sweep_temporaries(self.run_dir)
            return self._execute(held)

    def _execute(self, held) -> RunResult:
        config = self.config
        self.prepare(held)
        steps = self._steps_per_epoch(config)
        if line := batches_line(
            config, self.runtime.replicas, len(self.source.train) if self.source.ordered else None, steps
        ):
            self.announce(line)
        check_profile_window(config.profile, steps, config.epochs)
        self.initial_epoch, self.kept_history, self.restore_from = self._restore_point()
        with precisions.policy(self.policy), self.runtime.strategy.scope():
            self.model = self._build_model(config, in_place=True)
            self.plan = self._plan(self.model, config, steps)
            self._compile(self.model, self.plan)
            self._sample("before")
            self._open_run_dir(held)
            try:
                return self._fit()
            except backups.RestoreError as e:
                if not self.resuming:
                    self._end_badly(*self._ending(e))
                raise  # a resume refused before any file changed
            except BaseException as e:
                status, message = self._ending(e)
                self._end_badly(status, message)
                if memory.out_of_memory(e):
                    raise memory.OutOfMemory(message) from e
                raise

    def check(self, writes: bool = True) -> None:
        """What fails fast, before connecting: the names, a setting this kind of model has no use for (one line, not
        ignored), and the logdir a new run writes to. The CLI asks it before it connects to say where it runs."""
        config = self.config
        check_names(config, self.model_arg, self.data_arg)
        self.model_source.check(config)
        if writes and not self.resuming:
            directory.check_logdir(config.logdir)

    def prepare(self, held, writes: bool = True) -> None:
        """What the recipe does once, before any model: check the names, connect, check the config against the
        hardware, resolve the precision, seed, load the data (`self.runtime`, `.policy`, `.source`, `.feeder`).

        `writes`: a run that will write its directory (`tune_batch_size` writes none)."""
        config = self.config
        self.check(writes)
        runtime = self.runtime or connect_for(config)
        if self.runtime is None and writes:  # connecting may start a framework that takes SIGTERM (TF's cluster)
            held.enter_context(sigterm_stops(self))
        self.announce(runtime.describe())
        runtime.check(config)
        runtime, why = runtime.for_model(self.model_source, config.model_parallel)
        if why:
            self.notes.append(why)
        determinism.check_runtime(config.deterministic, runtime)
        self.logdir = self._worker_writes_aside(runtime, held) if writes and runtime.multi_process else config.logdir
        self.policy, self.precision_reason = runtime.resolve_precision(config.precision)
        advice = runtime.padding_advice(config) if config.accelerator == "auto" else None  # else said at build
        if advice:
            warnings.warn(advice, PaddingWarning, stacklevel=4)
        self.runtime = runtime
        if runtime.strategy_reason:
            self.notes.append(f"strategy: {runtime.strategy_reason}")
        if self.previous is not None and not self.resuming:
            self.notes.append(f"extends {self.parent} ({self.previous.epochs_done} epochs) to {config.epochs} epochs")
        self.compiles = compiles.Watch(runtime.counts_compiles)
        determinism.setup(config.seed, config.deterministic, runtime)
        self.source = self._load_data()

    def trial(self, batch_size: int, timer: Callable[[int, int], object], steps: int) -> None:
        """One trial of `tune_batch_size`: this run's recipe at `batch_size` per replica and one step per call (the
        model built under its policy and strategy, planned, compiled and fed as a run does), fit for at least
        `steps` steps with one callback, `timer(global_batch, steps_per_epoch)`, which stops it. No run directory,
        nothing recorded; call `prepare` first."""
        config = self.config.replace(batch_size=batch_size, steps_per_execution=1)
        per_epoch = self._steps_per_epoch(config)
        epochs = -(-steps // per_epoch)
        with precisions.policy(self.policy), self.runtime.strategy.scope():
            model = self._build_model(config, in_place=False)
            plan = self._plan(model, config, per_epoch)
            self._compile(model, plan)
            global_batch = plan.config.global_batch_size
            feed = pipeline.train_feed(
                self.source.train,
                feeder=self.feeder,
                global_batch=global_batch,
                seed=config.seed,
                epochs=epochs,
                steps=per_epoch,
                shard=self.runtime.shard(),
            )
            self.runtime.fit(
                self.model_source.trainer(model),
                feed,
                validation=None,
                epochs=epochs,
                initial_epoch=0,
                steps=per_epoch,
                callbacks=[timer(global_batch, per_epoch)],
            )

    def _worker_writes_aside(self, runtime, held) -> str:
        """The run's logdir in this process. Across processes only the chief (process 0) writes the run; the
        others write theirs (the same checkpoints and events, which every process must save in step) to a
        temporary directory, removed at the end, so nothing they leave looks like a run."""
        if self.resuming:
            raise ConfigError(
                "resume continues a run in one process; a run trained across processes cannot be "
                "resumed yet (train it again, or resume it with python -m tpukit train --resume in "
                "one process with the same global batch)."
            )
        if runtime.process_index == 0:
            return self.config.logdir
        aside = tempfile.mkdtemp(prefix=f"tpukit-worker{runtime.process_index}-")
        held.callback(shutil.rmtree, aside, ignore_errors=True)
        return aside

    def _build_model(self, config, in_place: bool):
        """The model, built under the run's policy and checked against the data (not compiled yet); `in_place`:
        a built model given to train() is trained itself where it can be (a trial builds its own)."""
        kind = self.model_source
        model, self.built_note = kind.build(config, self.source.spec, in_place=in_place, policy=self.policy)
        user = kind.user_compile(model)
        kind.check_fits(model, self.source, modeling.loss_name(config, user), user)  # builds it, symbolically
        return self._within_memory(model, config, in_place)

    def _within_memory(self, model, config, in_place: bool):
        """`model`, its transformer blocks rematerialized where `config.remat` asks or ("auto") the step's estimated
        memory does not fit the device without it (`models.memory`); the estimate goes into the run's notes, and
        what to change into `self.memory_fix` (said where the device runs out)."""
        kind = self.model_source
        remat, line, self.memory_fix = memory.decide(
            model, kind.shape(model), config, self.runtime, rows=kind.rows_per_example
        )
        if in_place and line:
            self.notes.append(line)
        if remat:
            why_not = self.model_source.rematerialize(model)
            if in_place and why_not:
                self.notes.append(f"remat: not applied: {why_not}")
        return model

    def _plan(self, model, config, steps) -> RunPlan:
        """Decide, once, what "auto" means here: steps per execution and XLA, from the model's size on this hardware."""
        runtime, policy = self.runtime, self.policy
        global_batch = config.global_batch(runtime.replicas)

        def step_seconds():  # a training step's time at the CPU's measured peak (a lower bound), or None
            return estimated_step_seconds(self._flops(model)[0], global_batch, runtime.peak_flops(policy))

        spe, why = resolve_steps_per_execution(
            config.steps_per_execution, runtime, steps, config.profile, step_seconds=step_seconds
        )
        if config.steps_per_execution == "auto":
            self.notes.append(f"steps_per_execution: {why}")
        jit, why = runtime.jit_compile(
            config.jit_compile, policy, model, determinism.op_determinism_enabled(), step_seconds
        )
        if why:
            self.notes.append(f"jit_compile: {why}")
        return resolve_plan(
            config,
            runtime,
            policy=policy,
            precision_reason=self.precision_reason,
            steps=steps,
            steps_per_execution=spe,
            jit_compile=jit,
            logdir=self.logdir,
        )

    def _compile(self, model, plan: RunPlan) -> None:
        config = plan.config
        compiled = self.model_source.compile(model, config)
        self.notes.append(f"model: {self.built_note}; {compiled}")
        if self.runtime.lane_width:
            from tpukit.models import tiling

            self.notes.extend(filter(None, [tiling.note(model)]))
        if config.init_from and self.restore_from is None:  # a resume or extension restores its own weights
            from tpukit.runs import saving

            self.notes.append(saving.init_from(model, config.init_from))

    def _flops(self, model):
        """(training FLOPs per example or None, how counted), counted once a run (the step-time estimate for
        steps_per_execution on the CPU, and MFU at the end)."""
        if self.flops is None:
            self.flops = self.model_source.training_flops(model, self.source.sample(8))
        return self.flops

    def _open_run_dir(self, held):
        """The run's directory (a new one, or the one a resume continues) and its `Recording`."""
        config = self.plan.config
        if self.moved_from:  # resume(model=DIR): the preset directory the run trained from moved there
            self.notes.append(
                f"the preset directory moved from {self.moved_from} to {config.model}: the run trains from there"
            )
        if self.run_dir is None:
            self.run_dir = directory.new_run_dir(config.logdir, config.run_name)
            held.enter_context(directory.locked(self.run_dir))
            directory.write_json(self.run_dir / directory.CONFIG_FILE, config.to_dict())
        elif self.moved_from:  # and its config.json says so, as its record will: a later resume finds it there
            directory.write_json(self.run_dir / directory.CONFIG_FILE, config.to_dict())
        self._use_compile_cache(held)
        self.record = Recording(
            self.run_dir,
            self.kept_history,
            self.notes,
            config=config.to_dict(),
            steps_per_epoch=self.plan.steps_per_epoch,
            precision_reason=self.plan.precision_reason,
            runtime=self.runtime.to_dict(),
            data=self.source.describe(),
            started=self.started,
            parent=self.parent,
            model_policy=self.model.dtype_policy.name,
            samples=self.samples,
        )

    def _use_compile_cache(self, held) -> None:
        """JAX's persistent cache for the compiles from here on: fit's and evaluate's (JAX's settings come back when
        the run ends). Only once the run's directory exists, so a bad input still leaves nothing in the logdir; the
        build's small compiles before it are not kept. "auto" is in the logdir this process writes: a worker other
        than the chief keeps its own aside, as its run."""
        if self.runtime.caches_compiles:
            self.cache_dir = compile_cache.directory_for(
                self.config.compilation_cache, self.logdir or self.config.logdir, compile_cache.jax_configured()
            )
        held.enter_context(compile_cache.used(self.cache_dir))

    def _fit(self) -> RunResult:
        self.source = self._ready_data()
        config, source, model = self.plan.config, self.source, self.model
        global_batch = config.global_batch_size
        shard = self.runtime.shard()
        train_feed = pipeline.train_feed(
            source.train,
            feeder=self.feeder,
            global_batch=global_batch,
            seed=config.seed,
            epochs=config.epochs,
            initial_epoch=self.initial_epoch,
            steps=self.plan.steps_per_epoch,
            shard=shard,
        )
        validation_feed = pipeline.eval_feed(
            source.validation,
            feeder=self.feeder,
            global_batch=global_batch,
            replicas=self.runtime.replicas,
            shard=shard,
        )
        callbacks = self._callbacks(self.plan.steps_per_epoch, global_batch, self.restore_from)
        status, message = "completed", ""
        self.fitting = True
        self.compiles.start()
        try:
            raise_if_interrupted()
            self.runtime.fit(
                self.model_source.trainer(model),
                train_feed,
                validation=validation_feed,
                epochs=config.epochs,
                initial_epoch=self.initial_epoch,
                steps=self.plan.steps_per_epoch,
                callbacks=callbacks,
                whole_feed=not source.ordered and not config.steps_per_epoch,
            )
        except KeyboardInterrupt as e:
            status, message = self._ending(e)
        finally:
            self.fitting = False
            self.compiles.stop()
            self.notes.extend(filter(None, [self.compiles.note(self.cache_dir)]))
            if self.profiler is not None:
                self.profiler.close()
            if self.logger is not None:  # ends a live line that Ctrl-C or an error left open
                self.logger.close()
        status, message = self._outcome(status, message)
        if status == "completed" and source.test is not None:
            self.test_metrics = self._evaluate_test()
        return self._finish(status, message)

    def _restore_point(self):
        """(first epoch, history before it, weights to load): from the run's last whole backup (as resume found
        it), else from the final weights of the run it extends, else from scratch. Reads only."""
        if self.resuming and not self.resume_from.ok:  # in use when resume asked, free when this run locked it
            raise directory.RunDirError(f"{self.run_dir}: {self.resume_from.reason} Resume it again.")
        if self.resuming and self.resume_from.backup:
            done = self.resume_from.from_epoch - 1
            return done, first_epochs(self.previous.history, done), self.resume_from.backup
        if self.parent is None:
            return 0, {}, None
        parent = self.previous if not self.resuming else records.load(self.parent)  # an extension was read already
        weights = directory.continued_from(self.parent)
        if parent.status != "completed" or not weights.is_file():
            raise backups.RestoreError(
                f"{self.parent}, the run this one extends, has no final weights "
                f"({parent.status}); it cannot be continued exactly."
            )
        return parent.epochs_done, first_epochs(parent.history, parent.epochs_done), str(weights)

    def _callbacks(self, steps, global_batch, weights):
        import keras

        from tpukit.training import callbacks as cb

        config = self.plan.config
        self.stopper = cb.StopOnRequest(self.stop)
        self.recorder = cb.RunRecorder(global_batch, record=self.record, steps_per_epoch=steps, epochs=config.epochs)
        self.record.measure(self.compiles.fields)
        out = self.model_source.callbacks() + [
            self.recorder,  # records an epoch before its backup: a kill between them redoes the epoch, nothing lost
            cb.EpochBackup(  # restores before any write
                str(self.run_dir / directory.BACKUP_DIR), steps, restore=weights, reads=self.runtime.host_reads
            ),
            keras.callbacks.LambdaCallback(on_train_begin=lambda logs: self.record.save("running")),
            self.stopper,
            _scalar_writer(str(self.run_dir)),
        ]
        out.extend(self.runtime.callbacks())
        self.profiler = None
        if config.profile is not None:
            from tpukit.observe.profiling import ProfileCallback

            self.profiler = ProfileCallback(str(self.run_dir), *config.profile)
            out.append(self.profiler)
        self.early_stopper = None
        if config.early_stopping:
            monitor = "val_loss" if self.source.validation is not None else "loss"
            self.early_stopper = cb.EarlyStopping(
                self.runtime.host_reads, monitor=monitor, patience=config.early_stopping, restore_best_weights=True
            )
            out.append(self.early_stopper)
        self.logger = None
        if self.progress is not None:  # an `observe.meter.TextProgress`: train()'s verbose and progress
            self.logger = cb.ProgressLogger(
                config.epochs,
                steps,
                stream=self.progress.stream,
                live=self.progress.live,
                global_batch=config.global_batch_size,
            )
            out.append(self.logger)
        return out + self.extra_callbacks

    # ---- results ---------------------------------------------------------------


def _scalar_writer(logdir: str):
    """Each epoch's metrics as TensorBoard scalars, on both backends: tensorboardX's writer, by a callback with
    epoch hooks only. Keras' TensorBoard callback needs TensorFlow; where TF is installed it took 3 ms an epoch against 0.4
    (docs/decisions.md), and its per-step hooks are not `async_safe`: on JAX one such hook makes every step
    wait for its loss to reach the host.
    """
    from tpukit.observe import scalars

    return scalars.EpochScalars(logdir)
