"""The teaching notebooks: written out for each track, listed in notebooks/README.md, and runnable top to bottom.

Each notebook is a jupytext percent script `notebooks/NAME.py` (the source) plus
`notebooks/NAME.ipynb` and `notebooks/gpu/NAME.ipynb` (written from it by notebooks/_tracks.py, for Colab: each
track's notebook leaves out the cells tagged for the other backend). Files whose name starts with "_"
are not notebooks. Execution uses a fresh ipykernel from this test's own Python
(a kernelspec written to a temporary directory, so no installed kernelspec is
needed or used), with TPUKIT_SMOKE=1 and a temporary working directory, so the
runs a notebook makes land there.
"""

import functools
import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

from conftest import execute_notebook, unset_env

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
SCRIPTS = sorted(p for p in NOTEBOOKS.glob("*.py") if not p.name.startswith("_"))
IDS = [p.stem for p in SCRIPTS]
CELL_TIMEOUT_S = 300
COLAB = "https://colab.research.google.com/github/tpukit/tpukit/blob/main/notebooks/"
SEED_BULLETS = 32  # bullets in sections 1-5 of the seed notes (5 + 6 + 9 + 7 + 5)


@functools.cache
def _script(path):
    """The Python script at `path` as a module (notebooks/_tracks.py, benchmarks/class_time.py: not packages)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tracks():
    return _script(NOTEBOOKS / "_tracks.py")


def _cells(path):
    import jupytext

    notebook = jupytext.read(path)
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def test_notebooks_exist():
    assert SCRIPTS, f"no notebooks found in {NOTEBOOKS}"


PLAN_ROW = re.compile(
    r"^\| (?:\d|extra) \| \[[^\]]+\]\([^)]*/(\w+)\.ipynb\) \| (\d+) min \| (\d+) min \| (\d+) min \| (\d+) min \|", re.M
)


@pytest.mark.parametrize("track", ["tpu", "gpu"])
def test_the_workshop_day_fits_on_the_clock_and_the_plan_quotes_the_count(track):
    """Each track's day (class time, waiting and start-up) is at most 4 h 25, and notebooks/README.md says so."""
    class_time = _script(REPO / "benchmarks" / "class_time.py")
    day = class_time.day(track)
    assert day["totals"]["clock"] <= class_time.DAY_MINUTES, (
        f"the {track} track's day is {class_time.hm(day['totals']['clock'])} on the clock, over "
        f"{class_time.hm(class_time.DAY_MINUTES)}: move a section into an `Extra:` one (python benchmarks/class_time.py)"
    )
    readme = (NOTEBOOKS / "README.md").read_text()
    heading = "**TPU track**" if track == "tpu" else "**GPU/CPU track**"
    section = readme[readme.index(heading) :]
    section = section[: section.index("\n\n", section.index("| Order |"))]
    quoted = [(m[0], *map(int, m[1:])) for m in PLAN_ROW.findall(section)]
    counted = [(r["name"], r["class"], r["waiting"], r["startup"], r["clock"]) for r in day["rows"] + day["extras"]]
    assert quoted == counted, "notebooks/README.md's plan is not what python benchmarks/class_time.py counts"
    assert f"**{class_time.hm(day['totals']['clock'])}**" in section


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_pair_in_sync(script):
    """Every .ipynb written from the script is what notebooks/_tracks.py writes from it now."""
    tracks = _tracks()
    fix = "python notebooks/_tracks.py"
    written = [(track, target) for source, track, target in tracks.targets() if source == script]
    assert written and written[0][1] == script.with_suffix(".ipynb")
    for track, target in written:
        assert target.exists(), f"{target.name} is missing; create it with: {fix}"
        assert target.read_text() == tracks.render(script, track, target), (
            f"{target.relative_to(NOTEBOOKS)} is not what {script.name} gives; run: {fix}"
        )


def test_no_orphan_ipynb():
    orphans = [p.name for p in NOTEBOOKS.glob("*.ipynb") if not p.with_suffix(".py").exists()]
    assert not orphans, f"notebooks without a .py source: {orphans}"


