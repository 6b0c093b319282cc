"""The panel in JupyterLab 4, in Debian's Chromium at 1280x800: what a workshop participant sees on a laptop.

JupyterLab serves two notebooks on 127.0.0.1: one builds the panel on TensorFlow (the default backend here),
the other with `RunConfig(backend="jax")`, so its run starts in a fresh kernel of its own. The tests run every
cell through JupyterLab's own command (the app is exposed to the page for that), then click the panel as a
person would, and check that its main view (the status chip, Train/Stop, the status and progress lines, the
section picker and the section shown) fits the first screen before and after a run and a profiled run.

Screenshots go where tests/behaviour/test_browser.py puts them (test-artifacts/screenshots/, or $TPUKIT_SCREENSHOTS).
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import warnings

import pytest

from conftest import REPO
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    MISSING,
    RUN_TIMEOUT_MS,
    SETUP,
    SKIP_ENV,
    VIEWPORT,
    PanelPage,
    _children,
    _free_port,
    jupyter_env,
    log_tail,
    stop_server,
    wait_listening,
)

LAB_MISSING = "; ".join(
    filter(
        None,
        [
            MISSING,
            ""
            if importlib.util.find_spec("jupyterlab")
            else "the jupyterlab package is missing (pip install -e '.[test]')",
        ],
    )
)
if os.environ.get(SKIP_ENV) == "1":  # (test_browser's import has skipped already; kept for a direct import)
    pytest.skip(f"BROWSER TESTS NOT RUN ({SKIP_ENV}=1)", allow_module_level=True)
if LAB_MISSING:
    pytest.fail(
        f"the JupyterLab browser tests cannot run: {LAB_MISSING}. Run: {SETUP}  (or {SKIP_ENV}=1 to skip them)",
        pytrace=False,
    )

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from tpukit.config import RunConfig  # noqa: E402


pytestmark = pytest.mark.browser
START = dict(dataset="digits", model="mlp", epochs=1, batch_size=32)  # 40 steps an epoch (10% validates)


def _notebook(path, config: dict) -> None:
    """A notebook (with kernelspec metadata, which JupyterLab needs) whose one cell builds the panel."""
    source = f"import tpukit\npanel = tpukit.panel(tpukit.RunConfig(**{config!r}))"
    path.write_text(
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": "code",
                        "execution_count": None,
                        "id": "panel",
                        "metadata": {},
                        "outputs": [],
                        "source": source,
                    }
                ],
                "metadata": {
                    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                    "language_info": {"name": "python"},
                },
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )


class Lab:
    def __init__(self, proc, port, root, log):
        self.proc, self.port, self.root, self.log = proc, port, root, log
        self.logdir = root / "runs"

    def url(self, notebook: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{notebook}?reset"

    def log_tail(self, lines=40) -> str:
        return log_tail(self.log, lines)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 with the two notebooks; stops it, its kernels and the panels' TensorBoards after."""
    root = tmp_path_factory.mktemp("lab")
    logdir = root / "runs"
    _notebook(root / "panel.ipynb", {**START, "logdir": str(logdir)})
    _notebook(root / "jax.ipynb", {**START, "backend": "jax", "name": "lab-jax", "logdir": str(logdir)})
    env = jupyter_env(root, drop=("KERAS_BACKEND", "XLA_FLAGS"), JUPYTERLAB_WORKSPACES_DIR=str(root / "workspaces"))
    # JupyterLab's "notified about official Jupyter news?" toast sat over the panel's bottom right corner.
    (root / "config" / "labconfig").mkdir(parents=True)
    (root / "config" / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        "--LabApp.expose_app_in_browser=True",
        f"--ServerApp.root_dir={root}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log = root / "lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Lab(proc, port, root, log)
    try:
        wait_listening(proc, port, 90, "JupyterLab", server.log_tail)
        yield server
    finally:
        kernels = _children(proc.pid)  # SIGTERM shuts them down; any left are ended by pid
        stop_server(proc, kernels, logdir)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium-profile-lab")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT
        )
        try:
            yield context
        finally:
            context.close()


class LabPanel(PanelPage):
    """The panel in a JupyterLab notebook: its root is the widget with the panel's class."""

    def __init__(self, page, server):
        super().__init__(page, server)
        self.root = page.locator(".tpukit-panel")

    def button(self, label):
        return self.root.get_by_role("button", name=label, exact=True)

    def field(self, label):
        return self.root.get_by_label(label, exact=True)

    def box(self):
        return self.root.bounding_box()


