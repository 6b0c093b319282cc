"""The record of a run: `RunResult` (what a run did, read back from result.json), `Recording` (the record while a
run trains, rewriting result.json at each change), listing runs, and whether a run can be resumed.

The run directory's layout, its atomic writes and its lock are `tpukit.runs.directory`; the epoch backups are
`tpukit.runs.backups`; setting runs side by side (`compare`, `differences`, re-exported here) is
`tpukit.runs.comparison`. A run opens its `Recording` once its directory exists; the Keras callback that watches the
epochs (`training.callbacks.RunRecorder`) adds each whole epoch to it and so writes it; the run ends it with its
status. The history has one shape, {metric: [value per epoch]}, and only whole epochs enter it. `measure` registers
what the run measures as it goes (speed, compilations), read at every write, so a killed run's result.json says how
far it got and how fast.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from tpukit.config import global_batch, model_copies
from tpukit.runs import backups, exporting, saving
from tpukit.runs.comparison import compare, differences  # noqa: F401  (callers read them as records.compare, ...)
from tpukit.runs.directory import (
    BACKUP_DIR,
    CONFIG_FILE,
    RESULT_FILE,
    RunDirError,
    final_weights,
    in_use,
    recorded,
    write_json,
)

History = Dict[str, List[float]]  # {metric: [value per epoch]}


class ModelSlot:
    """Where a RunResult keeps its keras.Model: the one trained in this process, or the one rebuilt from the run
    directory on first use (with `rebuild_with`, the factory or model `tpukit.load(run_dir, model=)` was given).
    In memory only: never in result.json, and a copy of the result starts with an empty slot."""

    __slots__ = ("model", "rebuild_with")

    def __init__(self, model: Any = None, rebuild_with: Any = None):
        self.model, self.rebuild_with = model, rebuild_with

    def __copy__(self) -> "ModelSlot":
        return ModelSlot(rebuild_with=self.rebuild_with)

    def __deepcopy__(self, memo) -> "ModelSlot":
        return self.__copy__()

    def __repr__(self) -> str:
        return f"ModelSlot({'a model' if self.model is not None else 'empty'})"


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a run did. `status` is running, completed, stopped or failed; `.model` is its trained keras.Model.

    `train()`, `resume()` and `tpukit.load(run_dir)` all give one: a result read back from its directory is the
    same type as the one a run returns, and its model is rebuilt from the directory when first asked for.
    """

    run_dir: str
    status: str
    config: Dict[str, Any]
    history: Dict[str, List[float]] = dataclasses.field(default_factory=dict)
    final_metrics: Dict[str, float] = dataclasses.field(default_factory=dict)
    epochs_done: int = 0
    steps_per_epoch: Optional[int] = None
    examples_per_sec: Optional[float] = None
    tokens_per_sec: Optional[float] = None  # a language model's: examples/s times the tokens in a row
    step_time_ms: Optional[float] = None
    time_to_first_step_s: Optional[float] = None
    compiles: Optional[int] = None  # train_step compilations in this process's execution (JAX; None on TensorFlow)
    compile_s: Optional[float] = None  # their seconds (JAX)
    fingerprint: Optional[str] = None
    profile_files: Tuple[str, ...] = ()
    flops_per_example: Optional[int] = None
    flops_source: str = ""
    mfu: Optional[float] = None
    mfu_basis: str = ""  # the peak MFU is a share of (`Runtime.peak_basis`)
    precision_reason: str = ""
    runtime: Dict[str, Any] = dataclasses.field(default_factory=dict)
    message: str = ""
    cause: str = ""  # a stopped run: why it stopped, without `message`'s closing word on resuming
    started: Optional[float] = None
    ended: Optional[float] = None
    parent: Optional[str] = None
    test_metrics: Dict[str, float] = dataclasses.field(default_factory=dict)
    data: Dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: Tuple[str, ...] = ()
    samples: Dict[str, str] = dataclasses.field(default_factory=dict)  # a language model's text: prompt, before, after
    model_policy: str = ""  # the trained model's dtype policy (a built model keeps its own): load() rebuilds with it
    model_slot: ModelSlot = dataclasses.field(default_factory=ModelSlot, init=False, repr=False, compare=False)

    def __copy__(self) -> "RunResult":
        """A copy with its own slot: a model attached to one is not attached to the other."""
        twin = dataclasses.replace(self)
        twin.model_slot.rebuild_with = self.model_slot.rebuild_with
        return twin

    def __repr__(self) -> str:
        return (
            f"RunResult(status={self.status!r}, epochs_done={self.epochs_done}, run_dir={self.run_dir!r}, "
            f"fingerprint={self.fingerprint!r})"
        )

    def _repr_pretty_(self, printer, cycle):  # IPython / Jupyter: the summary, not forty fields and the history
        printer.text(self.summary())

    def answer(self, message: str, max_new_tokens: int = 64) -> str:
        """The trained model's answer to a user's `message`, written in its preset's chat template as the run's
        conversations were (`Preset.answer`): `result.answer("What does del do?")`, also on `tpukit.load(run_dir)`.
        A one-line ModelError for a run that did not fine-tune a KerasHub preset."""
        from tpukit import registry
        from tpukit.models.modeling import ModelError

        name = self.config.get("model")
        preset = registry.provided("model", name)  # a preset's source; None for a zoo, registered or imported model
        if not hasattr(preset, "answer"):
            raise ModelError(
                f"answer() is for a fine-tuned KerasHub preset, and this run trained model={name!r}: call the "
                "model itself (result.model)."
            )
        return preset.answer(self.model, message, max_new_tokens=max_new_tokens)

    @property
    def train_metrics(self) -> Dict[str, float]:
        """The last epoch's training metrics (loss, accuracy, ...)."""
        return {k: v for k, v in self.final_metrics.items() if not k.startswith("val_")}

    @property
    def validation_metrics(self) -> Dict[str, float]:
        """The last epoch's validation metrics, without the val_ prefix (from the validation split, not the test split)."""
        return {k[4:]: v for k, v in self.final_metrics.items() if k.startswith("val_")}

    @property
    def global_batch_size(self) -> int:
        """Examples per step over all replicas (the config's per-replica batch times its replicas)."""
        return global_batch(self.config.get("batch_size") or 0, self._copies)

    @property
    def _copies(self) -> int:
        """The replicas the global batch is split over: the devices, over those each copy of a model split over
        several takes (`model_parallel`)."""
        return model_copies(self.config.get("replicas") or 1, self.config.get("model_parallel") or 1)

    @property
    def resumable(self) -> bool:
        """Whether `resume()` continues this run from a kept epoch (`resume_check` says why or why not)."""
        return resume_check(self.run_dir).ok

    @property
    def model(self):
        """The trained keras.Model: the object trained in this process, else rebuilt from the run directory
        (`tpukit.load(run_dir).model`: its final weights, or a stopped run's last whole epoch)."""
        if self.model_slot.model is None:
            self.model_slot.model = saving.rebuild(self.run_dir, self.model_slot.rebuild_with)
        return self.model_slot.model

    def attach_model(self, model) -> None:
        """Keep the trained model with this result (in memory only: it never goes into result.json)."""
        self.model_slot.model = model

    def export(self, path, format: str = "keras"):
        """Write the trained model, its LoRA adapters merged in float32: `format="keras"` a `.keras` file that plain
        `keras.saving.load_model` opens (and a SavedModel beside it on TensorFlow), "preset" a KerasHub preset
        folder, "hf" a Hugging Face Transformers folder (safetensors); returns an `Exported` saying what was
        written. A `path` of kaggle://... or hf://... with "preset" uploads it (`exporting.upload`)."""
        return exporting.export(self.model, path, format)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        del d["model_slot"]
        d["profile_files"] = list(self.profile_files)
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunResult":
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        d = {k: v for k, v in d.items() if k in names}
        d["profile_files"] = tuple(d.get("profile_files", ()))
        d["notes"] = tuple(d.get("notes", ()))
        return cls(**d)

    def summary(self) -> str:
        """One readable paragraph for the console or a notebook cell."""
        c = self.config
        lines = [
            f"{self.status.upper()}: {c.get('model')} on {c.get('dataset')}, {self.epochs_done}/{c.get('epochs')} epochs, "
            f"{c.get('precision')}, batch {c.get('batch_size')} x {self._copies} replicas -> run dir {self.run_dir}"
        ]
        if self.message:
            lines.append(self.message)
        for label, metrics in (
            ("train", self.train_metrics),
            ("validation", self.validation_metrics),
            ("test", self.test_metrics),
        ):
            if metrics:
                lines.append(f"{label}: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())))
        if self.examples_per_sec:
            perf = f"{self.examples_per_sec:,.0f} examples/s, {self.step_time_ms:.1f} ms/step"
            if self.tokens_per_sec:
                perf = f"{self.tokens_per_sec:,.0f} tokens/s ({perf})"
            if self.time_to_first_step_s is not None:
                perf += f", first step after {self.time_to_first_step_s:.1f} s"
            if self.compiles is not None:
                perf += f" (train step compiled {self.compiles}x" + (
                    f", {self.compile_s:.1f} s)" if self.compiles else ")"
                )
            if self.mfu is not None:
                perf += f", MFU {100 * self.mfu:.1f}%"
            lines.append(perf)
            if self.mfu is not None and self.mfu_basis:
                lines.append(f"MFU: the model's counted FLOPs at this rate, as a share of {self.mfu_basis}")
            if self.mfu is None and "MFU not reported: " in self.flops_source:
                lines.append("MFU not reported: " + self.flops_source.split("MFU not reported: ", 1)[1])
        lines.extend(sample_lines(self.samples))
        if self.fingerprint:
            lines.append(f"weights fingerprint {self.fingerprint}")
        if self.profile_files:
            lines.append(f"profile capture: {self.profile_files[0]}")
        return "\n".join(lines)


def sample_lines(samples: Dict[str, str]) -> List[str]:
    """A language model's continuation of the run's prompt before and after training, as the summary shows it."""
    if not samples.get("prompt"):
        return []
    return [f"sample: {samples['prompt']!r} continued"] + [
        f"  {when:<6} {samples[when]!r}" for when in ("before", "after") if when in samples
    ]


def save_result(result: RunResult) -> None:
    write_json(Path(result.run_dir) / RESULT_FILE, result.to_dict())


@dataclasses.dataclass(frozen=True)
class ResumeCheck:
    """What Resume would do with one run: `ok`, and `reason`, a sentence for the person either way.

    `from_epoch` is the first epoch (counted from 1) a resume trains, when `ok`; `backup` the backup it restores
    (None where it starts from the final weights of the run it extends). `in_use`: a live process holds the run (not
    `ok` now; a resume that tries anyway is told by whom when it takes the lock).
    """

    run_dir: str
    ok: bool
    reason: str
    status: str = ""
    from_epoch: Optional[int] = None
    backup: Optional[str] = None
    in_use: bool = False


def resume_check(run_dir, result: Optional[RunResult] = None, verify: bool = False) -> ResumeCheck:
    """Whether `tpukit.resume(run_dir)` would continue the run, from where, and why (not).

    The one place that asks: the panel, the CLI and `resume` itself. `result`: the run's record where the caller
    has read it already (result.json is read once). `verify`: check the backup's files too, and let a damaged one
    raise its BackupError, as `resume` does before it changes anything.
    """
    run_dir = str(run_dir)
    try:
        result = result if result is not None else load(run_dir)
    except FileNotFoundError:
        return ResumeCheck(run_dir, False, "Nothing to resume: the run's directory is gone.")
    except (OSError, RunDirError) as e:
        return ResumeCheck(run_dir, False, f"Cannot resume: {e}")
    status = result.status
    total = result.config.get("epochs")

    def no(reason: str, **more) -> ResumeCheck:
        return ResumeCheck(run_dir, False, reason, status, **more)

    if status == "completed":
        return no(
            "Nothing to resume: the run completed. To train it further, extend it into a new run with "
            "resume(run_dir, epochs=N) (--resume RUN_DIR --epochs N)."
        )
    if in_use(run_dir):
        return no("Cannot resume yet: a process is training this run now.", in_use=True)
    try:
        backup = backups.latest(Path(run_dir, BACKUP_DIR), verify=verify)
    except RunDirError as e:  # backups.BackupError: a marker or file that cannot be read
        if verify:
            raise
        return no(f"Cannot resume: {e}")
    if backup is not None:
        return _yes(run_dir, status, backup.epochs_done, total, str(backup.path))
    if result.parent:
        try:
            parent = load(result.parent)
        except (OSError, RunDirError):
            parent = None
        if parent is not None and parent.status == "completed" and final_weights(result.parent).is_file():
            return _yes(run_dir, status, parent.epochs_done, total)
        return no(f"Cannot resume: {result.parent}, the run this one extends, has no final weights.")
    return no(
        f"Nothing to resume: the run {status} before its first whole epoch ended, so no epoch was kept; "
        "start a new run (Train, in the panel)."
    )


def _yes(run_dir: str, status: str, epochs_done: int, total, backup: Optional[str] = None) -> ResumeCheck:
    of = f" of {total}" if total else ""
    said = f"Resume continues it from epoch {epochs_done + 1}{of}."
    if total and epochs_done >= total:  # stopped after its last epoch ended: "from epoch 2 of 1" said nothing true
        said = f"Resume finishes it from its last epoch ({epochs_done}{of}), which was kept."
    return ResumeCheck(run_dir, True, said, status, epochs_done + 1, backup)


def load(run_dir) -> RunResult:
    """The result of the run in `run_dir` (status 'running' if it never wrote one).

    A run recorded as running that no process holds was killed: it is reported
    as stopped, and `resume` continues it.

    Raises:
        FileNotFoundError: not a run directory (no config.json).
        RunDirError: result.json or config.json is not readable JSON of the expected form.
    """
    return from_recorded(recorded(run_dir), run_dir)


def from_recorded(values: dict, run_dir) -> RunResult:
    """The RunResult of what `directory.recorded` read from `run_dir`; RunDirError where it is not one."""
    try:
        return RunResult.from_dict(values)
    except TypeError as e:
        raise RunDirError(f"{Path(run_dir) / RESULT_FILE} is not a tpukit result ({e}).") from None


def list_runs(logdir: str = "runs") -> List[RunResult]:
    """Every run under `logdir`, oldest first. A run whose record is damaged is listed as failed, saying why."""
    runs = []
    for d in sorted(_run_dirs(logdir)):
        try:
            runs.append(load(d))
        except RunDirError as e:
            runs.append(RunResult(run_dir=str(d), status="failed", config={}, message=str(e)))
    return runs


def has_runs(logdir: str) -> bool:
    """Whether `logdir` holds a run: cheap enough to ask on every refresh of a view (it stops at the first)."""
    return next(_run_dirs(logdir), None) is not None


def _run_dirs(logdir: str):
    """The run directories in `logdir` (folders with a config), in no order; none where it is no folder."""
    try:
        with os.scandir(logdir) as entries:
            for e in entries:
                if e.is_dir() and os.path.exists(os.path.join(e.path, CONFIG_FILE)):
                    yield Path(e.path)
    except OSError:
        return


# ---- the record while a run trains ----------------------------------------------------------------------------


def epochs_in(history: History) -> int:
    """How many whole epochs a history holds."""
    return len(next(iter(history.values()), ()))


def first_epochs(history: History, n: int) -> History:
    """The first `n` epochs of a history (what a resume continues from)."""
    return {k: list(v[:n]) for k, v in history.items()}


class Recording:
    """The run in `run_dir`, recorded as it trains; `save(status)` writes it and returns the `RunResult`.

    Args:
        run_dir: the run's directory (result.json goes there).
        history: the epochs kept before this execution (a resume's, an extension's parent's), else {}.
        notes: the run's notes, a list the run goes on appending to (why each choice, what it did).
        **fixed: the fields of `RunResult` that stay for the whole run (config, runtime, data, parent, ...).
    """

    def __init__(self, run_dir, history: History, notes: List[str], **fixed: Any):
        self.run_dir = str(run_dir)
        self.history = first_epochs(history, epochs_in(history))
        self.notes = notes
        self.fixed = fixed
        self._measures: List[Callable[[], Dict[str, Any]]] = []

    @property
    def epochs_done(self) -> int:
        return epochs_in(self.history)

    def measure(self, fields: Callable[[], Dict[str, Any]]) -> None:
        """Read `fields()` (a dict of RunResult fields: examples_per_sec, compiles, ...) at every write."""
        self._measures.append(fields)

    def add_epoch(self, row: Dict[str, float]) -> None:
        """Append a whole epoch's metrics (`row`: Keras' logs and the "epoch" index) and write the record. A metric
        missing on one side is None there, so the columns stay aligned."""
        done = self.epochs_done
        for key, value in row.items():
            if key != "epoch":
                self.history.setdefault(key, [None] * done).append(value)
        for values in self.history.values():
            if len(values) == done:
                values.append(None)
        self.save("running")

    def keep_epochs(self, n: int) -> None:
        """Drop the epochs after the first `n` (a run that ended badly keeps those its backups can continue)."""
        self.history = first_epochs(self.history, n)

    def result(self, status: str, message: str = "", **final: Any) -> RunResult:
        """The record as a `RunResult`; `final` adds what only the end knows (why it stopped, test metrics,
        fingerprint, MFU, profile files)."""
        fields = dict(
            self.fixed,
            run_dir=self.run_dir,
            status=status,
            message=message,
            notes=tuple(self.notes),
            history=first_epochs(self.history, self.epochs_done),
            epochs_done=self.epochs_done,
        )
        if self.epochs_done:
            fields["final_metrics"] = {k: v[-1] for k, v in self.history.items()}
        for measured in self._measures:
            fields.update(measured())
        fields.update(final)
        return RunResult(**fields)

    def save(self, status: str, message: str = "", **final: Any) -> RunResult:
        """Write result.json (atomically) with `status`, and return what was written."""
        result = self.result(status, message, **final)
        save_result(result)
        return result