# ---- the first cell ---------------------------------------------------------------

KERAS_IMPORT = re.compile(r"^\s*(import|from)\s+(keras|tensorflow|tpukit|jax)\b", re.M)


def _code_cells(path):
    return [source for kind, source in _cells(path) if kind == "code"]


def test_first_cells_are_identical():
    """Every notebook starts with the same code cell (install tpukit if missing, pick the backend, SMOKE)."""
    firsts = {script.name: _code_cells(script)[0] for script in SCRIPTS}
    reference = firsts[SCRIPTS[0].name]
    differ = [name for name, source in firsts.items() if source != reference]
    assert not differ, f"the first code cell of {differ} differs from {SCRIPTS[0].name}'s; copy it over exactly"


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_first_cell_sets_the_backend_before_keras(script):
    cells = _code_cells(script)
    first = cells[0]
    assert 'os.environ["KERAS_BACKEND"]' in first, f"{script.name}: the first code cell does not set KERAS_BACKEND"
    assert 'SMOKE = os.environ.get("TPUKIT_SMOKE") == "1"' in first, f"{script.name}: SMOKE is not defined first"
    assert not KERAS_IMPORT.search(first), (
        f"{script.name}: the first cell imports {KERAS_IMPORT.search(first).group(0).strip()!r}, "
        "which loads Keras before its backend is chosen"
    )
    installs = re.findall(r'"pip", "install"[^)]*\)', first)
    assert installs and all(re.search(r"tensorflow|jax|keras", line) is None for line in installs), (
        f"{script.name}: the first cell must install tpukit only: {installs}"
    )
    later = [i for i, source in enumerate(cells) if KERAS_IMPORT.search(source)]
    assert not later or later[0] > 0, f"{script.name}: Keras or TensorFlow is imported before the backend is chosen"


@pytest.mark.parametrize(
    "preset, has_tf, expected",
    [("jax", True, "jax"), ("tensorflow", False, "tensorflow"), (None, True, "tensorflow"), (None, False, "jax")],
)
def test_first_cell_picks_the_backend(monkeypatch, capsys, preset, has_tf, expected):
    """Run the first cell: a set KERAS_BACKEND is kept, else TensorFlow where importable, else JAX; nothing installed."""
    import subprocess

    def no_install(*args, **kwargs):
        raise AssertionError(f"the first cell tried to install while tpukit is importable: {args}")

    monkeypatch.setattr(subprocess, "run", no_install)
    monkeypatch.syspath_prepend(str(REPO))
    unset_env(monkeypatch, "KERAS_BACKEND")  # the cell writes it
    if preset is not None:
        monkeypatch.setenv("KERAS_BACKEND", preset)
    if not has_tf:
        monkeypatch.setitem(sys.modules, "tensorflow", None)  # find_spec("tensorflow") is then None
    elif importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed in this environment")
    namespace = {}
    exec(compile(_code_cells(SCRIPTS[0])[0], "first-cell", "exec"), namespace)
    assert os.environ["KERAS_BACKEND"] == expected
    assert namespace["SMOKE"] == (os.environ.get("TPUKIT_SMOKE") == "1")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and f"Keras backend: {expected}" in out, out


# ---- notebooks/README.md --------------------------------------------------------


def _readme():
    path = NOTEBOOKS / "README.md"
    assert path.exists(), "notebooks/README.md is missing"
    return path.read_text()


def test_readme_badges_point_at_the_notebooks():
    text = _readme()
    linked = re.findall(re.escape(COLAB) + r"([^)\s]+)", text)
    missing = [name for name in linked if not (NOTEBOOKS / name).exists()]
    assert not missing, f"Colab links to notebooks that do not exist: {missing}"
    unlisted = [p.name for p in SCRIPTS if p.with_suffix(".ipynb").name not in linked]
    assert not unlisted, f"notebooks without an Open-in-Colab badge in notebooks/README.md: {unlisted}"


