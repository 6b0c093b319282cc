"""The panel in a real browser: Voila serves tests/browser/panel.ipynb, Debian's Chromium clicks it.

What a workshop participant does, end to end: the page shows the panel, Train
runs a tiny config while the progress line and bar move to the end, the run
appears in the runs table; Stop ends a long run as "stopped" (resumable); a
profiled run shows the inline profile summary and embeds TensorBoard in an
iframe. Widget updates come from the panel's training thread, as in Jupyter.

Everything listens on 127.0.0.1 only: Voila on a free port, and the
TensorBoard the panel starts. Chromium is Debian's (`.ci/setup-browser.sh`),
driven by the `playwright` package; `playwright install` is never run.

One Voila server, one browser and one page (one kernel) serve the three
tests, so TensorFlow starts once. Each test names its own run and sets the
fields it needs by typing in the page, so any one of them can run alone.

Screenshots go to each test's tmp dir and to test-artifacts/screenshots/ (or
$TPUKIT_SCREENSHOTS), the folder CI keeps; with TPUKIT_SAVE_SCREENSHOT=1 the
latest is also copied to docs/panel-screenshot.png.
"""

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

from conftest import REPO

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOTEBOOK = REPO / "tests" / "browser" / "panel.ipynb"
SCREENSHOT = REPO / "docs" / "panel-screenshot.png"
ARTIFACTS = Path(os.environ.get("TPUKIT_SCREENSHOTS") or REPO / "test-artifacts" / "screenshots")
VIEWPORT = {"width": 1280, "height": 800}  # a laptop
START = dict(dataset="digits", model="mlp", epochs=1, batch_size=32)  # 40 steps an epoch (10% validates)
RUN_TIMEOUT_MS = 150_000  # a run (TensorFlow starts on the first) or a profiled run with TensorBoard


def _missing() -> str:
    why = []
    if not os.access(CHROMIUM, os.X_OK):
        why.append(f"{CHROMIUM} is missing (Debian's chromium)")
    for package in ("playwright", "voila"):
        if importlib.util.find_spec(package) is None:
            why.append(f"the {package} package is missing (pip install -e '.[test]')")
    return "; ".join(why)


MISSING = _missing()
# The browser tests are part of the suite: without Chromium they fail, naming the command that installs it.
# TPUKIT_SKIP_BROWSER=1 skips them on purpose, and says so in the summary (-ra) and the warnings summary.
SKIP_ENV = "TPUKIT_SKIP_BROWSER"
SETUP = "bash .ci/setup-browser.sh"
if os.environ.get(SKIP_ENV) == "1":
    NOT_RUN = f"BROWSER TESTS NOT RUN ({SKIP_ENV}=1){': ' + MISSING if MISSING else ''}"
    warnings.warn(NOT_RUN, pytest.PytestWarning)
    pytest.skip(NOT_RUN, allow_module_level=True)
if MISSING:
    pytest.fail(f"the browser tests cannot run: {MISSING}. Run: {SETUP}  (or {SKIP_ENV}=1 to skip them)", pytrace=False)

from playwright.sync_api import expect, sync_playwright  # noqa: E402  (only when present)

# Each expectation on the page waits for a round trip through the kernel (a click, the kernel's handler, the widget's
# update). With the suite's other process training beside it, that took over Playwright's default 5 s in CI (a
# section picked after "Compare runs" stayed hidden). A check that holds passes as soon as it holds; this only bounds
# how long a broken one takes to fail. test_browser_lab and test_browser_profile_frame import this module.
KERNEL_TIMEOUT_MS = 30_000
expect.set_options(timeout=KERNEL_TIMEOUT_MS)

from tpukit.observe import tensorboard as tb  # noqa: E402

pytestmark = pytest.mark.browser


# ---- the server ----------------------------------------------------------------------
class Voila:
    def __init__(self, proc, port, logdir, log):
        self.proc, self.port, self.logdir, self.log = proc, port, logdir, log
        self.url = f"http://127.0.0.1:{port}/"
        self.kernels = set()  # pids of the kernels it started, noted while it runs

    def note_kernels(self):
        self.kernels |= set(_children(self.proc.pid))

    def log_tail(self, lines=40) -> str:
        return log_tail(self.log, lines)


