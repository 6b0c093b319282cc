"""Start, find and stop TensorBoard servers for a logdir, on the loopback address: a thin layer over
`tensorboard.manager`.

TensorBoard's own `manager` (what `%tensorboard` uses) does the finding: every
server writes an info file (`manager.get_all()`), so a server started from a
notebook magic, the `tensorboard` command or this module is seen by all three,
and a launch is ready when its info file appears. TensorBoard picks the port
(`--port 0`). What manager lacks is all this module adds:

- reuse by logdir (`manager.start` reuses only for identical arguments);
- a new session, so an interrupted cell (Jupyter signals the kernel's whole
  process group) does not kill the server;
- a log next to the runs, `<logdir>/.tensorboard-<pid>.log` (the temp dir when
  the logdir is not a writable directory), removed when `stop` ends the server
  or by a later `start` once its server has ended;
- `stop`, with psutil, which signals only a live TensorBoard process.

It returns typed results, `Launched`, `Reused` or `Failed`, instead of printing
or raising, so the CLI can print them and the notebook panel embed the URL.
Servers listen on 127.0.0.1 unless the caller names another host.

Example:

    result = tensorboard.start("logs")
    if isinstance(result, tensorboard.Failed):
        print(result.message)
    else:
        print(tensorboard.profile_url(result))
"""

from __future__ import annotations

import base64
import dataclasses
import errno
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Dict, List, Optional, Union

import psutil

__all__ = ["DEFAULT_HOST", "Failed", "Instance", "Launched", "Reused", "profile_url", "running", "start", "stop"]

DEFAULT_HOST = "127.0.0.1"
_WILDCARD_HOSTS = ("0.0.0.0", "::", "")
_LOG_TAIL_LINES = 15
_POLL_S = 0.1
_STOP_WAIT_S = 5.0
_LOG_NAMES = (".tensorboard-{}.log", "tpukit-tensorboard-{}.log")  # in the logdir, in the temp dir
_LOG_PATTERNS = tuple(re.compile(re.escape(n).replace(r"\{\}", r"(\d+)")) for n in _LOG_NAMES)
_LOG_GRACE_S = 300.0  # a failed start's log stays readable this long
_children: Dict[int, subprocess.Popen] = {}  # launched here: reaped when stopped (no zombies)


@dataclasses.dataclass(frozen=True)
class Launched:
    """A TensorBoard this call started. It keeps running until `stop` or the machine ends it.

    `log` is the file its output goes to.
    """

    port: int
    pid: int
    logdir: str
    url: str
    log: str = ""


@dataclasses.dataclass(frozen=True)
class Reused:
    """A TensorBoard that already served the same logdir and answered."""

    port: int
    pid: int
    logdir: str
    url: str


@dataclasses.dataclass(frozen=True)
class Failed:
    """No TensorBoard could be started; `message` says why and what to do."""

    message: str


@dataclasses.dataclass(frozen=True)
class Instance:
    """A running TensorBoard, as listed by its info file.

    `host` is the address it was told to listen on ("localhost" when it was
    started without `--host`); `url` is where it answers from this machine.
    """

    port: int
    pid: int
    logdir: str
    url: str
    host: str
    started: int  # seconds since the epoch


Result = Union[Launched, Reused, Failed]