def test_readme_coverage_table():
    """Every seed-notes bullet (sections 1-5) has a row naming the notebook(s) that teach it, and they exist."""
    lines = _readme().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|") and "Topic" in line), None)
    assert start is not None, "notebooks/README.md has no coverage table (a header row with 'Topic')"
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        body.append(line)
    assert len(body) >= SEED_BULLETS, f"the coverage table has {len(body)} rows, fewer than the {SEED_BULLETS} bullets"
    sections = {row.split("|")[1].strip() for row in body}
    assert sections == {"1", "2", "3", "4", "5"}, f"rows should be numbered by seed-notes section 1-5: {sections}"
    for row in body:
        names = re.findall(r"\(([0-9][^)]*\.ipynb)\)", row)
        assert names, f"coverage row names no notebook: {row}"
        for name in names:
            assert (NOTEBOOKS / name).exists(), f"coverage row points at a missing notebook {name}: {row}"
        for notebook, title in _sections(names[0], row.split("|")[4]):
            headings = _headings(notebook)
            assert any(h.startswith(title) for h in headings), (
                f"the coverage table names section {title!r} of {notebook}, which has no such heading: {row}"
            )


def _sections(default, cell):
    """(notebook stem, heading) pairs from a Section cell: 'A; B; 05: C' (C belongs to notebook 05)."""
    for part in filter(None, (p.strip() for p in cell.split(";"))):
        match = re.match(r"(\d\d): (.*)", part)
        number, title = match.groups() if match else (default[:2], part)
        stem = next((p.stem for p in SCRIPTS if p.name.startswith(number)), None)
        assert stem is not None, f"the coverage table names notebook {number}, which does not exist: {cell}"
        yield stem, re.sub(r" \([^)]*\)$", "", title)


def _headings(stem):
    text = (NOTEBOOKS / f"{stem}.py").read_text()
    return [m.strip() for m in re.findall(r"^# #{2,3} (.+)$", text, flags=re.M)]


# ---- exercises -----------------------------------------------------------------
#
# An exercise is three code cells in a row, tagged "exercise" (the reader's `...` placeholder), "solution"
# (folded; it fills the answer in only when TPUKIT_SOLUTIONS=1) and "self-check" (tpukit.teaching's `answered` and
# `check`). The solution cell's metadata lists `wrong_answers`: plausible mistakes, as code, that its self-check
# must reject. The notebook runs below set TPUKIT_SOLUTIONS=1, so every self-check passes with the solutions; the
# test here checks the other sides.

EXERCISE_DRIVER = """
import json, sys
cells = json.load(open(sys.argv[1]))
namespace = {}
for source in cells["setup"]:
    exec(compile(source, "setup", "exec"), namespace)
assert namespace.get("SOLUTIONS") is False, "the setup turned the solutions on"

def attempt(*sources, solutions=False):
    scope = dict(namespace, SOLUTIONS=solutions)
    try:
        for source in sources:
            exec(compile(source, "exercise", "exec"), scope)
    except Exception as e:
        lines = e._render_traceback_() if hasattr(e, "_render_traceback_") else None
        return {"error": type(e).__name__, "message": str(e), "lines": lines}
    return None

results = []
for ex in cells["exercises"]:
    results.append({
        "unanswered": attempt(ex["exercise"], ex["check"]),
        "wrong": {w: attempt(ex["exercise"], w, ex["check"]) for w in ex["wrong"]},
        "answered": attempt(ex["exercise"], ex["solution"], ex["check"], solutions=True),
    })
print("RESULTS " + json.dumps(results))
"""


def _notebook_code_cells(path, track="gpu"):
    import jupytext

    return [cell for cell in _tracks().track_cells(jupytext.read(path).cells, track) if cell.cell_type == "code"]


def _lesson_tags(cell):
    return [tag for tag in cell.metadata.get("tags", []) if tag not in ("jax", "tf")]


