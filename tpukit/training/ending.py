"""How a run ends: its status, the one line that says why, what a resume would do, and the record of its end.

`Run` (`training.run`) takes these from `RunEnding`: the steps of a run are there, the ways it ends are here.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from typing import Optional

from tpukit import precision as precisions
from tpukit.data import pipeline
from tpukit.models import memory
from tpukit.runs import backups, directory, model_state
from tpukit.runs.records import RunResult
from tpukit.training import determinism
from tpukit.training.signals import Terminated


class RunEnding:
    """The end of a `Run`: how fit's return, an error or a signal becomes a status and a sentence, and the final
    record (the weights or adapters, the samples, MFU)."""

    def _outcome(self, status: str, message: str):
        """(status, message) once fit returned: a NaN fails the run; SIGTERM, a stop request or another worker stops
        it; early stopping says why under the epoch lines."""
        model = self.model
        if self.recorder.nan_step is not None:
            status, message = "failed", self._nan_message()
        elif self.terminated and status == "completed":
            status, message = self._ending(Terminated())
        elif self.stopper.stopped_early and status == "completed":
            status, message = "stopped", self._stopped_message("stopped on request")
        elif self.early_stopper is not None and self.early_stopper.stopped_epoch:
            best = getattr(self.early_stopper, "best_epoch", None)
            message = (
                f"early stopping after epoch {self.early_stopper.stopped_epoch + 1} (no "
                f"{self.early_stopper.monitor} gain)"
                + (f"; restored the weights of epoch {best + 1}" if best is not None else "")
            )
            if self.logger is not None:  # the epochs' lines end before the last epoch: say why under them
                self.logger.say(message[0].upper() + message[1:] + ".")
        elif self.runtime.stopped_elsewhere(model) and status == "completed":
            status = "stopped"
            message = self._stopped_message("another worker stopped (on request, SIGTERM or Ctrl-C)")
        return status, message

    def _sample(self, when: str) -> None:
        """What a language model writes after the run's prompt, `when` "before" or "after" training (greedy: the same
        weights write the same text). A resume keeps the "before" its run wrote. Nothing for a model that writes no
        text, or with `sample_prompt=""`."""
        config, sampler = self.config, self.model_source
        if not sampler.writes_text() or config.sample_prompt == "":
            return
        kept = self.previous.samples if self.previous is not None else {}
        if when == "before" and kept.get("before") is not None and config.sample_prompt in (None, kept.get("prompt")):
            self.samples.update(prompt=kept["prompt"], before=kept["before"])
            return
        chat = self.source.chat_prompt is not None  # conversations: the samples answer a user's turn
        if "prompt" not in self.samples:
            self.samples["prompt"] = (
                config.sample_prompt
                or self.source.chat_prompt
                or sampler.prompt_from(self.source.sample(1)["token_ids"][0], config.sequence_length)
            )
        prompt = self.samples["prompt"]
        try:
            self.samples[when] = sampler.sample(self.model, prompt, config.sequence_length, chat=chat)
        except Exception as e:  # noqa: BLE001 - a sample is a view of the model: the run goes on without it
            from tpukit.errors import one_line

            self.notes.append(f"sample {when} training: not generated ({one_line(e)})")

    def _evaluate_test(self):
        """The test split, evaluated once, after training: held out from training and validation alike."""

        feed = pipeline.eval_feed(
            self.source.test,
            feeder=self.feeder,
            global_batch=self.plan.config.global_batch_size,
            replicas=self.runtime.replicas,
            shard=self.runtime.shard(),
        )
        return self.runtime.evaluate(self.model_source.trainer(self.model), feed)

    def _nan_message(self) -> str:
        config = self.plan.config
        cause = f"the learning rate {config.learning_rate} may be too high (try it 10x lower)"
        also = precisions.get(config.precision).nan_cause  # what a NaN may mean under this precision
        if also:
            cause += f", or {also}"
        step, calls = self.recorder.nan_step, config.steps_per_execution
        where = f"step {step}" if calls == 1 else f"step {step} (a call of steps {max(1, step - calls + 1)}-{step})"
        return f"loss became NaN at {where}: likely cause: {cause}."

    def _ended(self) -> dict:
        """What the record learns when training ends: why a stopped run stopped, and the test split's metrics."""
        return dict(cause=self.cause, test_metrics=dict(self.test_metrics))

    def _ending(self, error: BaseException):
        """(status, one-line message) for a run ended by `error`: an interrupt or SIGTERM stops it, anything else
        fails it; a device out of memory says what to change."""
        from tpukit.errors import one_line

        if isinstance(error, Terminated):
            return "stopped", self._stopped_message("terminated (SIGTERM)")
        if isinstance(error, KeyboardInterrupt):
            return "stopped", self._stopped_message("interrupted (KeyboardInterrupt)")
        if memory.out_of_memory(error):
            return "failed", memory.out_of_memory_message(error, self.memory_fix)
        return "failed", one_line(error, limit=300)

    def _stopped_message(self, cause: str) -> str:
        """A stopped run's message: its cause, then what a resume would do. The cause alone goes into
        `RunResult.cause`, so a view that says the resume part its own way never reads the sentence."""
        self.cause = cause
        return f"{cause}; {self._resume_hint()}"

    def _resume_hint(self) -> str:
        """What a resume of this run would do, from what it kept (a backup, or the run it extends)."""
        with contextlib.suppress(Exception):
            kept = backups.latest(self.run_dir / directory.BACKUP_DIR, verify=False)
            if kept is not None or self.parent:
                return "resume continues from the last whole epoch"
        return "it stopped before its first whole epoch ended, so nothing was kept to resume"

    def _end_badly(self, status: str, message: str) -> None:
        """Record how a run that raised ended, as far as the disk allows (a full disk may refuse even this).

        Its history keeps the epochs a resume continues from: an epoch whose backup failed is trained again.
        """
        with contextlib.suppress(Exception):
            kept = backups.latest(self.run_dir / directory.BACKUP_DIR, verify=False)
            self.record.keep_epochs(kept.epochs_done if kept else self.initial_epoch)
        with contextlib.suppress(Exception):
            self.record.save(status, message, **self._ended())

    def _finish(self, status: str, message: str) -> RunResult:
        backup_dir = self.run_dir / directory.BACKUP_DIR
        backups.room_for(
            self.run_dir, backups.size_needed(model_state.nbytes(self.model), backup_dir), "write the final weights"
        )
        adapters = self.model_source.adapters_only(self.model)
        together, fingerprint = self.runtime.ends_together(status), None
        with self.runtime.host_reads(self.model, together) as readable:
            if readable:
                final = directory.ADAPTERS_FILE if adapters else directory.WEIGHTS_FILE
                with directory.atomic(self.run_dir / final) as t:
                    model_state.save_final(self.model, t)
                if adapters:  # what an extension continues from: the adapters with their optimizer's state
                    with directory.atomic(self.run_dir / directory.ADAPTERS_STATE_FILE) as t:
                        model_state.take(self.model).save(str(t))
                fingerprint = determinism.fingerprint(self.model)
        apart = "the processes stopped after different steps"
        if not readable:
            self.notes.append(f"final weights: not written ({apart}, and the weights are split over them)")
        if together:
            self._sample("after")
        elif self.model_source.writes_text():
            self.notes.append(f"sample after training: not generated ({apart})")
        flops, flops_source = self._flops(self.model)
        examples_per_sec = self.recorder.examples_per_sec()
        precision = self.plan.config.precision
        mfu, flops_source = _mfu(flops, examples_per_sec, self.runtime.peak_flops(precision), flops_source)
        tokens = _tokens_per_example(self.source.sample(1))
        result = self.record.save(
            status,
            message,
            **self._ended(),
            fingerprint=fingerprint,
            tokens_per_sec=examples_per_sec * tokens if examples_per_sec and tokens else None,
            flops_per_example=flops,
            flops_source=flops_source,
            mfu=mfu,
            ended=time.time(),
            mfu_basis=self.runtime.peak_basis(precision) if mfu is not None else "",
            profile_files=tuple(self.profiler.files) if self.profiler is not None else (),
        )
        result.attach_model(self.model)  # result.model: in this process, not in result.json
        if status == "completed":
            shutil.rmtree(self.run_dir / directory.BACKUP_DIR, ignore_errors=True)
        return result


def _tokens_per_example(inputs) -> Optional[int]:
    """The tokens in one example of a language model's inputs (its `token_ids` row, or a pair's two), else None."""
    ids = inputs.get("token_ids") if isinstance(inputs, dict) else None
    return int(ids.size // len(ids)) if getattr(ids, "ndim", 0) >= 2 else None  # a preference pair: its two rows


def _mfu(flops, examples_per_sec, peak, how: str):
    """(MFU or None, how the FLOPs were counted, or why MFU is not reported).

    A CPU's peak is measured at connect; measured under load it comes out low,
    and the run then seems to beat it. Such a ratio is not reported: it would be a wrong number.
    """
    if not (flops and examples_per_sec and peak):
        return None, how
    mfu = flops * examples_per_sec / peak
    if mfu > 1.0:
        return None, (
            f"{how}; MFU not reported: the run reached {flops * examples_per_sec / 1e9:.1f} GFLOP/s, more "
            f"than the peak measured at connect ({peak / 1e9:.1f}), which was measured under load "
            "(delete ~/.cache/tpukit/cpu_probe.json to measure again)"
        )
    return mfu, how