def log_tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def jupyter_env(root: Path, drop=(), **extra) -> dict:
    """The environment of a notebook server under `root`: its own Jupyter dirs, and a kernelspec "python3" that
    is this very Python (the venv with tpukit), whatever other python3 kernelspecs exist."""
    kernels = root / "jupyter" / "kernels" / "python3"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (tpukit tests)",
                "language": "python",
            }
        )
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VSCODE_PID", "TENSORBOARD_PROXY_URL", "JUPYTERHUB_SERVICE_PREFIX", *drop)
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
            "JUPYTER_PATH": str(root / "jupyter"),
            "JUPYTER_CONFIG_DIR": str(root / "config"),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "MPLBACKEND": "Agg",
            **extra,
        }
    )
    return env


@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    """Voila serving the panel notebook on 127.0.0.1; stops it, its kernels and their TensorBoards after."""
    root = tmp_path_factory.mktemp("voila")
    logdir = root / "runs"
    env = jupyter_env(root, TPUKIT_BROWSER_CONFIG=json.dumps({**START, "logdir": str(logdir)}))
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "voila",
        str(NOTEBOOK),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--Voila.port_retries=0",
        # jupytext's lab extension breaks Voila's page; without the xsrf check a page that leaves
        # can tell Voila to shut its kernel down (else every page leaks one).
        "--VoilaConfiguration.extension_denylist=jupyterlab-jupytext",
        "--Voila.tornado_settings=disable_check_xsrf=True",
    ]
    log = root / "voila.log"
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
    server = Voila(proc, port, logdir, log)
    try:
        wait_listening(proc, port, 60, "Voila", server.log_tail)
        yield server
    finally:
        server.note_kernels()
        _wait_gone(server.kernels, 10)  # the page left: Voila shuts its kernel down
        stop_server(proc, server.kernels, logdir)


def wait_listening(proc, port: int, timeout: float, name: str, log_tail) -> None:
    """Wait until the server `proc` listens on `port`; fail with its log if it exits or takes too long."""
    deadline = time.monotonic() + timeout
    while not _listening(port):
        assert proc.poll() is None, f"{name} exited with {proc.returncode}:\n{log_tail()}"
        assert time.monotonic() < deadline, f"{name} did not listen on {port} in {timeout:.0f} s:\n{log_tail()}"
        time.sleep(0.2)


def stop_server(proc, kernels, logdir) -> None:
    """End a notebook server, any of its `kernels` (pids) it left, and the TensorBoards the panels started."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    for pid in kernels:  # a kernel the server did not end: ours, by pid
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    for instance in tb.running(logdir):  # started by the panel in the kernel, detached
        tb.stop(instance)


# ---- the browser -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Debian's Chromium, headless, with a fresh profile directory."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT
        )
        try:
            yield context
        finally:
            for page in context.pages:  # leave Voila's page first, so Voila ends its kernel
                try:
                    page.goto("about:blank", timeout=10_000)
                except Exception:
                    pass
            context.close()


class PanelPage:
    """The Voila page that shows the panel, read and driven the way a person would."""

    def __init__(self, page, server):
        self.page, self.server = page, server
        self.root = page.locator(".widget-vbox").first  # the panel's root VBox

    def button(self, label):
        return self.page.get_by_role("button", name=label, exact=True)

    def field(self, label):
        return self.page.get_by_label(label, exact=True)

    def set(self, label, value):
        """Type a value into a settings field and leave it (the widget sends it on change)."""
        box = self.field(label)
        box.fill(str(value))
        box.press("Tab")
        expect(box).to_have_value(str(value))

    def section(self, title):
        """A section's box: "Run" is the top (actions, status, progress line), the others sit below the
        section picker (Settings, Progress, Runs, Profile, TensorBoard, Accelerator), one shown at a time."""
        if title == "Run":
            return self.page.locator(".tpukit-top")
        return self.page.locator(f".tpukit-section-{title.lower()}")

    def show(self, title):
        """Pick a section, as a person clicks its name above the sections."""
        self.page.locator(".widget-toggle-buttons").get_by_role("button", name=title, exact=True).click()
        expect(self.section(title)).to_be_visible()

    def run_row(self, name):
        return self.section("Runs").locator("tr").filter(has_text=f"-{name}")  # run dirs end "-<name>"

    def run_note(self, name):
        """The line under a run's row: its note (why it ended, whether it can be resumed)."""
        return self.run_row(name).locator("xpath=following-sibling::tr[1]")

    def progress_line(self):
        return self.page.locator(".tpukit-progress-line .widget-html-content")

    def bar(self):
        return self.section("Run").locator(".progress-bar")

    def screenshot(self, path: Path) -> Path:
        """The whole panel, however tall (the viewport grows for the shot); copied to docs/ on request."""
        height = self.page.evaluate(
            "() => Math.max(...Array.from(document.querySelectorAll('*'), e => e.scrollHeight))"
        )
        self.page.set_viewport_size({"width": VIEWPORT["width"], "height": min(int(height) + 40, 8000)})
        try:
            self.root.screenshot(path=str(path), animations="disabled")
        finally:
            self.page.set_viewport_size(VIEWPORT)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, ARTIFACTS / path.name)
        if os.environ.get("TPUKIT_SAVE_SCREENSHOT") == "1":
            SCREENSHOT.parent.mkdir(exist_ok=True)
            shutil.copyfile(path, SCREENSHOT)
        return path