def _open(browser, lab, notebook: str) -> LabPanel:
    """Open `notebook` in JupyterLab, run all its cells, wait for the panel."""
    page = browser.new_page()
    page.set_default_timeout(30_000)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(lab.url(notebook), timeout=120_000)
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
        "&& window.jupyterapp.shell.currentWidget.sessionContext "
        "&& window.jupyterapp.shell.currentWidget.sessionContext.session",
        timeout=120_000,
    )
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.ready")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    ui = LabPanel(page, lab)
    try:
        expect(ui.button("Train")).to_be_enabled(timeout=120_000)
    except AssertionError as e:
        raise AssertionError(f"{e}\npage errors: {errors}\nJupyterLab log:\n{lab.log_tail()}") from None
    return ui


def _main_view_fits(ui, when: str, scroll: bool = True) -> dict:
    """The panel's main view on the first screen at 1280x800, inside the notebook's visible area (below
    JupyterLab's bars, above its status bar): the top (chip, actions, status and progress lines), the section
    picker, and the start of the section shown. With `scroll`, the panel is first scrolled to the top of the
    notebook (as a person scrolls to it); without, it stays where running the cell left it.

    No table or chart of the section is wider than the output (a profile's long paths and op names wrap). Whether
    the section ends on the screen too depends on its content: measured and returned, with a warning if not.
    """
    if scroll:
        ui.root.evaluate("e => e.scrollIntoView({block: 'start'})")
        ui.page.wait_for_timeout(300)
    visible = ui.root.evaluate(
        "e => Math.min(window.innerHeight, (e.closest('.jp-WindowedPanel-outer') "
        "|| e.closest('.jp-Notebook')).getBoundingClientRect().bottom)"
    )
    title = ui.root.locator(".widget-toggle-buttons button.mod-active").inner_text().strip()
    section = ui.section(title)
    top, shown = ui.section("Run").bounding_box(), section.bounding_box()
    picker = ui.root.locator(".widget-toggle-buttons").bounding_box()
    panel, train = ui.box(), ui.button("Train").bounding_box()
    line = ui.progress_line().bounding_box()
    assert top and picker and shown and panel and train and line, when
    sizes = {
        "when": when + ("" if scroll else ", as the cell left it"),
        "visible_bottom": round(visible),
        "panel_top": round(panel["y"]),
        "panel_height": round(panel["height"]),
        "train_bottom": round(train["y"] + train["height"]),
        "progress_line_bottom": round(line["y"] + line["height"]),
        "picker_bottom": round(picker["y"] + picker["height"]),
        "section": title,
        "section_bottom": round(shown["y"] + shown["height"]),
        "section_content_right": round(
            section.evaluate(
                "e => Math.max(0, ...Array.from(e.querySelectorAll('table, img'), c => c.getBoundingClientRect()"
                ".right))"
            )
        ),
        "section_right": round(shown["x"] + shown["width"]),
    }
    assert 0 <= top["y"] and sizes["train_bottom"] <= visible, (when, "Train is off the first screen", sizes)
    assert sizes["progress_line_bottom"] <= picker["y"] and sizes["picker_bottom"] <= visible, (when, sizes)
    assert shown["y"] <= visible - 100, (when, "the section shown starts below the first screen", sizes)
    assert sizes["section_content_right"] <= sizes["section_right"] + 1, (
        when,
        "a table or chart is wider than the output, its right side cut",
        sizes,
    )
    if sizes["section_bottom"] > visible:
        warnings.warn(
            f"JupyterLab at 1280x800, {sizes['when']}: the {title} section ends at "
            f"{sizes['section_bottom']} px, below the notebook's visible bottom ({visible:.0f} px)"
        )
    return sizes


OUTPUT_BESIDE_FILES = 845  # px: a cell's output area at 1280x800 beside JupyterLab's file browser (the UX report)