def start(
    logdir: Union[str, os.PathLike],
    *,
    port: Optional[int] = None,
    host: str = DEFAULT_HOST,
    timeout: float = 60.0,
) -> Result:
    """Serve `logdir` with TensorBoard, reusing a running server when one fits.

    A server is reused when it serves the same absolute logdir, answers on
    `host`, is not listening on all interfaces (unless `host` asks for that),
    and, when `port` is given, listens on that port. Otherwise a new server is
    launched with `python -m tensorboard.main` in its own session.

    Args:
        logdir: Directory TensorBoard reads. It need not exist yet.
        port: Port to listen on. `None` lets TensorBoard pick a free one.
        host: Address to listen on. The default is the loopback address.
        timeout: Seconds to wait for a new server to write its info file. A
            server that does not in time is stopped.

    Returns:
        `Launched`, `Reused`, or `Failed` with a message the user can act on.

    Raises:
        ValueError: An argument has a value it cannot take.
    """
    logdir = _absolute(logdir)
    _check_args(port, host, timeout)
    from tpukit.backend import installed

    if not installed("tensorboard"):
        return Failed(
            "TensorBoard is not installed here: run tpukit.colab.setup() on Colab, or "
            "pip install 'tpukit[profile]'. The runs' scalars are written all the same."
        )
    for inst in running(logdir):
        if port is not None and inst.port != port:
            continue
        if inst.host in _WILDCARD_HOSTS and host not in _WILDCARD_HOSTS:
            continue
        if _answers(host, inst.port, logdir):
            return Reused(inst.port, inst.pid, logdir, _url(host, inst.port))
    _remove_stale_logs(logdir)
    problem = _cannot_bind(host, port or 0)
    return Failed(problem) if problem else _launch(logdir, host, port or 0, timeout)


def running(logdir: Union[str, os.PathLike, None] = None) -> List[Instance]:
    """List running TensorBoard servers, oldest first.

    Args:
        logdir: If given, only servers whose logdir is this directory.

    Returns:
        `Instance`s read from TensorBoard's info files whose process is a live TensorBoard.
    """
    from tensorboard import manager  # light: no TensorFlow

    wanted = None if logdir is None else os.path.realpath(_absolute(logdir))
    found = []
    for info in manager.get_all():
        if not info.logdir or _tensorboard_process(info.pid) is None:
            continue
        args, cwd = _launch_args(info.cache_key)
        inst_logdir = os.path.join(cwd or "", os.path.expanduser(info.logdir))
        if wanted is not None and os.path.realpath(inst_logdir) != wanted:
            continue
        bound = _flag(args, "--host")
        if bound is None:
            bound = "0.0.0.0" if "--bind_all" in args else "localhost"
        url = _url(bound, info.port, info.path_prefix)
        found.append(Instance(info.port, info.pid, inst_logdir, url, bound, info.start_time))
    return sorted(found, key=lambda inst: (inst.started, inst.port))


def stop(result_or_port: Union[Launched, Reused, Instance, int]) -> bool:
    """Stop a TensorBoard server: SIGTERM, then SIGKILL if it lingers; remove its log.

    Only a process TensorBoard's info files list for that port is signalled,
    never whatever pid a stale record names.

    Args:
        result_or_port: A `Launched`, `Reused` or `Instance`, or a port.

    Returns:
        True if a server was stopped, False if none was running there.
    """
    if isinstance(result_or_port, (Launched, Reused, Instance)):
        port, pid = result_or_port.port, result_or_port.pid
    elif isinstance(result_or_port, int) and not isinstance(result_or_port, bool):
        port, pid = result_or_port, None
    else:
        raise TypeError(
            f"stop() expects a Launched, Reused or Instance result, or a port. Received: {result_or_port!r}"
        )
    known = [inst for inst in running() if inst.port == port and pid in (None, inst.pid)]
    for inst in known:
        _terminate(inst.pid)
        for path in _log_paths(inst.logdir, inst.pid):
            try:
                os.remove(path)
            except OSError:
                pass
    return bool(known)


# XProf, the profile plugin, served by TensorBoard as a page of its own. Inside TensorBoard's Profile tab it lays
# out for the tab's width, and under 960 px (an 844 px notebook output) its side menu opens over the page with a
# grey backdrop until clicked away; on its own page with `new_nav=1` it keeps a side rail beside the page instead.
_XPROF_PAGE = "data/plugin/profile/index.html"


