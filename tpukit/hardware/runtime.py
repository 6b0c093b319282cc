"""What `connect()` is asked (`Request`), what it returns (`Runtime`), and its two errors.

Every discovery path (tpu, gpu, cpu, jax_devices, tf_multiworker) takes a `Request` and returns a
`Runtime`. A caller that only reads a `Runtime` (the panel, run records) or catches a `ConnectError`
loads no discovery code: this module imports only `specs`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple

from tpukit.hardware.specs import compute_key


@dataclasses.dataclass(frozen=True)
class Request:
    """`connect()`'s arguments, checked, with the Keras backend already chosen (`backend`, and why)."""

    accelerator: str = "auto"
    backend: str = "tensorflow"
    backend_reason: str = ""
    tpu: Optional[str] = None
    replicas: Optional[int] = None
    deterministic: bool = False
    tpu_resolver: Optional[Callable[[str], Any]] = None
    timeout: Optional[float] = None


class ConnectError(RuntimeError):
    """The asked-for accelerator cannot be used; the message says why and what to do."""


class RestartRequired(ConnectError):
    """Restart the runtime first: a setting TensorFlow fixes at start-up is needed, or TensorFlow is stuck waiting."""


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What `connect()` found and how to train on it.

    `strategy` is a `tf.distribute.Strategy`: build and compile models in
    `strategy.scope()`. `skipped` maps each kind not used to the reason.
    """

    backend: str
    kind: str
    devices: Tuple[str, ...]
    replicas: int
    strategy: Any = dataclasses.field(repr=False, compare=False)
    simulated: bool = False
    workers: int = 1
    process_index: int = 0  # this process among `workers`; 0 is the chief, the one that writes the run
    device_facts: Tuple[Dict[str, Any], ...] = ()
    precision: str = "float32"
    precision_reason: str = ""
    skipped: Tuple[Tuple[str, str], ...] = ()
    backend_reason: str = ""  # why this Keras backend (`tpukit.backend.choose`): KERAS_BACKEND, the config, ...
    strategy_reason: str = ""  # which strategy and why, where there was a choice (TF: one GPU or more; JAX: any)
    # JAX: whether XLA's deterministic GPU ops were on when JAX started (connect(deterministic=True) before it
    # did); None on TensorFlow, whose op determinism a run turns on itself
    xla_deterministic_ops: Optional[bool] = None

    @property
    def skipped_reasons(self) -> Dict[str, str]:
        return dict(self.skipped)

    def peak_flops(self, precision: str) -> Optional[float]:
        """Peak FLOP/s of all replicas together for a precision, or None when unknown."""
        key = compute_key(precision)
        per = [f.get("peak_flops", {}).get(key) for f in self.device_facts]
        if self.kind == "cpu":
            # Simulated replicas share one CPU: its peak counts once.
            return per[0] if per and per[0] else None
        if not per or any(p is None for p in per):
            return None
        return float(sum(per)) * self.workers

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "strategy"}
        d["skipped"] = dict(self.skipped)
        d["devices"] = list(self.devices)
        d["device_facts"] = [dict(f) for f in self.device_facts]
        return d

    def describe(self) -> str:
        """A few lines a person can read: what was found, what was skipped and why."""
        what = f"{self.kind.upper()}"
        if self.simulated:
            what += f" with {self.replicas} simulated replicas (logical CPU devices)"
        elif self.kind != "cpu" or self.replicas > 1:
            what += f", {self.replicas} replica{'s' if self.replicas != 1 else ''}"
        if self.workers > 1:
            what += f" on {self.workers} workers"
        names = sorted({f.get("name", "") for f in self.device_facts if f.get("name")})
        lines = [f"Connected: {what} ({self.backend}; {', '.join(names) or 'devices: ' + ', '.join(self.devices)})"]
        if self.backend_reason:
            lines.append(f"Backend: {self.backend} ({self.backend_reason})")
        if self.strategy_reason:
            lines.append(f"Strategy: {self.strategy_reason}")
        lines.append(f"Precision: {self.precision} recommended; {self.precision_reason}")
        for kind, why in self.skipped:
            lines.append(f"Skipped {kind.upper()}: {why}")
        return "\n".join(lines)
