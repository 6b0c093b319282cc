"""Test set-up: real TensorFlow on the CPU, split into 8 logical devices before any op.

Simulated replicas must exist before TensorFlow initializes its devices, so
this runs at collection time, once per session. Tests that need a different
device layout (or a fresh process) run the CLI in a subprocess. Where
TensorFlow is not installed (Colab's TPU package set), JAX gets the 8 devices
instead, through XLA's flag, before it starts.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parents[1]
REPLICAS = 8


def pytest_configure(config):
    from tpukit.hardware import backend, cpu, jax_devices

    if backend.installed("tensorflow"):
        cpu.configure_cpu_replicas(REPLICAS)
    else:
        jax_devices._xla_flag(f"--xla_force_host_platform_device_count={REPLICAS}")


@pytest.fixture(autouse=True)
def no_global_state_leaks():
    """Each test leaves the Keras dtype policy as it found it (style habit 7)."""
    yield
    if "keras" in sys.modules:
        import keras

        name = keras.config.dtype_policy().name
        if name != "float32":
            keras.config.set_dtype_policy("float32")
            pytest.fail(f"test leaked the global dtype policy {name!r}")


def run_cli(*args, timeout=300, env=None, cwd=None):
    """Run `python -m tpukit ...` in a fresh process; returns the CompletedProcess."""
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "tpukit", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd or REPO)


def pytest_report_header(config):
    """Which front-end stack this run tests (make test runs the widget tests under ipywidgets 8 and 7)."""
    try:
        import ipywidgets

        return f"ipywidgets {ipywidgets.__version__}"
    except ImportError:
        return "ipywidgets not installed"
