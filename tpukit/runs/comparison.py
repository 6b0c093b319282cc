"""Comparing runs: `compare`, one row per run with the columns that tell runs apart (the panel's runs table and
Compare chart, the notebooks' DataFrame), and `differences`, the settings that differed between them in words.

Its own module because it only reads what `tpukit.runs.records` has already loaded (a `RunResult`'s fields, or a
recorded config dict) and writes nothing: what one run did is `records`; how several runs differ is here.
`records` re-exports both names, so `records.compare` and `records.differences` stay where callers find them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List


def compare(results) -> List[Dict[str, Any]]:
    """One row per run with the columns that tell runs apart."""
    rows = []
    for r in results:
        c = r.config
        rows.append(
            {
                "run": Path(r.run_dir).name,
                "status": r.status,
                "model": c.get("model"),
                "dataset": c.get("dataset"),
                "precision": c.get("precision"),
                "batch_size": c.get("batch_size"),
                "replicas": c.get("replicas"),
                "global_batch_size": r.global_batch_size,
                "deterministic": c.get("deterministic"),
                "examples_per_sec": r.examples_per_sec,
                "tokens_per_sec": r.tokens_per_sec,  # a language model's; None for any other
                "lora_rank": c.get("lora_rank") if r.tokens_per_sec else None,
                "sequence_length": c.get("sequence_length") if r.tokens_per_sec else None,
                "step_time_ms": r.step_time_ms,
                "mfu": r.mfu,
                "fingerprint": r.fingerprint,
                **{k: v for k, v in r.final_metrics.items()},
            }
        )
    return rows


# The settings that tell compared runs apart: every config field but these (where a run is written, its name,
# what the panel adds for a one-off capture).
_NOT_SETTINGS = ("logdir", "name", "profile")
_SETTING_NAMES = {
    "batch_size": "batch",
    "dataset_size": "dataset size",
    "steps_per_epoch": "steps/epoch",
    "steps_per_execution": "steps/execution",
    "learning_rate": "learning rate",
    "validation_split": "validation split",
    "early_stopping": "early stopping",
    "jit_compile": "jit_compile",
    "init_from": "started from",
}


def differences(runs) -> List[str]:
    """The settings that differed between runs, from their recorded configs, in RunConfig's order: one entry per
    setting, its values in the runs' order, each once ("precision: float32 vs mixed_bfloat16", "batch: 32 vs 64").

    Args:
        runs: RunResults, or their config dicts. A setting a run did not record (an older record) is RunConfig's
            default there; one RunConfig does not know reads "–" where it is missing.
    """
    defaults = _defaults()
    configs = [{**defaults, **(r if isinstance(r, dict) else (getattr(r, "config", None) or {}))} for r in runs]
    keys: List[str] = []
    for c in configs:
        keys += [k for k in c if k not in keys and k not in _NOT_SETTINGS]
    out = []
    for key in keys:
        values: List[str] = []
        for c in configs:
            shown = _setting(key, c.get(key))
            if shown not in values:
                values.append(shown)
        if len(values) > 1:
            out.append(f"{_SETTING_NAMES.get(key, key)}: {' vs '.join(values)}")
    return out


def _defaults() -> Dict[str, Any]:
    """RunConfig's fields and their defaults, as a recorded config writes them."""
    from tpukit.config import RunConfig

    return {
        f.name: (
            f.default
            if f.default is not dataclasses.MISSING
            else f.default_factory()
            if f.default_factory is not dataclasses.MISSING
            else None
        )
        for f in dataclasses.fields(RunConfig)
        if f.init
    }


def _setting(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "–"
    if key == "init_from":
        return Path(str(value)).name
    return str(value)