@pytest.fixture(scope="module")
def panel_page(voila, browser):
    page = browser.pages[0] if browser.pages else browser.new_page()
    page.set_default_timeout(30_000)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(voila.url, timeout=180_000)  # Voila answers once the notebook has run
    ui = PanelPage(page, voila)
    try:
        expect(ui.button("Train")).to_be_enabled(timeout=60_000)
    except AssertionError as e:
        raise AssertionError(f"{e}\npage errors: {errors}\nVoila log:\n{voila.log_tail()}") from None
    voila.note_kernels()
    yield ui
    voila.note_kernels()
    page.goto("about:blank")


def test_a_bad_batch_size_is_marked_under_its_field_and_train_says_why_it_is_off(panel_page, tmp_path):
    ui = panel_page
    ui.show("Settings")
    ui.set("batch / replica", "1.5")  # ipywidgets' IntText would have made this 15, silently
    expect(ui.section("Settings")).to_contain_text("batch size must be a whole number ≥ 1; received '1.5'.")
    expect(ui.button("Train")).to_be_disabled()
    expect(ui.section("Run")).to_contain_text("Train is off: batch size must be a whole number ≥ 1")
    _fits_the_first_screen(ui, "with a field error")
    ui.screenshot(tmp_path / "panel-bad-batch.png")
    ui.set("batch / replica", "32")
    expect(ui.button("Train")).to_be_enabled()
    expect(ui.section("Run")).not_to_contain_text("Train is off")


def test_train_shows_progress_to_the_end_and_lists_the_run(panel_page, tmp_path):
    ui = panel_page
    ui.set("run name", "browser-train")
    ui.set("epochs", 2)
    ui.button("Train").click()
    expect(ui.section("Progress")).to_be_visible()  # Train shows the curves

    row = ui.run_row("browser-train")
    expect(row).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    expect(row).to_contain_text("mlp / digits")
    expect(ui.run_note("browser-train")).to_have_count(0)  # the newest run, with no note line under it
    line = ui.progress_line()
    expect(line).to_contain_text(re.compile(r"^completed: epoch 2/2\s+·\s+step 40/40\s+·\s+loss \d"))
    expect(line).to_contain_text("examples/s")
    expect(ui.bar()).to_have_attribute("style", re.compile(r"width:\s*100%"))
    expect(ui.bar()).to_have_class(re.compile(r"progress-bar-success"))
    expect(ui.section("Progress").locator("img").first).to_be_visible()  # the loss/accuracy curves
    expect(ui.section("Run")).to_contain_text(re.compile(r"completed: \d{8}-\d{6}-browser-train, val_accuracy 0\.\d+"))
    expect(ui.button("Train")).to_be_enabled()
    expect(ui.button("Stop")).to_be_disabled()
    _fits_the_first_screen(ui, "after a run")
    ui.screenshot(tmp_path / "panel-trained.png")
    ui.show("Runs")
    expect(row).to_be_visible()
    ui.screenshot(tmp_path / "panel-runs.png")
    ui.show("Settings")


