"""The notebooks of each workshop track, written from the scripts: run `python notebooks/_tracks.py` after an edit.

NAME.py, a jupytext percent script, is the one source of a notebook. Most cells serve both tracks. Where Keras on
JAX (the TPU track, Colab's TPU runtime) and Keras on TensorFlow (the GPU/CPU track) need different code, the
script holds one whole cell for each, tagged "jax" and "tf" (`# %% tags=["tf"]`), and each track's notebook keeps
only its own, so a class reads one backend's code. This writes

- NAME.ipynb, which the Colab badges open: for the runtime its header names (what "Change runtime type" writes:
  `accelerator` and `colab.gpuType`), the TPU v5e-1 runtime and no "tf" cells, or for 06 (TensorFlow only) a T4
  and no "jax" cells;
- gpu/NAME.ipynb for the notebooks the GPU/CPU track shares (GPU_COPIES): a T4 and no "jax" cells.

Each runs top to bottom on its track's runtime; a notebook with no tagged cells runs on any runtime. A cell keeps
the id it had in the file written before (a new cell gets one from its text), so an unchanged cell's id does not
change. tests/behaviour/test_notebooks.py checks that every .ipynb is what this writes.
"""

import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TPU = {"accelerator": "TPU", "colab": {"gpuType": "V5E1"}}
GPU = {"accelerator": "GPU", "colab": {"gpuType": "T4"}}
# The notebooks the GPU/CPU track opens from gpu/ (06 opens on a T4 from here already).
GPU_COPIES = ("00_quick_start", "01_connect_and_distribute", "02_mixed_precision", "03_determinism",
              "04_keras_training", "05_profiling_and_input_pipelines", "08_fine_tuning_a_pretrained_model")
LEFT_OUT = {"tpu": "tf", "gpu": "jax"}  # a track's notebooks leave out the cells tagged for the other backend


def runtime(metadata: dict) -> dict:
    """The runtime a notebook's metadata names, as {"accelerator": ..., "colab": {"gpuType": ...}}."""
    return {"accelerator": metadata.get("accelerator"),
            "colab": {"gpuType": (metadata.get("colab") or {}).get("gpuType")}}


def track_cells(cells: list, track: str) -> list:
    """The cells `track` ("tpu" or "gpu") reads: all but those tagged for the other backend."""
    return [cell for cell in cells if LEFT_OUT[track] not in cell["metadata"].get("tags", [])]


def badge_track(script: Path) -> str:
    """The track of NAME.ipynb, from the runtime the script's header names."""
    import jupytext

    return "gpu" if jupytext.read(script).metadata.get("accelerator") == "GPU" else "tpu"


def render(script: Path, track: str, target: Path) -> str:
    """The text of `script`'s notebook for `track`, with the cell ids `target` has now where a cell is unchanged."""
    import jupytext

    notebook = jupytext.read(script)
    notebook.cells = track_cells(notebook.cells, track)
    if track == "gpu":
        notebook.metadata.update(accelerator=GPU["accelerator"],
                                 colab={**(notebook.metadata.get("colab") or {}), **GPU["colab"]})
    if script.stem in GPU_COPIES:
        notebook.cells[0].source = own_header(notebook.cells[0].source, script.stem, track)
    written = json.loads(jupytext.writes(notebook, fmt="ipynb"))
    before = json.loads(target.read_text())["cells"] if target.exists() else []
    ids = {(c["cell_type"], "".join(c["source"])): c.get("id") for c in before}
    for cell in written["cells"]:
        source = "".join(cell["source"])
        cell["id"] = ids.get((cell["cell_type"], source)) or hashlib.sha1(source.encode()).hexdigest()[:8]
    return json.dumps(written, indent=1, ensure_ascii=False) + "\n"


HEADERS = {
    "tpu": "**Accelerator:** TPU: the TPU track's copy (Colab's TPU runtime, Keras on JAX); the GPU/CPU track's is "
           "[gpu/{name}.ipynb]({colab}/notebooks/gpu/{name}.ipynb)",
    "gpu": "**Accelerator:** GPU or CPU: the GPU/CPU track's copy (Colab's GPU or CPU runtime, Keras on TensorFlow); "
           "the TPU track's is [{name}.ipynb]({colab}/notebooks/{name}.ipynb)",
}
COLAB = "https://colab.research.google.com/github/tpukit/tpukit/blob/main"


def own_header(header: str, name: str, track: str) -> str:
    """The first cell of a track's copy of `name`: its Colab badge opens this copy, and its Accelerator line names
    the track and links the other track's copy (the script's line, for both, names every runtime)."""
    lines = header.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("**Accelerator:**"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].strip() or lines[i].startswith("**"))
    lines[start:end] = [HEADERS[track].format(name=name, colab=COLAB)]
    own = f"{COLAB}/notebooks/{'gpu/' if track == 'gpu' else ''}{name}.ipynb"
    return _badge("\n".join(lines), own)


def _badge(header: str, own: str) -> str:
    """`header` with its Open in Colab badge's link set to `own`."""
    badge = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]("
    at = header.index(badge) + len(badge)
    return header[:at] + own + header[header.index(")", at):]


def targets() -> list:
    """(script, track, .ipynb path) for every notebook this writes."""
    scripts = sorted(p for p in HERE.glob("*.py") if not p.name.startswith("_"))
    found = [(script, badge_track(script), script.with_suffix(".ipynb")) for script in scripts]
    return found + [(HERE / f"{name}.py", "gpu", HERE / "gpu" / f"{name}.ipynb") for name in GPU_COPIES]


def main() -> None:
    (HERE / "gpu").mkdir(exist_ok=True)
    for script, track, target in targets():
        text = render(script, track, target)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            print(f"wrote notebooks/{target.relative_to(HERE)} ({track.upper()} track)")


if __name__ == "__main__":
    main()
