"""The hardware facts `connect()` looks up: device kinds, datasheet peaks, TPU generations.

Constants apart from the code that finds the hardware; it imports nothing of tpukit.
"""

from __future__ import annotations

from typing import Dict

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


# Memory (HBM) of one device, a replica, in bytes, from Google's TPU system architecture pages: v2 and v3 cores
# hold 8 and 16 GiB (2 cores a chip); v4, v5e, v5p and v6e chips 32, 16, 95 and 32 GiB.
HBM_BYTES = {
    "TPU v2": 8 * 2**30,
    "TPU v3": 16 * 2**30,
    "TPU v4": 32 * 2**30,
    "TPU v5e": 16 * 2**30,
    "TPU v5p": 95 * 2**30,
    "TPU v6e": 32 * 2**30,
}


TPU_TYPES = (
    ("v2", "TPU v2"),
    ("v3", "TPU v3"),
    ("v4", "TPU v4"),
    ("v5litepod", "TPU v5e"),
    ("v5e", "TPU v5e"),
    ("v5p", "TPU v5p"),
    ("v6e", "TPU v6e"),
)


def tpu_type_from_kind(device_kind: str) -> str:
    """JAX's device_kind ('TPU v2', 'TPU v5 lite', 'TPU v6 lite') as a PEAK_FLOPS key."""
    kind = device_kind.replace(" lite", "e").strip()
    return kind if kind in PEAK_FLOPS else "TPU"


def gpu_peak(name: str) -> Dict[str, float]:
    """The datasheet peaks of a GPU by its name ('Tesla T4', 'NVIDIA A100-SXM4-40GB'), or {} when unknown."""
    return next((v for k, v in PEAK_FLOPS.items() if k.lower() in name.lower()), {})