def _exercises(path, track="gpu"):
    cells = _notebook_code_cells(path, track)
    found = []
    for i, cell in enumerate(cells):
        if "exercise" in cell.metadata.get("tags", []):
            group = cells[i : i + 3]
            assert [_lesson_tags(c) for c in group] == [["exercise"], ["solution"], ["self-check"]], (
                f"{path.name}: an exercise cell must be followed by a solution and a self-check cell: {cell.source!r}"
            )
            assert re.search(r"=\s*\.\.\.", cell.source), f"{path.name}: an exercise without a `...` placeholder"
            assert "if SOLUTIONS:" in group[1].source, f"{path.name}: a solution cell not guarded by `if SOLUTIONS:`"
            found.append(
                {
                    "exercise": cell.source,
                    "solution": group[1].source,
                    "check": group[2].source,
                    "wrong": list(group[1].metadata.get("wrong_answers", [])),
                }
            )
    return found


EXERCISE_SCRIPTS = [p for p in SCRIPTS if _exercises(p)]


def _folded(script):
    """Whether the script has cells for one backend only (tagged "jax" or "tf")."""
    import jupytext

    return any({"jax", "tf"} & set(c.metadata.get("tags", [])) for c in jupytext.read(script).cells)


# What a notebook needs beyond the runtime it opens on, and where that comes from. Colab's TPU runtime has no
# KerasHub until tpukit.colab.setup(hub=True), which test_colab_sets.py checks in Colab's TPU set.
NEEDS = {
    "08_fine_tuning_a_pretrained_model": (
        "keras_hub",
        "KerasHub, which Colab's TPU runtime gets from "
        "tpukit.colab.setup(hub=True) (tests/behaviour/"
        "test_colab_sets.py checks that install)",
    )
}
NO_TENSORFLOW = (
    "the GPU/CPU track's notebook runs Keras on TensorFlow, which this environment (Colab's TPU runtime "
    "as it ships) has not; its TPU track runs here"
)


ELSEWHERE = (
    "TPUKIT_NOTEBOOK_TRACKS={tracks}: the {track} track's copy runs in Colab's TPU set in the same `make test` "
    "(.ci/colab-env.sh tpu), on the packages that runtime ships"
)


