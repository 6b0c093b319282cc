"""The CPU under TensorFlow: one device, or `replicas=N` simulated replicas on logical CPU devices.

Logical CPU devices are global state that TensorFlow fixes when it first initializes its
devices; `configure_cpu_replicas` is the one place that sets them. The CPU's facts and its
recommended precision come from `cpu_probe`, measured here.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from tpukit.hardware import mirrored
from tpukit.hardware.cpu_probe import cpu_probe
from tpukit.hardware.runtime import Request, RestartRequired, Runtime, TensorFlowRuntime
from tpukit.precision import FLOAT32, MIXED_BFLOAT16

KIND = "cpu"


def configure_cpu_replicas(n: int) -> int:
    """Split the CPU into at least `n` logical devices; returns how many there are.

    Must run before TensorFlow initializes its devices (before any op).
    Asking again for up to the configured number changes nothing.
    """
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    existing = tf.config.get_logical_device_configuration(cpu)
    if existing and len(existing) >= n:
        return len(existing)
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError:
        have = len(tf.config.list_logical_devices("CPU"))
        if have >= n:
            return have
        raise RestartRequired(
            f"replicas={n} needs {n} logical CPU devices, but TensorFlow already started with {have}. "
            "Restart the runtime (Colab: Runtime > Restart session) and connect before any other TensorFlow work."
        ) from None
    return n


def available(request: Request) -> Optional[str]:
    """None: there is always a CPU."""
    return None


def connect(request: Request, skipped=()) -> Runtime:
    """TensorFlow on the CPU: its one device, or `request.replicas` simulated replicas under a MirroredStrategy."""
    import tensorflow as tf

    replicas = request.replicas
    if replicas and replicas > 1:
        configure_cpu_replicas(replicas)
    devices = [d.name for d in tf.config.list_logical_devices("CPU")]
    if replicas and replicas > 1:
        devices = devices[:replicas]
        strategy = mirrored.strategy(devices)
    else:
        devices = devices[:1]
        strategy = tf.distribute.get_strategy()
    device_facts = tuple(facts() for _ in devices)
    policy, reason = precision()
    return TensorFlowRuntime(
        backend="tensorflow",
        backend_reason=request.backend_reason,
        kind=KIND,
        devices=tuple(devices),
        replicas=len(devices),
        strategy=strategy,
        simulated=bool(replicas and replicas > 1),
        device_facts=device_facts,
        precision=policy,
        precision_reason=reason,
        skipped=tuple(skipped),
    )


def facts() -> Dict[str, Any]:
    """This CPU's facts, from the probe: its name, measured peaks and, under TensorFlow, XLA's 16-bit gain."""
    probe = cpu_probe()
    found = {
        "name": probe["cpu"],
        "peak_flops": {"fp32": probe["fp32_flops"], "bf16": probe["bf16_flops"], "fp16": None},
        "measured": measured_where(probe),
    }
    gain = xla_gain(probe)
    if gain:
        found["xla_gain"] = gain
    speed = kernel_speed(probe)
    if speed:
        found["kernel_speed"] = speed
    return found


def kernel_speed(probe: Dict[str, Any]) -> Dict[str, Dict[str, float]]:
    """How fast the framework's own CPU kernels ran each 16-bit type against float32, from the probe:
    {"bf16": {"matmul": x, "conv": y}, "fp16": {...}} (only the types the probe timed)."""
    out = {}
    for short in ("bf16", "fp16"):
        needed = (f"{short}_flops", f"{short}_conv_flops", "fp32_flops", "fp32_conv_flops")
        if all(probe.get(k) for k in needed):
            out[short] = {
                "matmul": probe[f"{short}_flops"] / probe["fp32_flops"],
                "conv": probe[f"{short}_conv_flops"] / probe["fp32_conv_flops"],
            }
    return out


def measured_where(probe: Dict[str, Any]) -> str:
    """How the decisions that cite the probe say where its figures come from."""
    return f"as {probe['forced']} (TPUKIT_CPU_PROBE) says" if probe.get("forced") else "measured here"


def xla_gain(probe: Dict[str, Any]) -> Dict[str, Dict[str, float]]:
    """How much faster XLA ran each 16-bit type than TensorFlow's own CPU kernels, from the probe:
    {"bf16": {"matmul": x, "conv": y}, "fp16": {...}}; empty where the probe timed no XLA (JAX)."""
    if "bf16_xla_flops" not in probe:
        return {}
    return {
        short: {
            "matmul": probe[f"{short}_xla_flops"] / probe[f"{short}_flops"],
            "conv": probe[f"{short}_conv_xla_flops"] / probe[f"{short}_conv_flops"],
        }
        for short in ("bf16", "fp16")
    }


def precision() -> Tuple[str, str]:
    """bfloat16 when this CPU's measured bf16 matmuls and conv gradients both beat float32 by more than 20%.

    Matmuls alone are not enough: on an AMD EPYC under TensorFlow 2.21 bf16 matmuls ran 1.3x faster,
    and a CNN's bf16 conv gradients made its steps ten times slower.
    """
    return precision_from(cpu_probe())


def precision_from(probe: Dict[str, Any]) -> Tuple[str, str]:
    matmul = probe["bf16_flops"] / probe["fp32_flops"]
    conv = probe["bf16_conv_flops"] / probe["fp32_conv_flops"]
    measured = f"bfloat16 runs matmuls at {matmul:.1f}x and conv gradients at {conv:.1f}x float32's speed on this CPU"
    where = measured_where(probe)
    if min(matmul, conv) > 1.2:
        return MIXED_BFLOAT16.name, f"{where}: {measured}."
    return FLOAT32.name, f"{where}: {measured}, not enough to gain."
