"""Test set-up: real TensorFlow on the CPU, split into 8 logical devices before any op.

Simulated replicas must exist before TensorFlow initializes its devices, so
this runs at collection time, once per session. Tests that need a different
device layout (or a fresh process) run the CLI in a subprocess. Where
TensorFlow is not installed (Colab's TPU package set), JAX gets the 8 devices
instead, through XLA's flag, before it starts.
"""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = Path(__file__).resolve().parents[1]
REPLICAS = 8
# Two CPUs' probe figures (tests/cpu_probes/NAME.json): "bf16_faster" (native bfloat16; XLA slower for it) and
# "bf16_slower" (TensorFlow emulates bfloat16; XLA ten times faster for its convs). The suite passes with either
# forced on every test: TPUKIT_CPU_PROBE=tests/cpu_probes/NAME.json make test.
CPU_PROBES = REPO / "tests" / "cpu_probes"


def pytest_configure(config):
    from tpukit import backend
    from tpukit.hardware import cpu, jax_devices

    if backend.installed("tensorflow"):
        cpu.configure_cpu_replicas(REPLICAS)
    else:
        jax_devices.xla_flag(f"--xla_force_host_platform_device_count={REPLICAS}")


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


@pytest.fixture
def cpu_probe_says(monkeypatch, tmp_path):
    """Make the CPU probe give a test the figures its decision needs, in this process and in those it starts.

    `cpu_probe_says("bf16_slower", bf16_flops=5e10)` writes the figures to a file and points
    TPUKIT_CPU_PROBE at it (the way a user pins them), then starts this process's probe and connection fresh
    (`tpukit.global_state`), so the next `connect()` reads them. Both come back after the test. A decision that
    follows from measuring the host is tested with each outcome, never with what this machine happens to measure.
    """
    from tpukit import global_state
    from tpukit.hardware import connect, cpu_probe  # noqa: F401  (their state is registered once imported)

    with contextlib.ExitStack() as held:

        def use(name: str, **figures) -> dict:
            entry = {**json.loads((CPU_PROBES / f"{name}.json").read_text()), **figures}
            path = tmp_path / f"cpu_probe-{name}.json"
            path.write_text(json.dumps(entry))
            monkeypatch.setenv(cpu_probe.FORCE, str(path))
            held.enter_context(global_state.fresh("cpu_probe", "connection"))
            return entry

        yield use


def save_tiny_gemma(path, *, num_query_heads=1, hidden_dim=4, intermediate_dim=8):
    """A tiny Gemma preset at `path` with its tokenizer (a SentencePiece model of 256 pieces trained on 20 help
    topics), as KerasHub's save_to_preset writes it: one layer, head_dim 4, one key-value head."""
    import keras_hub

    from tpukit.data import text

    proto = text.train_sentencepiece(text.pydoc_topics().documents[:20], 256)
    backbone = keras_hub.models.GemmaBackbone(
        vocabulary_size=256,
        num_layers=1,
        num_query_heads=num_query_heads,
        num_key_value_heads=1,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        head_dim=4,
    )
    preprocessor = keras_hub.models.GemmaCausalLMPreprocessor(keras_hub.models.GemmaTokenizer(proto=proto))
    keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=preprocessor).save_to_preset(str(path))
    return path


def unset_env(monkeypatch, *names):
    """Unset `names` for one test, so that what the code under test writes to them is undone after it too.

    monkeypatch's `delenv` of a variable that is not set records nothing: a value the code then wrote (a KERAS_BACKEND
    chosen, a credential read from a secret) outlived the test and reached whichever tests pytest-xdist ran next in
    that process. Setting it first records it."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def run_cli(*args, timeout=300, env=None, cwd=None):
    """Run `python -m tpukit ...` in a fresh process; returns the CompletedProcess."""
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tpukit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=cwd or REPO,
    )


def pytest_report_header(config):
    """Which front-end stack this run tests (make test runs the widget tests under ipywidgets 8 and 7), and whose
    CPU figures its decisions follow."""
    forced = os.environ.get("TPUKIT_CPU_PROBE")
    probe = f"CPU probe pinned: TPUKIT_CPU_PROBE={forced}" if forced else "CPU probe: this machine's"
    try:
        import ipywidgets

        return [f"ipywidgets {ipywidgets.__version__}", probe]
    except ImportError:
        return ["ipywidgets not installed", probe]


@pytest.fixture(scope="session")
def kernel_dir(tmp_path_factory):
    """A kernelspec for this interpreter (the venv's python), private to the test session: the notebook tests run
    their kernels from it."""
    import json
    import sys

    import ipykernel  # noqa: F401  (the kernel below runs it; the test extra installs it)

    root = tmp_path_factory.mktemp("kernels")
    spec = root / "tpukit-test"
    spec.mkdir()
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "tpukit tests",
                "language": "python",
            }
        )
    )
    return root


def execute_notebook(notebook, kernel_dir, cwd, env, timeout):
    """Run every cell of `notebook` (nbformat, changed in place with its outputs) in a fresh kernel from `kernel_dir`'s
    kernelspec, in folder `cwd`, with environment `env` and `timeout` seconds a cell; nbclient's CellExecutionError
    on a failing cell. The kernel is shut down after, also on a failure: nbclient shuts down only a kernel manager
    it made itself (`cleanup_kc=True` asks it to for this one), and a kernel left running kept 0.5-1.4 GB and
    1-13% of a core until the session ended."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    km = AsyncKernelManager(
        kernel_name="tpukit-test", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)])
    )
    client = NotebookClient(
        notebook,
        km=km,
        timeout=timeout,
        allow_errors=False,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(env=env, cleanup_kc=True)