def _track_runs(scripts):
    """(script, track) to run: a notebook with one-backend cells on both tracks (TPU: Keras on JAX, GPU: on
    TensorFlow), each without the other's cells; any other as it is, on the backend the first cell picks here.
    A track whose framework is not installed here (TensorFlow in Colab's TPU set) is skipped, saying why, and so is
    one left out of TPUKIT_NOTEBOOK_TRACKS (`make test`'s main suite leaves the TPU track to Colab's TPU set)."""
    has_tf = importlib.util.find_spec("tensorflow") is not None
    tracks = os.environ.get("TPUKIT_NOTEBOOK_TRACKS", "tpu,gpu")
    runs = []
    for script in scripts:
        module, why = NEEDS.get(script.stem, (None, ""))
        needs = (
            [pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{script.stem} needs {why}")]
            if module
            else []
        )
        if not _folded(script):
            runs.append(pytest.param(script, None, id=script.stem, marks=needs))
            continue
        for track in ("tpu", "gpu"):
            marks = needs + ([pytest.mark.skip(reason=NO_TENSORFLOW)] if track == "gpu" and not has_tf else [])
            if track not in tracks.split(","):
                marks = marks + [pytest.mark.skip(reason=ELSEWHERE.format(tracks=tracks, track=track))]
            runs.append(pytest.param(script, track, id=f"{script.stem}-{track}", marks=marks))
    return runs


def _track_env(env, track):
    if track is not None:
        env["KERAS_BACKEND"] = {"tpu": "jax", "gpu": "tensorflow"}[track]
    return env


@pytest.mark.parametrize("script", EXERCISE_SCRIPTS, ids=[p.stem for p in EXERCISE_SCRIPTS])
def test_solution_cells_fold_in_colab_and_jupyterlab(script):
    """Colab folds a cell with a `# @title` line and cellView "form"; JupyterLab hides it with source_hidden."""
    notebook = json.loads(script.with_suffix(".ipynb").read_text())
    solutions = [c for c in notebook["cells"] if "solution" in c["metadata"].get("tags", [])]
    assert solutions, f"{script.name}: exercises without solution cells"
    for cell in solutions:
        source = "".join(cell["source"])
        where = f"{script.name}: the solution cell {source[:60]!r}"
        assert cell["metadata"].get("cellView") == "form", f"{where} has no cellView: form (Colab shows its code)"
        assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, f"{where} is not source_hidden"
        assert re.match(r"# @title \S", source), f"{where} does not start with a `# @title` line"
        wrong = cell["metadata"].get("wrong_answers")
        assert wrong and all(isinstance(w, str) and w.strip() for w in wrong), (
            f"{where} lists no wrong_answers for its self-check to reject"
        )


@pytest.mark.slow
@pytest.mark.parametrize("script, track", _track_runs(EXERCISE_SCRIPTS))
def test_exercises_fail_unanswered_and_wrong_and_pass_answered(script, track, tmp_path):
    """Each self-check stops in one line with a hint on the placeholder, rejects every listed wrong answer, and
    passes with the solution filled in.

    The notebook's first two code cells (install/backend, imports and setup) run in a fresh Python, then each
    exercise: placeholder + self-check, placeholder + each wrong answer + self-check, and placeholder + solution
    + self-check.
    """
    import subprocess

    setup = [cell.source for cell in _notebook_code_cells(script, track or "gpu")[:2]]
    cells = tmp_path / "cells.json"
    cells.write_text(json.dumps({"setup": setup, "exercises": _exercises(script, track or "gpu")}))
    env = _track_env({**_kernel_env(), "MPLBACKEND": "Agg"}, track)
    env.pop("TPUKIT_SOLUTIONS")
    done = subprocess.run(
        [sys.executable, "-c", EXERCISE_DRIVER, str(cells)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=CELL_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULTS "))
    for number, result in enumerate(json.loads(line[len("RESULTS ") :]), start=1):
        where = f"{script.name} exercise {number}"
        unanswered = result["unanswered"]
        assert unanswered and unanswered["error"] == "NotAnswered" and "Hint:" in unanswered["message"], (
            f"{where}: the self-check does not stop with a hint on the placeholder: {unanswered}"
        )
        assert unanswered["lines"] and len(unanswered["lines"]) == 1, f"{where}: not one line: {unanswered}"
        for wrong, outcome in result["wrong"].items():
            assert outcome and outcome["error"] == "WrongAnswer", (
                f"{where}: the self-check does not reject the wrong answer {wrong!r}: {outcome}"
            )
        assert result["answered"] is None, f"{where}: the solution fails its check: {result['answered']}"


# ---- execution -----------------------------------------------------------------


def _kernel_env():
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "COLAB_TPU_ADDR", "TPU_NAME")}
    env.update(
        TPUKIT_SMOKE="1",
        TPUKIT_SOLUTIONS="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    # conftest gives this process 8 JAX CPU devices; a kernel starts like a fresh runtime (one device), and a
    # notebook that wants simulated replicas asks for them itself (connect(replicas=8)).
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags)
    return env


@pytest.mark.slow
@pytest.mark.parametrize("script, track", _track_runs(SCRIPTS))
def test_notebook_runs(script, track, kernel_dir, tmp_path):
    import jupytext

    notebook = jupytext.read(script)
    notebook.cells = _tracks().track_cells(notebook.cells, track or "gpu")
    started = time.perf_counter()
    try:
        execute_notebook(notebook, kernel_dir, tmp_path, _track_env(_kernel_env(), track), CELL_TIMEOUT_S)
    finally:
        # The executed copy (outputs included) stays in tmp_path for a look after a failure.
        import nbformat

        nbformat.write(notebook, str(tmp_path / f"{script.stem}.executed.ipynb"))
    print(f"{script.name}{f' ({track} track)' if track else ''}: {time.perf_counter() - started:.1f} s at smoke size")
    if script.stem == "08_fine_tuning_a_pretrained_model":
        _the_fine_tune_changed_what_the_model_writes(notebook)


def _the_fine_tune_changed_what_the_model_writes(notebook):
    """08 prints the plain fine-tune's samples one above the other; after the fit the model writes otherwise."""
    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )
    before = re.search(r"^before: (.+)$", printed, re.M)
    after = re.search(r"^after:  (.+)$", printed, re.M)
    assert before and after, "08 prints no 'before:' and 'after:' samples"
    assert before.group(1) != after.group(1), f"the fine-tune left the sample as it was: {before.group(1)}"


