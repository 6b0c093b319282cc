"""The Settings section's logic: the current RunConfig, and settings as a person typed them, taken or refused.

It exists to keep proposals (each field tried against RunConfig, then all of them against the connected hardware
and the data's size) out of the controller's core. `SettingsActions` is mixed into
`tpukit.ui.controller.Controller` and uses its state: `_config`, `_invalid`, `_inputs`, `_runtime`,
`_runtime_key`, `view` and `refresh`. The sentences under the fields come from `tpukit.ui.messages`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from tpukit import registry
from tpukit.config import RunConfig
from tpukit.ui.messages import field_of, plain
from tpukit.ui.state import runtime_key, valid


class SettingsActions:
    """The config, its proposals and what they refuse, as Controller methods."""

    @property
    def config(self) -> RunConfig:
        """The current RunConfig. Assign a RunConfig, or a dict of fields to change."""
        return self._config

    @config.setter
    def config(self, value) -> None:
        if isinstance(value, dict):
            value = valid({**self._config.to_dict(), **value})
        elif not isinstance(value, RunConfig):
            raise TypeError(f"Expected a RunConfig or a dict of RunConfig fields. Received: {value!r}")
        self._check_runtime_fit(value)
        self.view.show_config(value)
        self.view.show_problems({})
        self._invalid = {}
        self._commit(value)

    @property
    def problems(self) -> Dict[str, str]:
        """Why the proposed settings are refused: {field: sentence} ("" for one no field names); empty if none."""
        return dict(self._invalid)

    def propose(self, values: Dict[str, Any]) -> Dict[str, str]:
        """Settings as a person typed them ({field: value}): take them if RunConfig (and the connected hardware)
        accept them all; else keep the config and return every refused field with its sentence."""
        candidate, self._invalid = self._check(values)
        self.view.show_problems(self._invalid)
        if candidate is None:
            self.refresh()
        else:
            self._commit(candidate)
        return dict(self._invalid)

    def train_off(self) -> str:
        """Why Train is off while the settings have problems: each refused field's sentence."""
        return "Train is off: " + " ".join(self._invalid.values())

    def inputs_for(self, config: RunConfig) -> Dict[str, Any]:
        """The objects handed over, for a config that still names them (the settings may have moved on)."""
        name, model = self._inputs["model"]
        dataset, data = self._inputs["data"]
        out = {"model": model if config.model == name else None, "data": data if config.dataset == dataset else None}
        if out["data"] is not None:
            out.update(validation_data=self._inputs["validation_data"], test_data=self._inputs["test_data"])
        return out

    def _check(self, values: Dict[str, Any]) -> Tuple[Optional[RunConfig], Dict[str, str]]:
        """(the config `values` ask for, or None; {field: sentence} for each refused field).

        RunConfig stops at its first error, so each changed field is tried alone on the current config first,
        then all the fields that pass together (and against the hardware and the data's size).
        """
        base = self._config.to_dict()
        problems: Dict[str, str] = {}
        for field, value in values.items():
            if value != base.get(field):
                try:
                    valid({**base, field: value})
                    if field == "model":  # typed: a name the registry finds (a preset, an import path), or why not
                        registry.entry("model", value)
                except (ValueError, TypeError) as e:
                    problems[field] = plain(e)
        accepted = {field: value for field, value in values.items() if field not in problems}
        try:
            candidate = valid({**base, **accepted, **_unread_settings(accepted.get("model", base["model"]))})
            self._check_runtime_fit(candidate)
        except (ValueError, TypeError) as e:
            field = field_of(e)
            problems[field if field in values else ""] = plain(e)
        return (None if problems else candidate), problems

    def _commit(self, config: RunConfig) -> None:
        self._config = config
        runtime = self._matching_runtime(config)
        self.view.explain(config, runtime, self._runtime is not None and runtime is None)
        self.refresh()

    def _check_runtime_fit(self, config: RunConfig) -> None:
        """Checks that need the hardware (against the connected runtime when it is the one `config` asks for)
        or the data's size (where it is known before loading)."""
        from tpukit.data import sources

        runtime = self._matching_runtime(config)
        if runtime is not None:
            config.check_for(runtime.kind, runtime.replicas)
        inputs = self.inputs_for(config)
        available = sources.planned_train_examples(config, inputs.get("data"), inputs.get("validation_data"))
        if available is not None:
            split = config.validation_split is not None and inputs.get("validation_data") is None
            config.check_examples(available, self._replicas(config), split)

    def _matching_runtime(self, config: RunConfig):
        if self._runtime is not None and self._runtime_key == runtime_key(config):
            return self._runtime
        return None

    def _replicas(self, config: RunConfig) -> int:
        runtime = self._matching_runtime(config)
        return runtime.replicas if runtime is not None else (config.replicas or 1)

    def _form_values(self) -> Dict[str, Any]:
        """The values the view holds (a widget view may hold refused ones); the config's own otherwise."""
        values = getattr(self.view, "values", None)
        return values() if values is not None else self._config.to_dict()


def _unread_settings(model: str) -> Dict[str, Any]:
    """The kind-specific settings (LoRA, text) the model named `model` does not read, at their defaults: the form
    hides their fields for such a model, so a value typed there for a preset goes when the model changes, rather
    than refusing Train over a field no longer shown."""
    import dataclasses

    from tpukit import registry
    from tpukit.models.source import KIND_SETTINGS, ModelSource

    target = registry.provided("model", model)
    reads = target.reads if isinstance(target, ModelSource) else ()
    defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    return {name: defaults[name] for name in KIND_SETTINGS if name not in reads and name != "model_parallel"}