def profile_url(result: Union[Launched, Reused, Instance], run: Optional[str] = None) -> str:
    """URL of the profile (XProf's overview page) on a running TensorBoard, for a frame or a tab.

    It opens XProf's own page (`data/plugin/profile/index.html`, the page
    TensorBoard's Profile tab frames) with its side rail (`new_nav=1`):
    inside TensorBoard's tab, XProf's menu covers the page with a grey
    backdrop wherever the frame is under 960 px wide, as a notebook's output
    is. TensorBoard's other dashboards stay at `result.url`.

    Args:
        result: The server, as `start` or `running` returned it.
        run: Optional capture to open: a profile run name as the plugin
            lists it ("2024_01_31_12_00_00", or "train/2024_..." for a
            sub-run), or the path of a capture directory or `.xplane.pb`
            file under the server's logdir (its host is then selected too).

    Returns:
        `<result.url>data/plugin/profile/index.html?new_nav=1`, plus
        `&run=...&tag=overview_page` (and `&host=...` for a file) when `run`
        is given.
    """
    if isinstance(result, Failed) or not hasattr(result, "url"):
        raise TypeError(f"profile_url() needs a running server. Received: {result!r}")
    query = {"new_nav": "1"}
    if run is not None:
        query.update(run=run, tag="overview_page")
        path = os.path.abspath(os.path.expanduser(run))
        if os.path.exists(path):
            if path.endswith(".xplane.pb"):
                query["host"] = os.path.basename(path)[: -len(".xplane.pb")]
                path = os.path.dirname(path)
            session = os.path.basename(path)
            tb_run = os.path.relpath(os.path.dirname(os.path.dirname(os.path.dirname(path))), result.logdir)
            query["run"] = session if tb_run == "." else f"{tb_run}/{session}"
    return f"{result.url}{_XPROF_PAGE}?{urllib.parse.urlencode(query)}"


# --- helpers -----------------------------------------------------------------


def _absolute(logdir) -> str:
    path = os.fspath(logdir)
    if not isinstance(path, str) or not path:
        raise ValueError(f"Expected logdir to be a non-empty path. Received: logdir={logdir!r}")
    return os.path.abspath(os.path.expanduser(path))


def _check_args(port, host, timeout) -> None:
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise ValueError(f"Expected port to be None or an int in 1..65535. Received: port={port!r}")
    if not isinstance(host, str) or not host.strip():
        raise ValueError(
            "Expected host to be an address such as '127.0.0.1' "
            f"(pass '0.0.0.0' to listen on all interfaces). Received: host={host!r}"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"Expected timeout to be a positive number of seconds. Received: timeout={timeout!r}")


def _launch(logdir: str, host: str, port: int, timeout: float) -> Result:
    """Launch one server in a new session; it is ready when TensorBoard's info file names its pid."""
    from tensorboard import manager

    directory = logdir if os.path.isdir(logdir) and os.access(logdir, os.W_OK) else tempfile.gettempdir()
    fd, log_path = tempfile.mkstemp(prefix=".tensorboard-starting-", suffix=".log", dir=directory)
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", host, "--port", str(port)]
    try:
        with os.fdopen(fd, "wb") as log:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
    except OSError as e:
        os.remove(log_path)
        return Failed(f"Could not run {sys.executable} -m tensorboard.main: {e}")
    _children[proc.pid] = proc
    named = _log_paths(logdir, proc.pid)[directory != logdir]
    os.replace(log_path, named)  # the open file follows
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            _children.pop(proc.pid, None)
            return Failed(
                f"TensorBoard exited with code {code} before serving {logdir} on {host}. "
                f"Last lines of its log ({named}):\n{_tail(named)}"
            )
        info = next((i for i in manager.get_all() if i.pid == proc.pid), None)
        if info is not None:
            return Launched(info.port, proc.pid, logdir, _url(host, info.port), named)
        time.sleep(_POLL_S)
    _terminate(proc.pid)
    return Failed(
        f"TensorBoard (pid {proc.pid}) did not answer on {host} within {timeout:g} s, so it was stopped. "
        f"Retry with a larger timeout=. Last lines of its log ({named}):\n{_tail(named)}"
    )


