"""How long each notebook runs at full size: the run-time columns of notebooks/README.md's workshop plan.

Runs the named notebooks (default: all) top to bottom, one after another, with nbclient in a fresh kernel of this
interpreter, at teaching size (TPUKIT_SMOKE unset) with the solutions filled in (TPUKIT_SOLUTIONS=1), each in its own
temporary directory; prints seconds and the load average before and after. A notebook runs as its track's copy has
it (notebooks/_tracks.py): the TPU track's cells with KERAS_BACKEND=jax, else the GPU/CPU track's. Run it on an idle
machine:

    .venv/bin/python benchmarks/notebook_times.py                       # TensorFlow (the GPU/CPU track)
    KERAS_BACKEND=jax .venv-colab-tpu/bin/python benchmarks/notebook_times.py 00_quick_start 07_jax_and_tpu_scale_out
"""

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(names):
    import jupytext
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    kernels = Path(tempfile.mkdtemp())
    (kernels / "timing").mkdir()
    (kernels / "timing" / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "timing",
                "language": "python",
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "TPUKIT_SMOKE"}
    env.update(TPUKIT_SOLUTIONS="1", PYTHONPATH=str(REPO))
    # A kernel starts like a fresh runtime: a notebook that wants 8 devices asks for them itself.
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f)
    spec = importlib.util.spec_from_file_location("_tracks", REPO / "notebooks" / "_tracks.py")
    tracks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tracks)
    track = "tpu" if env.get("KERAS_BACKEND") == "jax" or importlib.util.find_spec("tensorflow") is None else "gpu"
    for name in names or sorted(p.stem for p in (REPO / "notebooks").glob("[0-9]*.py")):
        notebook = jupytext.read(REPO / "notebooks" / f"{name}.py")
        notebook.cells = tracks.track_cells(notebook.cells, track)
        manager = KernelManager(kernel_name="timing", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
        client = NotebookClient(
            notebook, km=manager, timeout=1200, allow_errors=False, resources={"metadata": {"path": tempfile.mkdtemp()}}
        )
        load, started = os.getloadavg()[0], time.perf_counter()
        try:
            client.execute(env=env)
            outcome = "ok"
        except Exception as e:  # a failing notebook: say which, go on with the others
            outcome = f"failed: {type(e).__name__}"
        print(
            f"{name} ({track.upper()} track): {time.perf_counter() - started:.0f} s, {outcome} (load average {load:.1f} before, "
            f"{os.getloadavg()[0]:.1f} after)",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
