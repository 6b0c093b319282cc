"""The profile in a notebook-wide frame, in Debian's Chromium at 1280x800: it opens with nothing over it.

A notebook output is about 844 px wide (JupyterLab at 1280x800 with its file browser open). XProf, the profile
plugin, lays out for its frame's width, and under 960 px it opens its menu over the page behind a grey backdrop
until clicked away: what TensorBoard's Profile tab shows there. `tensorboard.profile_url` opens XProf's own page
with its side rail instead. The frame sits in a page served over http from another port, as Jupyter's output does
(cross-origin, as XProf meets it in a notebook). Each check is run on TensorBoard's own Profile-tab link too, which
shows the backdrop: the check sees what it is meant to see.

Screenshots go where tests/behaviour/test_browser.py puts them (test-artifacts/screenshots/, or $TPUKIT_SCREENSHOTS).
"""

import functools
import http.server
import re
import shutil
import threading
import urllib.parse

import pytest

from conftest import run_cli
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, VIEWPORT, _frame

from playwright.sync_api import expect, sync_playwright  # noqa: E402  (test_browser has checked it is there)

from tpukit.observe import tensorboard as tb  # noqa: E402

pytestmark = pytest.mark.browser
OUTPUT_WIDTH = 844  # px: a notebook output at 1280x800 with JupyterLab's file browser open
BACKDROP = ".mat-drawer-backdrop.mat-drawer-shown"  # XProf's menu opened over the page


@pytest.fixture(scope="module")
def served_capture(tmp_path_factory):
    """(TensorBoard, capture) for a real profiled CLI run of a small model on the CPU."""
    logdir = tmp_path_factory.mktemp("profiled")
    proc = run_cli(
        "train",
        "--dataset",
        "digits",
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--profile",
        "2:4",
        "--logdir",
        str(logdir),
        "--name",
        "frame",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    capture = re.search(r"^profile capture: (\S+)$", proc.stdout, re.MULTILINE).group(1)
    server = tb.start(logdir)
    assert not isinstance(server, tb.Failed), server
    try:
        yield server, capture
    finally:
        tb.stop(server)


@pytest.fixture(scope="module")
def notebook_like(tmp_path_factory):
    """A function that writes a page holding `url` in an output-wide iframe and returns the page's http URL."""
    root = tmp_path_factory.mktemp("pages")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def page(name, url):
        (root / f"{name}.html").write_text(
            f'<html><body style="margin:0;padding:24px 200px 0 236px"><div style="width:{OUTPUT_WIDTH}px">'
            f'<iframe src="{url}" width="100%" height="700" style="border:0"></iframe></div></body></html>'
        )
        return f"http://127.0.0.1:{server.server_address[1]}/{name}.html"

    try:
        yield page
    finally:
        server.shutdown()
        server.server_close()


def _open(browser, url, shot):
    """XProf's frame on `url` once its overview shows; a screenshot of the page is saved as `shot`."""
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(url)
    plugin = _frame(page, "/data/plugin/profile/", timeout=60).locator("body")
    expect(plugin).to_contain_text("Performance Summary", timeout=90_000)  # the overview of the capture
    page.wait_for_timeout(1000)  # the menu's opening animation
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / shot))
    return page, plugin


def test_the_profile_frame_opens_without_xprofs_menu_over_it(served_capture, notebook_like, tmp_path):
    server, capture = served_capture
    url = tb.profile_url(server, run=capture)
    run = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["run"][0]
    tab = f"{server.url}?{urllib.parse.urlencode({'run': run, 'tool': 'overview_page'})}#profile"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, plugin = _open(browser, notebook_like("profile_url", url), "profile-frame.png")
            expect(plugin.locator(BACKDROP)).to_have_count(0)
            expect(plugin).to_contain_text("Overview Page")  # the side rail, beside the page
            step = plugin.get_by_text("Performance Summary")
            box = step.bounding_box()  # the overview is on the first screen, right of the rail, within the output
            assert box and 236 < box["x"] < 236 + OUTPUT_WIDTH and box["y"] < 400, box
            page.close()
            # TensorBoard's Profile tab in the same frame: XProf's menu over the page, as the workshop saw it
            page, plugin = _open(browser, notebook_like("profile_tab", tab), "profile-tab-frame.png")
            expect(plugin.locator(BACKDROP)).to_have_count(1)
            page.close()
        finally:
            browser.close()
    shutil.copy(ARTIFACTS / "profile-frame.png", tmp_path / "profile-frame.png")