def _runs_table_fits(ui, when: str) -> dict:
    """The Runs section's table, MEASURED with JupyterLab's file browser open at 1280x800: no wider than the
    output area (about 845 px), no horizontal scroll in its box, and no column whose text is clipped or squeezed
    to wrap (every cell's text is as wide as its box allows, and every run row is one line tall)."""
    ui.page.evaluate("() => window.jupyterapp.shell.activateById('filebrowser')")
    ui.page.wait_for_timeout(300)
    assert ui.page.evaluate("() => !window.jupyterapp.shell.leftCollapsed"), "the file browser is not open"
    ui.show("Runs")
    table = ui.section("Runs").locator("table").first
    sizes = table.evaluate("""t => {
        const out = t.closest('.jp-OutputArea-output') || t.closest('.tpukit-section-runs');
        const box = t.parentElement;  // the div that would scroll
        const cells = Array.from(t.querySelectorAll('th, td')).filter(c => c.textContent.trim());
        const clipped = cells.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent);
        const header = Array.from(t.rows[0].cells, c => c.textContent);
        const rows = Array.from(t.rows).filter(r => r.cells.length === header.length);
        return {output: out.getBoundingClientRect().width, table: t.getBoundingClientRect().width,
                table_right: t.getBoundingClientRect().right, output_right: out.getBoundingClientRect().right,
                scrolls: box.scrollWidth > box.clientWidth + 1, clipped: clipped, header: header,
                row_heights: rows.map(r => Math.round(r.getBoundingClientRect().height)),
                columns: Array.from(t.rows[0].cells, c => Math.round(c.getBoundingClientRect().width))};
    }""")
    sizes["when"] = when
    assert sizes["output"] <= OUTPUT_BESIDE_FILES + 20, ("the output is wider than beside the file browser", sizes)
    assert sizes["table"] <= min(OUTPUT_BESIDE_FILES, sizes["output"]) and (
        sizes["table_right"] <= sizes["output_right"] + 1
    ), (when, "the runs table is wider than the output", sizes)
    assert not sizes["scrolls"] and not sizes["clipped"], (when, "a column is clipped", sizes)
    assert sizes["header"][-1] == "fingerprint" and max(sizes["row_heights"]) < 1.5 * min(sizes["row_heights"]), (
        when,
        "a header or row wraps",
        sizes,
    )
    return sizes


def _shot(ui, tmp_path, name: str) -> None:
    """The first screen as the person sees it (not the whole panel): JupyterLab's bars included."""
    path = tmp_path / name
    ui.page.screenshot(path=str(path), animations="disabled")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / name).write_bytes(path.read_bytes())


def test_in_jupyterlab_the_main_view_fits_the_first_screen_before_and_after_a_run_and_a_profiled_run(
    lab, browser, tmp_path
):
    ui = _open(browser, lab, "panel.ipynb")
    sizes = [_main_view_fits(ui, "at first", scroll=False)]
    _shot(ui, tmp_path, "lab-panel-opened.png")
    sizes.append(_main_view_fits(ui, "at first"))
    _shot(ui, tmp_path, "lab-panel-first.png")

    ui.show("Settings")  # a bad value: marked under its field, and Train says why it is off
    ui.set("batch / replica", "1.5")
    expect(ui.section("Settings")).to_contain_text("batch size must be a whole number ≥ 1; received '1.5'.")
    expect(ui.button("Train")).to_be_disabled()
    expect(ui.section("Run")).to_contain_text("Train is off: batch size must be a whole number ≥ 1")
    sizes.append(_main_view_fits(ui, "with a field error"))
    _shot(ui, tmp_path, "lab-panel-bad-batch.png")
    ui.set("batch / replica", "32")
    expect(ui.button("Train")).to_be_enabled()

    ui.set("run name", "lab-train")
    ui.button("Train").click()
    expect(ui.run_row("lab-train")).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    expect(ui.progress_line()).to_contain_text(re.compile(r"^completed: epoch 1/1\s+·\s+step 40/40"))
    ui.show("Progress")
    sizes.append(_main_view_fits(ui, "after a run"))
    _shot(ui, tmp_path, "lab-panel-trained.png")

    ui.show("Runs")  # the run's model: into the kernel, then exported; its row says it loads
    expect(ui.root.locator(".tpukit-section-runs select")).to_contain_text("-lab-train · model saved")
    ui.button("Load model").click()
    expect(ui.section("Run")).to_contain_text("is in the kernel: panel.model", timeout=60_000)
    ui.button("Export .keras").click()
    expect(ui.section("Run")).to_contain_text("Exported ", timeout=60_000)
    assert list(lab.logdir.glob("exports/*-lab-train.keras")), "no .keras file under <logdir>/exports"
    _shot(ui, tmp_path, "lab-panel-runs.png")
    sizes.append(_main_view_fits(ui, "after Load model and Export"))

    ui.show("Settings")
    ui.set("run name", "lab-profiled")
    ui.button("Profile next run").click()
    ui.button("Train").click()
    expect(ui.run_row("lab-profiled")).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    expect(ui.section("Profile")).to_be_visible(timeout=60_000)
    expect(ui.section("Profile")).to_contain_text("step time", timeout=60_000)
    shown = time.monotonic()
    expect(ui.button("Train")).to_be_enabled(timeout=RUN_TIMEOUT_MS)  # the panel is idle again
    print(f"after the profile summary showed, Train came back in {time.monotonic() - shown:.1f} s")
    sizes.append(_main_view_fits(ui, "after a profiled run"))
    _shot(ui, tmp_path, "lab-panel-profiled.png")
    print("panel in JupyterLab at 1280x800:", json.dumps(sizes))


