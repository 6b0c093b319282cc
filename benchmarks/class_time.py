"""Class time of the two workshop tracks, counted from the notebook scripts (notebooks/README.md's figures).

One count for every notebook, on the cells its track's copy holds (notebooks/_tracks.py: a cell tagged "tf" is
left out of the TPU track's copy, one tagged "jax" out of the GPU/CPU track's):

- prose: 200 words of markdown a minute (read, with a question or two);
- code: 1 minute a code cell (read it, run it, look at what it prints; an exercise's three cells count too);
- exercises: 10 minutes more for each (predict, run the self-check, talk the answer through);
- a section whose level-2 heading starts with "Extra:" is not class time, up to the next level-2 heading that does
  not. Extras sit at a notebook's end, after its class part, for after class.

Calibrated against an instructor who timed the two tracks by the clock, on main as of commit f100cbf: 6 h 05 for the
TPU track and 5 h 55 for the GPU/CPU track; this count gives 6 h 03 and 5 h 53 there
(`python benchmarks/class_time.py --at f100cbf`). It leaves breaks out and does not know how long a cell runs:
the run-time columns of the README say that. Run from the repository root:

    python benchmarks/class_time.py              # the working tree
    python benchmarks/class_time.py --at main    # the notebooks as a git revision has them
"""

import argparse
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE = 200
MINUTES_PER_CODE_CELL = 1
MINUTES_PER_EXERCISE = 10
# The workshop day's order of each track (notebooks/README.md's plan); the other notebooks are extras there.
TRACKS = {
    "tpu": (
        "00_quick_start",
        "01_connect_and_distribute",
        "02_mixed_precision",
        "04_keras_training",
        "05_profiling_and_input_pipelines",
        "07_jax_and_tpu_scale_out",
    ),
    "gpu": (
        "00_quick_start",
        "01_connect_and_distribute",
        "02_mixed_precision",
        "03_determinism",
        "04_keras_training",
        "06_scaling_out",
    ),
}
# Each track's extra notebook: on the plan, outside the day.
EXTRA_NOTEBOOKS = {
    "tpu": ("03_determinism", "08_fine_tuning_a_pretrained_model"),
    "gpu": ("05_profiling_and_input_pipelines", "08_fine_tuning_a_pretrained_model"),
}
LEFT_OUT = {"tpu": "tf", "gpu": "jax"}  # the tag of the cells a track's copy leaves out
EXTRA = re.compile(r"^## (.+)$", re.M)


def minutes(cells, track: str) -> float:
    """Class minutes of a notebook's cells (jupytext cells) on a track, by the count above."""
    total, extra = 0.0, False
    for cell in cells:
        if LEFT_OUT[track] in cell.metadata.get("tags", []):
            continue
        if cell.cell_type == "markdown":
            heading = EXTRA.search(cell.source)
            if heading:
                extra = heading.group(1).startswith("Extra:")
            if not extra:
                total += len(cell.source.split()) / WORDS_PER_MINUTE
        elif not extra:
            total += MINUTES_PER_CODE_CELL
            if "exercise" in cell.metadata.get("tags", []):
                total += MINUTES_PER_EXERCISE
    return total


def _cells(name: str, at: str | None):
    import jupytext

    if at is None:
        return jupytext.read(REPO / "notebooks" / f"{name}.py").cells
    text = subprocess.run(
        ["git", "show", f"{at}:notebooks/{name}.py"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return jupytext.reads(text, fmt="py:percent").cells


def _hm(total: float) -> str:
    whole = round(total)
    return f"{whole // 60} h {whole % 60:02d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", help="count the notebooks of this git revision instead of the working tree")
    args = parser.parse_args()
    for track, names in TRACKS.items():
        print(f"{track.upper()} track")
        total = 0.0
        for name in names:
            count = minutes(_cells(name, args.at), track)
            total += count
            print(f"  {name}: {count:.0f} min")
        print(f"  total: {total:.0f} min ({_hm(total)})")
        for name in EXTRA_NOTEBOOKS[track]:
            print(f"  extra {name}: {minutes(_cells(name, args.at), track):.0f} min")


if __name__ == "__main__":
    main()
