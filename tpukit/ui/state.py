"""What the controller and its views share: the `View` protocol and the plain values handed between them.

It exists so that a view (the widget `Panel`, a test's recorder) and the controller's parts (`jobs`, the
actions) can name these types without importing the controller: nothing here acts or imports ipywidgets.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

from tpukit import global_state
from tpukit.config import RunConfig
from tpukit.errors import TpukitError

# Runs made by panels in this kernel: a panel built again (a re-run cell) still lists them.
KERNEL_RUNS: List[Any] = []
global_state.register(
    "kernel_runs", lambda: list(KERNEL_RUNS), lambda runs: KERNEL_RUNS.__setitem__(slice(None), runs), list
)


class PanelBusy(TpukitError, RuntimeError):
    """An action needs the panel idle, but a run is going on."""


class NoRunError(TpukitError, ValueError):
    """An action needs a run (to resume, to rerun) and the panel has none that fits."""


@dataclasses.dataclass(frozen=True)
class Reproducibility:
    """A run and its rerun from the same config: equal fingerprints mean bitwise-equal weights."""

    original: Any  # RunResult
    rerun: Any  # RunResult

    @property
    def reproducible(self) -> bool:
        return bool(self.original.fingerprint) and self.original.fingerprint == self.rerun.fingerprint

    def text(self) -> str:
        a, b = self.original.fingerprint, self.rerun.fingerprint
        if self.reproducible:
            return f"Reproducible: the rerun ended with the same weights (fingerprint {a})."
        why = (
            ""
            if self.original.config.get("deterministic")
            else " The run was not deterministic: tick 'deterministic' for bitwise-equal reruns."
        )
        return f"Not reproducible: fingerprints differ ({a} vs {b}).{why}"


@dataclasses.dataclass(frozen=True)
class Controls:
    """Which actions are off, and why Train and Resume are off (or what they do): the buttons' state."""

    disabled: Dict[str, bool]
    train_off: str  # why Train is off because of the settings ("" when they are fine)
    train_tip: str  # Train's tooltip: why it is off (settings or a job going on), "" for the default
    resume_tip: str  # which run Resume continues, or why it is off


class View:
    """What the controller shows. Each method shows one thing; this base shows nothing.

    `progress_sink` is the sink of the run's progress callback (`tpukit.ui.progress.make_callback`):
    start / waiting / failed / show_progress / show_curves / finish, and `latest`.
    """

    def __init__(self):
        from tpukit.ui import progress

        self.progress_sink = progress.ProgressRecord()

    def status(self, text: str, kind: str = "info") -> None:
        """The status line: what the last action did ("info", "ok" or "error")."""

    def accelerator(self, runtime=None, text: str = "", kind: str = "info", connecting: bool = False) -> None:
        """What is connected (`runtime`), or a line about connecting (`text`); `connecting`: a connect began."""

    def connected(self, runtime) -> None:
        """A new runtime is connected (Connect becomes Reconnect)."""

    def show_config(self, config: RunConfig) -> None:
        """The settings now hold `config` (written by code, not typed)."""

    def explain(self, config: RunConfig, runtime, stale: bool) -> None:
        """Notes on the settings: what "auto" becomes on `runtime`; `stale`: connected to other hardware."""

    def show_problems(self, problems: Dict[str, str]) -> None:
        """Each refused field's sentence ({field: sentence}); {} clears them."""

    def controls(self, controls: Controls) -> None:
        """Which buttons are on, and why Train and Resume are off."""

    def show_section(self, name: str) -> None:
        """Bring one section into view: Settings, Progress, Runs, Profile, TensorBoard or Accelerator."""

    def profile(self, summary=None, text: str = "", kind: str = "info") -> None:
        """A capture's summary, or a line about it."""

    def tensorboard(self, shown=None, text: str = "", kind: str = "info") -> None:
        """TensorBoard inline (`shown`: a `tpukit.ui.embed.Embed`), or a line about it."""

    def tuning(self, result) -> None:
        """A batch-size tuning's table and chart; None clears them."""

    def show_runs(self, rows: List[dict], notes: List[str]) -> None:
        """The runs table (one row and note per run); Compare's chart is `show_compare`."""

    def show_compare(self, rows: List[dict], shown: str, differed: List[str]) -> None:
        """Compare's chart of `rows`, under a line: which runs it shows (`shown`) and the settings that
        differed between them (`records.differences`)."""

    def reproducibility(self, text: str, ok: bool) -> None:
        """The outcome of a reproducibility check."""


def valid(values: dict) -> RunConfig:
    """RunConfig.from_dict, without the padding warning (the settings show the advice beside the batch)."""
    return RunConfig.from_dict(values, advise=False)


def runtime_key(config: RunConfig) -> Tuple:
    """The config fields that choose the runtime: a connected runtime serves a config with the same key."""
    return (config.accelerator, config.backend, config.tpu, config.replicas, config.deterministic)