def test_stop_ends_a_long_run_and_keeps_it_as_stopped(panel_page, tmp_path):
    ui = panel_page
    ui.set("run name", "browser-stop")
    ui.set("epochs", 300)  # minutes of training, unless Stop works
    ui.button("Train").click()

    # Running: Train is disabled, Stop enabled, and the progress line moves past the first epoch.
    expect(ui.button("Train")).to_be_disabled()
    expect(ui.button("Stop")).to_be_enabled()
    expect(ui.progress_line()).to_contain_text(re.compile(r"^epoch ([2-9]|\d\d+)/300\s"), timeout=RUN_TIMEOUT_MS)
    expect(ui.progress_line()).to_contain_text("ETA")
    ui.button("Stop").click()

    row = ui.run_row("browser-stop")
    expect(row).to_contain_text("stopped", timeout=60_000)
    expect(ui.run_note("browser-stop")).to_contain_text("(resumable)")
    expect(ui.progress_line()).to_contain_text(re.compile(r"^stopped: epoch \d+/300"))
    expect(ui.bar()).to_have_class(re.compile(r"progress-bar-warning"))
    expect(ui.section("Run")).to_contain_text("stopped: ")
    expect(ui.button("Train")).to_be_enabled()
    expect(ui.button("Stop")).to_be_disabled()
    expect(ui.button("Resume")).to_be_enabled()
    ui.screenshot(tmp_path / "panel-stopped.png")
    ui.show("Settings")


def test_a_profiled_run_shows_the_summary_inline_and_embeds_tensorboard(panel_page, tmp_path):
    ui = panel_page
    ui.set("run name", "browser-profile")
    ui.set("epochs", 1)
    ui.button("Profile next run").click()
    expect(ui.field("profile steps")).to_have_value("10:14")  # set by the kernel, shown in the page
    ui.button("Train").click()

    expect(ui.run_row("browser-profile")).to_contain_text("completed", timeout=RUN_TIMEOUT_MS)
    profile = ui.section("Profile")
    expect(profile).to_contain_text("Top ops by self time", timeout=RUN_TIMEOUT_MS)
    expect(profile).to_contain_text(re.compile(r"step time\s*[\d.]+ ms average .* over 5 steps"))
    expect(profile).to_contain_text("input pipeline")
    expect(profile.locator("img")).to_be_visible()  # the profile chart

    _fits_the_first_screen(ui, "after a profiled run")
    ui.screenshot(tmp_path / "panel-profile-summary.png")
    ui.show("TensorBoard")
    frame = ui.section("TensorBoard").locator("iframe")
    expect(frame).to_have_count(1, timeout=RUN_TIMEOUT_MS)  # TensorBoard starts after the summary
    src = frame.get_attribute("src")
    # XProf's own page with its side rail: in TensorBoard's Profile tab, a frame under 960 px wide opens under
    # XProf's menu and a grey backdrop
    assert re.match(r"http://127\.0\.0\.1:\d+/data/plugin/profile/index\.html\?new_nav=1&", src), src
    assert "tag=overview_page" in src, src
    assert "browser-profile" in src, src  # opened on this run's capture
    expect(ui.section("TensorBoard").get_by_role("link", name="Open TensorBoard in a new tab")).to_have_attribute(
        "href", src
    )
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    with direct.open(src.split("#")[0], timeout=10) as response:  # the frame's server answers
        assert response.status == 200
    # and the frame shows it: XProf's page, with no backdrop over it
    plugin = _frame(ui.page, "/data/plugin/profile/", timeout=60).locator("body")
    expect(plugin).to_contain_text("XProf", timeout=60_000)
    expect(plugin.locator(".mat-drawer-backdrop.mat-drawer-shown")).to_have_count(0)
    try:  # the overview page itself, for the screenshot; its wording is xprof's, so not asserted
        expect(plugin).to_contain_text("Performance Summary", timeout=20_000)
    except AssertionError:
        print("xprof's overview page did not show 'Performance Summary' within 20 s")
    ui.screenshot(tmp_path / "panel-profiled.png")


def _fits_the_first_screen(ui, when):
    """At 1280x800 the panel's top (status, actions, progress line) and the section picker are on the first
    screen, and the shown section starts there too."""
    top = ui.section("Run").bounding_box()
    picker = ui.page.locator(".widget-toggle-buttons").bounding_box()
    assert top and picker, when
    assert top["y"] >= 0 and picker["y"] + picker["height"] <= VIEWPORT["height"], (when, top, picker)
    assert picker["y"] - top["y"] < 260, (when, "the top grew", top, picker)


# ---- helpers -----------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _children(pid: int) -> list:
    """Pids whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _frame(page, url_part: str, timeout: float):
    """The page's frame (at any depth) whose URL contains `url_part`."""
    deadline = time.monotonic() + timeout
    while True:
        for frame in page.frames:
            if url_part in frame.url:
                return frame
        assert time.monotonic() < deadline, f"no frame with {url_part!r}: {[f.url for f in page.frames]}"
        page.wait_for_timeout(250)


def _wait_gone(pids, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