@pytest.mark.slow
def test_run_all_without_solutions_stops_at_the_first_exercise_in_one_line(kernel_dir, tmp_path):
    """What a learner sees after "Run all": the cells up to the first self-check run, and it stops there with one
    line (tpukit.teaching's NotAnswered, drawn without a traceback), not a wall of red."""
    import jupytext
    from nbclient.exceptions import CellExecutionError

    script = NOTEBOOKS / "00_quick_start.py"
    notebook = jupytext.read(script)
    env = _kernel_env()
    env.pop("TPUKIT_SOLUTIONS")
    with pytest.raises(CellExecutionError) as stopped:
        execute_notebook(notebook, kernel_dir, tmp_path, env, CELL_TIMEOUT_S)
    assert stopped.value.ename == "NotAnswered", stopped.value
    failed = [c for c in notebook.cells if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    assert len(failed) == 1 and "self-check" in failed[0].metadata.get("tags", []), failed
    error = next(o for o in failed[0].outputs if o.output_type == "error")
    assert len(error.traceback) == 1 and "Hint:" in error.traceback[0], error.traceback


# ---- the runtime each notebook opens on (Colab's metadata), per track --------------------------------------


def test_every_notebook_opens_on_its_tracks_colab_runtime():
    """A Colab badge opens the runtime the .ipynb names: the TPU track's notebooks a v5e-1, 06 (TensorFlow only)
    a T4; the GPU/CPU track's badges open gpu/ copies that name a T4. A track's notebook holds no cell tagged for
    the other backend (test_pair_in_sync checks that each is what _tracks.py writes)."""
    tracks = _tracks()
    for script in SCRIPTS:
        metadata = json.loads(script.with_suffix(".ipynb").read_text())["metadata"]
        expected = tracks.GPU if script.stem == "06_scaling_out" else tracks.TPU
        assert tracks.runtime(metadata) == expected, (script.name, metadata)
    copies = sorted(p.stem for p in (NOTEBOOKS / "gpu").glob("*.ipynb"))
    assert copies == sorted(tracks.GPU_COPIES)
    for script, track, target in tracks.targets():
        notebook = json.loads(target.read_text())
        assert tracks.runtime(notebook["metadata"]) == (tracks.GPU if track == "gpu" else tracks.TPU), target
        other = tracks.LEFT_OUT[track]
        assert not [c for c in notebook["cells"] if other in c["metadata"].get("tags", [])], (target, other)


def test_the_readme_badges_open_each_tracks_notebooks():
    """The workshop plan's GPU/CPU track links its notebooks' gpu/ copies; everything else the notebooks."""
    readme = (NOTEBOOKS / "README.md").read_text()
    gpu_track = readme[readme.index("**GPU/CPU track**") : readme.index("How the day is counted")]
    for name in _tracks().GPU_COPIES:
        assert f"notebooks/gpu/{name}.ipynb" in gpu_track, name


def test_each_tracks_copy_opens_itself_and_names_its_track():
    """A copy's Open in Colab badge opens that copy (a GPU/CPU copy opened the TPU track's), and a notebook both
    tracks share says in its header which track's copy it is and links the other."""
    tracks = _tracks()
    for script, track, target in tracks.targets():
        header = "".join(json.loads(target.read_text())["cells"][0]["source"])
        badge = f"colab-badge.svg)]({tracks.COLAB}/{target.relative_to(NOTEBOOKS.parent).as_posix()})"
        assert badge in header, f"{target}: its badge opens another notebook"
        if script.stem in tracks.GPU_COPIES:
            own = "the GPU/CPU track's copy" if track == "gpu" else "the TPU track's copy"
            assert own in header, f"{target}: its header does not say it is {own}"
