"""What `connect()` returns, its errors, and the hardware facts it looks up (device kinds, datasheet peaks).

The value and the constants, apart from the code that finds the hardware: every module of
`tpukit.hardware` imports this one, and it imports nothing of tpukit, so a caller that only reads a
`Runtime` (the panel, run records) or catches a `ConnectError` loads no discovery code.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Tuple

KINDS = ("tpu", "gpu", "cpu")

# Dense peak FLOP/s per chip (16-bit matrix units, float32), from vendor datasheets.
# A TPU core here is one TensorFlow replica: v2/v3 have 2 cores a chip.
PEAK_FLOPS = {
    "TPU v2": {"bf16": 45e12 / 2, "fp32": 45e12 / 2},
    "TPU v3": {"bf16": 123e12 / 2, "fp32": 123e12 / 2},
    "TPU v4": {"bf16": 275e12, "fp32": 275e12},
    "TPU v5e": {"bf16": 197e12, "fp32": 197e12},
    "TPU v5p": {"bf16": 459e12, "fp32": 459e12},
    "TPU v6e": {"bf16": 918e12, "fp32": 918e12},
    "Tesla T4": {"fp16": 65e12, "bf16": 8.1e12, "fp32": 8.1e12},
    "NVIDIA L4": {"fp16": 121e12, "bf16": 121e12, "fp32": 30e12},
    "Tesla V100": {"fp16": 125e12, "bf16": 15.7e12, "fp32": 15.7e12},
    "Tesla P100": {"fp16": 18.7e12, "bf16": 9.3e12, "fp32": 9.3e12},
    "NVIDIA A100": {"fp16": 312e12, "bf16": 312e12, "fp32": 156e12},  # fp32 via TF32
    "NVIDIA H100": {"fp16": 989e12, "bf16": 989e12, "fp32": 495e12},
    "NVIDIA H200": {"fp16": 989e12, "bf16": 989e12, "fp32": 495e12},
}


def compute_key(precision: str) -> str:
    """The key device facts use for a policy's compute type (peaks, the CPU probe's XLA gain): fp32, bf16, fp16."""
    return {"mixed_bfloat16": "bf16", "mixed_float16": "fp16"}.get(precision, "fp32")


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
    strategy_reason: str = ""  # which strategy, and why, where there was a choice (one GPU or several)

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
        if self.strategy_reason:
            lines.append(f"Strategy: {self.strategy_reason}")
        lines.append(f"Precision: {self.precision} recommended; {self.precision_reason}")
        for kind, why in self.skipped:
            lines.append(f"Skipped {kind.upper()}: {why}")
        return "\n".join(lines)


_TPU_TYPES = (("v2", "TPU v2"), ("v3", "TPU v3"), ("v4", "TPU v4"), ("v5litepod", "TPU v5e"),
              ("v5e", "TPU v5e"), ("v5p", "TPU v5p"), ("v6e", "TPU v6e"))


def tpu_type_from_kind(device_kind: str) -> str:
    """JAX's device_kind ('TPU v2', 'TPU v5 lite', 'TPU v6 lite') as a PEAK_FLOPS key."""
    kind = device_kind.replace(" lite", "e").strip()
    return kind if kind in PEAK_FLOPS else "TPU"
