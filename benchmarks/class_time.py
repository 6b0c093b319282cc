"""The workshop day of each track on the clock: class time counted from the notebook scripts, plus waiting and start-up.

notebooks/README.md's plan and docs/teaching.md quote what this prints; tests/test_class_time.py holds them to it.
One rule for every notebook, on the cells its track's copy holds (notebooks/_tracks.py: a cell tagged "tf" is left
out of the TPU track's copy, one tagged "jax" out of the GPU/CPU track's):

- prose: 200 words of markdown a minute (read, with a question or two);
- code: 1 minute a code cell (read it, run it, look at what it prints; an exercise's three cells count too);
- exercises: 10 minutes more for each (predict, run the self-check, talk the answer through);
- a section whose level-2 heading starts with "Extra:" is not class time, up to the next level-2 heading that does
  not. Extras sit at a notebook's end, after its class part, for after class;
- waiting: the minutes the notebook's cells keep the class waiting on the track's Colab runtime (WAITING below:
  the upper end of each notebook's estimate, from its training cells' own sizes and the downloads and installs
  it does; no TPU or GPU measured them). Counted on top of the minute a code cell, so a short cell's run is counted
  twice: the count errs long;
- start-up: STARTUP_MINUTES a notebook, to open it from its link, delete the previous runtime and connect a fresh
  one (a Colab account holds one TPU runtime at a time), and run its install and import cells.

Breaks, lunch and the morning's accounts are outside the count; DAY_MINUTES is what a 6-hour day leaves for them
(45 min lunch, two 15-min breaks, 20 min of accounts and runtimes: 4 h 25). The rule is a reading estimate, not a
class timed by the clock. Run from the repository root:

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
STARTUP_MINUTES = 3
DAY_MINUTES = 4 * 60 + 25
# The workshop day's order of each track (notebooks/README.md's plan).
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
# Each track's extra notebooks: on the plan, outside the day.
EXTRA_NOTEBOOKS = {
    "tpu": ("03_determinism", "08_fine_tuning_a_pretrained_model"),
    "gpu": ("05_profiling_and_input_pipelines", "08_fine_tuning_a_pretrained_model"),
}
# Minutes a notebook keeps the class waiting on the track's runtime (TPU v5e-1; GPU T4), class part and extras.
WAITING = {
    "tpu": {
        "00_quick_start": 2,  # the pip install of tpukit, then two small compiles
        "01_connect_and_distribute": 1,  # its lessons run on 8 CPU devices
        "02_mixed_precision": 2,  # its speed model: 2 x Dense 4096 at a batch of 8192, four policies
        "03_determinism": 1,
        "04_keras_training": 7,  # CIFAR-10's 170 MB download, two training cells of under 2 min each
        "05_profiling_and_input_pipelines": 3,  # colab.setup() adds TensorBoard and xprof: tens of seconds of pip
        "07_jax_and_tpu_scale_out": 1,
        "08_fine_tuning_a_pretrained_model": 8,  # the notebook's own estimate of its downloads, compiles and steps
    },
    "gpu": {
        "00_quick_start": 1,
        "01_connect_and_distribute": 1,  # 8 logical CPU devices for its lessons
        "02_mixed_precision": 2,  # float16 on Tensor Cores; its speed model is larger on a GPU
        "03_determinism": 1,
        "04_keras_training": 7,  # CIFAR-10's download, two training cells of about 2 min each
        "05_profiling_and_input_pipelines": 2,
        "06_scaling_out": 2,  # its clusters run on the CPU: 67 s measured on a 2-core CPU
        "08_fine_tuning_a_pretrained_model": 12,  # the notebook's own estimate
    },
}
LEFT_OUT = {"tpu": "tf", "gpu": "jax"}  # the tag of the cells a track's copy leaves out
EXTRA = re.compile(r"^## (.+)$", re.MULTILINE)


def minutes(cells, track: str) -> float:
    """Class minutes of a notebook's cells (jupytext cells) on a track: prose, code cells and exercises."""
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


def notebook(name: str, track: str, at: str | None = None) -> dict:
    """One notebook's minutes on a track: class, waiting, start-up and their sum (rounded once, here)."""
    class_minutes = round(minutes(_cells(name, at), track))
    waiting = WAITING[track][name]
    return {
        "name": name,
        "class": class_minutes,
        "waiting": waiting,
        "startup": STARTUP_MINUTES,
        "clock": class_minutes + waiting + STARTUP_MINUTES,
    }


def day(track: str, at: str | None = None) -> dict:
    """A track's day: its notebooks in order, the extras, and the totals the plan quotes."""
    rows = [notebook(name, track, at) for name in TRACKS[track]]
    totals = {key: sum(row[key] for row in rows) for key in ("class", "waiting", "startup", "clock")}
    return {"rows": rows, "totals": totals, "extras": [notebook(name, track, at) for name in EXTRA_NOTEBOOKS[track]]}


def _cells(name: str, at: str | None):
    import jupytext

    if at is None:
        return jupytext.read(REPO / "notebooks" / f"{name}.py").cells
    text = subprocess.run(
        ["git", "show", f"{at}:notebooks/{name}.py"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return jupytext.reads(text, fmt="py:percent").cells


def hm(total: float) -> str:
    """Minutes as the plan writes them: "4 h 05"."""
    whole = round(total)
    return f"{whole // 60} h {whole % 60:02d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", help="count the notebooks of this git revision instead of the working tree")
    args = parser.parse_args()
    for track in TRACKS:
        plan = day(track, args.at)
        print(f"{track.upper()} track: class + waiting + start-up = on the clock (minutes)")
        for row in plan["rows"]:
            print(f"  {row['name']:<36} {row['class']:>3} + {row['waiting']:>2} + {row['startup']} = {row['clock']:>3}")
        t = plan["totals"]
        verdict = "fits" if t["clock"] <= DAY_MINUTES else "does NOT fit"
        print(
            f"  {'total':<36} {t['class']:>3} + {t['waiting']:>2} + {t['startup']:>2} = {t['clock']:>3}"
            f" ({hm(t['clock'])}; {verdict} the day's {hm(DAY_MINUTES)})"
        )
        for row in plan["extras"]:
            print(
                f"  extra {row['name']:<30} {row['class']:>3} + {row['waiting']:>2} + {row['startup']} = {row['clock']:>3}"
            )


if __name__ == "__main__":
    main()