def test_in_jupyterlab_a_jax_panel_trains_on_jax_in_a_fresh_kernel(lab, browser, tmp_path):
    """TensorFlow is installed here, yet RunConfig(backend='jax') connects and trains on JAX."""
    assert importlib.util.find_spec("tensorflow"), "this test means something only with TensorFlow installed"
    ui = _open(browser, lab, "jax.ipynb")  # a fresh kernel of its own: only the panel's cell has run there
    top, chip = ui.section("Run"), re.compile(r"(CPU|GPU|TPU)[^·]* · jax · \d+ replica")
    ui.button("Connect").click()
    expect(top).to_contain_text(chip, timeout=RUN_TIMEOUT_MS)
    expect(top).not_to_contain_text("tensorflow")
    ui.button("Train").click()
    expect(ui.run_row("lab-jax")).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    expect(top).to_contain_text(chip)
    expect(ui.button("Train")).to_be_enabled()
    (run_dir,) = lab.logdir.glob("*-lab-jax")
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["status"], result["runtime"]["backend"], result["config"]["backend"]) == (
        "completed",
        "jax",
        "jax",
    ), result["runtime"]
    ui.show("Runs")
    ui.button("Compare runs").click()
    expect(ui.section("Runs")).to_contain_text("Compared: this kernel's 1 run", timeout=60_000)
    ui.root.locator(".tpukit-section-runs table").first.scroll_into_view_if_needed()
    print("JAX runs table in JupyterLab:", json.dumps(_runs_table_fits(ui, "JAX, after Compare")))
    _shot(ui, tmp_path, "lab-runs-compare-jax.png")
    ui.show("Accelerator")
    # the backend row says why too: "backend jax (set by the config)"
    expect(
        ui.section("Accelerator").get_by_role("row", name=re.compile(r"^backend jax \(set by the config\)$"))
    ).to_be_visible()
    print("JAX panel in JupyterLab:", json.dumps(_main_view_fits(ui, "JAX, after a run")))
    _shot(ui, tmp_path, "lab-panel-jax.png")


def test_in_jupyterlab_the_runs_table_fits_beside_the_file_browser_and_compare_says_what_differed(
    lab, browser, tmp_path
):
    """The UX report: 894 px in an 845 px output, the note column squeezed to 42 px; Compare without the CLI's run
    and without saying what differed. Two runs of different batch sizes, one stopped, and a run of the logdir that
    this kernel did not make."""
    other = lab.logdir / "20261127-044814-cnn-mnist5k"  # as the CLI leaves one: a config and a result
    other.mkdir(parents=True, exist_ok=True)
    config = RunConfig(
        **{**START, "model": "cnn", "dataset": "mnist5k", "precision": "mixed_bfloat16", "logdir": str(lab.logdir)}
    ).to_dict()
    (other / "config.json").write_text(json.dumps(config))
    (other / "result.json").write_text(
        json.dumps(
            {
                "run_dir": str(other),
                "status": "completed",
                "config": config,
                "examples_per_sec": 414.0,
                "final_metrics": {"val_accuracy": 0.86},
            }
        )
    )
    ui = _open(browser, lab, "panel.ipynb")
    ui.show("Settings")
    ui.set("run name", "cnn-mnist5k-b32")
    ui.button("Train").click()
    expect(ui.run_row("cnn-mnist5k-b32")).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    ui.show("Settings")
    ui.set("batch / replica", "64")
    ui.set("run name", "cnn-mnist5k-b64")
    ui.button("Train").click()
    ui.button("Stop").click()
    expect(ui.run_row("cnn-mnist5k-b64")).to_contain_text(re.compile("stopped|completed"), timeout=RUN_TIMEOUT_MS)
    expect(ui.button("Train")).to_be_enabled(timeout=RUN_TIMEOUT_MS)
    ui.show("Runs")
    ui.button("Compare runs").click()
    runs = ui.section("Runs")
    expect(runs).to_contain_text("more from", timeout=60_000)
    expect(runs).to_contain_text("model: mlp vs cnn")
    expect(runs).to_contain_text("batch: 32 vs 64")
    expect(runs.locator("img")).to_be_visible()
    ui.root.locator(".tpukit-section-runs table").first.scroll_into_view_if_needed()
    sizes = _runs_table_fits(ui, "TensorFlow, two runs and Compare")
    print("runs table in JupyterLab:", json.dumps(sizes))
    _shot(ui, tmp_path, "lab-runs-compare-tf.png")