def _log_paths(logdir: str, pid: int) -> List[str]:
    """Where a server's log is: under its logdir, or in the temp dir."""
    return [
        os.path.join(logdir, _LOG_NAMES[0].format(pid)),
        os.path.join(tempfile.gettempdir(), _LOG_NAMES[1].format(pid)),
    ]


def _remove_stale_logs(logdir: str) -> List[str]:
    """Remove this module's logs (in `logdir` and the temp dir) whose server no longer runs; returns them.

    A log stays while its TensorBoard runs, and for five minutes after its last write.
    """
    now, removed = time.time(), []
    for directory, pattern in zip((logdir, tempfile.gettempdir()), _LOG_PATTERNS):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = pattern.fullmatch(name)
            path = os.path.join(directory, name)
            try:
                if match is None or _tensorboard_process(int(match.group(1))) is not None:
                    continue
                if now - os.lstat(path).st_mtime >= _LOG_GRACE_S:
                    os.remove(path)
                    removed.append(path)
            except OSError:
                continue
    return removed


def _answers(host: str, port: int, logdir: str) -> bool:
    """Whether a TensorBoard serving `logdir` answers /data/logdir on host:port."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(_url(host, port) + "data/logdir", timeout=2.0) as response:
            served = json.loads(response.read().decode("utf-8")).get("logdir", "")
    except (OSError, ValueError, AttributeError):
        return False
    if not os.path.isabs(served):  # a relative one is relative to its own cwd
        return True
    return os.path.realpath(served) == os.path.realpath(logdir)


def _url(host: str, port: int, path_prefix: str = "") -> str:
    if host in _WILDCARD_HOSTS:
        host = DEFAULT_HOST  # a wildcard listener answers on loopback
    if ":" in host:
        host = f"[{host}]"
    prefix = path_prefix.strip("/")
    return f"http://{host}:{port}/" + (prefix + "/" if prefix else "")


def _cannot_bind(host: str, port: int) -> Optional[str]:
    """None if `port` (0: any) can be bound on `host`, else a message saying why not and what to do."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TensorBoard's server does
        try:
            s.bind((host, port))
            return None
        except OSError as e:
            error = e
    if error.errno != errno.EADDRINUSE:
        return f"Cannot listen on {host}:{port}: {error.strerror or error}. Pass a local address as host=."
    holder = next((i for i in running() if i.port == port), None)
    who = f"TensorBoard pid {holder.pid} serving {holder.logdir}" if holder else "by another program"
    return (
        f"Port {port} on {host} is already in use ({who}). Pass port=None to pick a free port, or stop what holds it."
    )


def _tensorboard_process(pid: int) -> Optional[psutil.Process]:
    """The process `pid` if it is alive and still a TensorBoard (pids get reused), else None."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc if any("tensorboard" in arg for arg in proc.cmdline()) else None
    except psutil.AccessDenied:
        return proc  # another user's: trust its info file
    except psutil.Error:
        return None


def _terminate(pid: int) -> None:
    """SIGTERM `pid`, wait, then SIGKILL; reap it if it is our child."""
    child = _children.pop(pid, None)
    try:
        proc = psutil.Process(pid)
        proc.terminate()
        if psutil.wait_procs([proc], timeout=_STOP_WAIT_S)[1]:
            proc.kill()
            psutil.wait_procs([proc], timeout=_STOP_WAIT_S)
    except psutil.Error:
        pass
    if child is not None:
        child.poll()  # psutil reaped it: Popen learns it is done


def _launch_args(cache_key: str):
    """The (arguments, working directory) TensorBoard recorded in its cache key, if readable."""
    try:
        datum = json.loads(base64.b64decode(cache_key).decode("utf-8"))
        return list(datum.get("arguments") or []), datum.get("working_directory")
    except (ValueError, TypeError, AttributeError):
        return [], None


def _flag(args: List[str], name: str) -> Optional[str]:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def _tail(path: str, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            text = f.read()[-16384:].decode("utf-8", "replace")
    except OSError as e:
        return f"<could not read the log: {e}>"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "<the log is empty>"
