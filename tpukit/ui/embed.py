"""Show a TensorBoard that listens on 127.0.0.1 inside a notebook, the way each front end allows.

One renderer per context, all with the signature `(port, path, height)`, as
in `tensorboard/notebook.py`:

- Colab: the VM's ports are not reachable from the browser; Colab proxies them
  for the output frame. A script asks `google.colab.kernel.proxyPort` for the
  proxied URL and builds the iframe there: the mechanism of `%tensorboard`
  (`tensorboard.notebook._display_colab`, which a test compares with this).
  It is not called: it appends to `document.body` (below the whole panel, not
  in its TensorBoard section: this uses the output's own `window.element`),
  it opens only the root page (this opens a capture in the profile tab), and
  it is private.
- Jupyter and VS Code: an iframe. Behind a remote server, set
  TENSORBOARD_PROXY_URL (e.g. "/user/me/proxy/%PORT%/" with
  jupyter-server-proxy); on JupyterHub with jupyter-server-proxy installed
  the proxy path is found without it.
- none: the address as text.

Every renderer also gives a plain link, for front ends that block the frame.
Nothing here opens a port or a tunnel: TensorBoard stays on the loopback
address it was started on.
"""

from __future__ import annotations

import dataclasses
import html
import importlib.util
import json
import os
import urllib.parse

from tpukit.ui import context as _context

HEIGHT = 800


@dataclasses.dataclass(frozen=True)
class Embed:
    """What to show: `html` goes into an HTML widget; `javascript`, when set, must run in an output (Colab)."""

    html: str
    javascript: str = ""
    src: str = ""


def tensorboard(url: str, context: str, height: int = HEIGHT) -> Embed:
    """How to show the TensorBoard at `url` (as `tpukit.observe.tensorboard` returned it) in `context`.

    Args:
        url: e.g. "http://127.0.0.1:6006/" or a `profile_url(...)`.
        context: one of `tpukit.ui.context.CONTEXTS`.
        height: frame height in pixels.
    """
    parts = urllib.parse.urlsplit(url)
    path = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, parts.fragment))
    renderer = _RENDERERS.get(context)
    if renderer is None:
        raise ValueError(f"Unknown context {context!r}. Expected one of {', '.join(_context.CONTEXTS)}.")
    return renderer(parts.port, path, height)


def _colab(port: int, path: str, height: int) -> Embed:
    # `window.element` is the element of this very output in Colab.
    script = (
        "(async (port, path, height) => {\n"
        "  const where = window.element || document.body;\n"
        "  const base = new URL(await google.colab.kernel.proxyPort(port, {cache: true}));\n"
        "  const url = new URL(path, base);\n"
        "  url.searchParams.set('tensorboardColab', 'true');\n"
        "  const frame = document.createElement('iframe');\n"
        "  frame.src = url.toString();\n"
        "  frame.width = '100%';\n"
        "  frame.height = String(height);\n"
        "  frame.style.border = '0';\n"
        "  where.appendChild(frame);\n"
        f"}})({int(port)}, {json.dumps(path)}, {int(height)});"
    )
    note = (
        f"<span>TensorBoard on port {int(port)} through Colab's port proxy. "
        "If the frame stays blank, allow third-party cookies for colab.research.google.com; "
        "the profile summary above needs no frame.</span>"
    )
    return Embed(html=note, javascript=script)


def _jupyter(port: int, path: str, height: int) -> Embed:
    src = _proxied(port, path) or f"http://127.0.0.1:{int(port)}{path}"
    link = html.escape(src, quote=True)
    frame = (
        f'<iframe src="{link}" width="100%" height="{int(height)}" style="border:0"></iframe>'
        f'<div><a href="{link}" target="_blank" rel="noopener">Open TensorBoard in a new tab</a></div>'
    )
    return Embed(html=frame, src=src)


def _none(port: int, path: str, height: int) -> Embed:
    src = f"http://127.0.0.1:{int(port)}{path}"
    return Embed(html=f"TensorBoard: {html.escape(src)}", src=src)


def _proxied(port: int, path: str):
    """The proxy URL for `port` (+ path) when the Jupyter server proxies ports, else None."""
    template = os.environ.get("TENSORBOARD_PROXY_URL")
    if template is None:
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX")
        if not prefix or importlib.util.find_spec("jupyter_server_proxy") is None:
            return None
        template = prefix.rstrip("/") + "/proxy/%PORT%/"
    base = template.replace("%PORT%", str(int(port)))
    return base.rstrip("/") + "/" + path.lstrip("/")


_RENDERERS = {
    _context.COLAB: _colab,
    _context.JUPYTER: _jupyter,
    _context.VSCODE: _jupyter,
    _context.NONE: _none,
}