@pytest.mark.skipif(not importlib.util.find_spec("keras_hub"), reason="KerasHub is not installed (tpukit[hub])")
def test_in_jupyterlab_a_preset_typed_into_the_model_field_shows_its_lora_settings_and_fine_tunes_on_jax(
    lab, browser, tmp_path
):
    """A tiny KerasHub preset (built offline), typed into the panel's model field as a person would: its LoRA rank
    and sequence length appear beside the model, then a fine-tune whose line says what it wrote before and after."""
    from hub_support import BUILD

    preset = lab.root / "tiny_gemma"
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "-c", BUILD, str(preset)], check=True, env=env, timeout=300, capture_output=True)
    _notebook(
        lab.root / "hub.ipynb",
        dict(
            model="mlp",
            dataset="pydoc",
            dataset_size=64,
            batch_size=16,
            epochs=2,
            backend="jax",
            validation_split=None,
            name="lab-hub",
            logdir=str(lab.logdir),
        ),
    )
    ui = _open(browser, lab, "hub.ipynb")
    settings = ui.section("Settings")
    expect(ui.field("LoRA rank")).to_be_hidden()  # the zoo's mlp reads no LoRA settings
    ui.field("model").fill(str(preset))  # the field offers KerasHub's names and takes any preset typed
    ui.field("model").press("Enter")
    expect(ui.field("LoRA rank")).to_have_value("4")
    ui.field("sequence length").fill("16")
    ui.field("sequence length").press("Enter")
    expect(settings).to_contain_text(f"KerasHub preset {preset}")
    expect(settings).to_contain_text("LoRA adapters of rank 4 (alpha = rank) on the attention's query and value")
    expect(settings).to_contain_text("text in rows of 16 tokens, each document starting its own")
    _main_view_fits(ui, "a pretrained model's settings")
    _shot(ui, tmp_path, "lab-pretrained-settings.png")
    ui.button("Train").click()
    expect(ui.run_row("lab-hub")).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    expect(ui.section("Run")).to_contain_text(re.compile(r"continued: before '.*', after '.*'"))
    _shot(ui, tmp_path, "lab-pretrained-trained.png")


@pytest.mark.skipif(not importlib.util.find_spec("keras_hub"), reason="KerasHub is not installed (tpukit[hub])")
def test_in_jupyterlab_a_preset_tuned_by_dpo_from_the_method_dropdown_charts_its_reward_accuracy(
    lab, browser, tmp_path
):
    """A tiny KerasHub Gemma (built offline) on a JSONL file of preference pairs: the method picked from its dropdown
    as a person would, its notes say DPO and its reference, and the run's figure in the Runs table is its held-out
    reward accuracy."""
    from hub_support import BUILD, GEMMA_TURNS
    from preference_support import pairs

    preset = lab.root / "tiny_gemma_chat"
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run(
        [sys.executable, "-c", BUILD, str(preset), *GEMMA_TURNS], check=True, env=env, timeout=300, capture_output=True
    )
    (lab.root / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in pairs(0, 48)))
    config = dict(model=str(preset), dataset=str(lab.root / "pairs.jsonl"), sequence_length=48, batch_size=8, epochs=2)
    config.update(learning_rate=0.01, backend="jax", name="lab-dpo", logdir=str(lab.logdir), sample_prompt="")
    _notebook(lab.root / "dpo.ipynb", config)
    ui = _open(browser, lab, "dpo.ipynb")
    settings = ui.section("Settings")
    ui.field("method").select_option("dpo")
    expect(settings).to_contain_text("DPO (beta 0.1) against the model as the run starts")
    _main_view_fits(ui, "a preference run's settings")
    ui.button("Train").click()
    expect(ui.run_row("lab-dpo")).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    expect(ui.run_row("lab-dpo")).to_contain_text(re.compile(r"reward accuracy \d+\.\d%"))
    _shot(ui, tmp_path, "lab-dpo-trained.png")
    ui.show("Progress")
    _shot(ui, tmp_path, "lab-dpo-progress.png")
