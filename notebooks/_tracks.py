"""Colab's runtime for each notebook, per workshop track, and the GPU track's copies.

A notebook opened from a Colab badge starts on the runtime its metadata names (what "Change runtime type"
writes: `accelerator`, and `colab.gpuType`). One .ipynb names one runtime, and six notebooks serve both tracks,
so the notebooks here name the TPU runtime (v5e-1; 06, which needs TensorFlow, names a T4), and the GPU/CPU
track's badges open copies in `gpu/` that differ from them only in naming a T4. The scripts (NAME.py) stay the
one source: after `jupytext --sync`, run

    python notebooks/_tracks.py

(tests/behaviour/test_notebooks.py checks every copy against its notebook, and every runtime.)
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TPU = {"accelerator": "TPU", "colab": {"gpuType": "V5E1"}}
GPU = {"accelerator": "GPU", "colab": {"gpuType": "T4"}}
# The notebooks the GPU/CPU track opens from gpu/ (06 opens on a T4 from here already).
GPU_COPIES = ("00_quick_start", "01_connect_and_distribute", "02_mixed_precision", "03_determinism",
              "04_keras_training", "05_profiling_and_input_pipelines")


def runtime(metadata: dict) -> dict:
    """The runtime a notebook's metadata names, as {"accelerator": ..., "colab": {"gpuType": ...}}."""
    return {"accelerator": metadata.get("accelerator"),
            "colab": {"gpuType": (metadata.get("colab") or {}).get("gpuType")}}


def gpu_copy(notebook: dict) -> dict:
    """`notebook` on the GPU runtime: the same cells, Colab's runtime metadata changed."""
    colab = {**(notebook["metadata"].get("colab") or {}), **GPU["colab"]}
    return {**notebook, "metadata": {**notebook["metadata"], "accelerator": GPU["accelerator"], "colab": colab}}


def main() -> None:
    (HERE / "gpu").mkdir(exist_ok=True)
    for name in GPU_COPIES:
        notebook = json.loads((HERE / f"{name}.ipynb").read_text())
        text = json.dumps(gpu_copy(notebook), indent=1, ensure_ascii=False) + "\n"
        (HERE / "gpu" / f"{name}.ipynb").write_text(text)
        print(f"wrote notebooks/gpu/{name}.ipynb")


if __name__ == "__main__":
    main()
