"""tpukit.observe.tensorboard: real TensorBoard processes on 127.0.0.1, each one stopped."""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from tpukit.observe import tensorboard

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get_json(url):
    with _NO_PROXY.open(url, timeout=10) as response:
        return json.loads(response.read().decode("utf-8"))


def _listening(port):
    """Local addresses (hex, as /proc/net/tcp* writes them) listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            addr, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(addr)
    return found


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One TensorBoard for the module, stopped at the end whatever happens."""
    logdir = str(tmp_path_factory.mktemp("served"))
    result = tensorboard.start(logdir)
    try:
        assert isinstance(result, tensorboard.Launched), result
        yield result
    finally:
        if not isinstance(result, tensorboard.Failed):
            tensorboard.stop(result)


def test_import_does_not_load_tensorflow():
    code = "import sys, tpukit.observe.tensorboard; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_launched_listens_on_loopback_only(served):
    assert served.url == f"http://127.0.0.1:{served.port}/"
    assert _get_json(served.url + "data/logdir")["logdir"] == served.logdir
    addresses = _listening(served.port)
    assert addresses == ["0100007F"], addresses  # 127.0.0.1, and no wildcard socket
    with open(f"/proc/{served.pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    assert argv[argv.index(b"--host") + 1] == b"127.0.0.1"
    assert argv[argv.index(b"--port") + 1] == b"0"  # TensorBoard picks the port: no race for a free one


def test_launched_in_its_own_session(served):
    """Jupyter's interrupt signals the kernel's whole process group; the server is outside it."""
    assert os.getsid(served.pid) == served.pid != os.getsid(0)


def test_a_server_the_magic_started_is_reused_by_logdir_and_stopped(tmp_path, monkeypatch):
    """%tensorboard's `manager.start` (other arguments than tpukit's) serves the logdir: tpukit reuses and stops it."""
    import datetime

    from tensorboard import manager

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    started = manager.start(
        ["--logdir", str(tmp_path), "--port", "0", "--reload_interval", "7"], timeout=datetime.timedelta(seconds=90)
    )
    assert isinstance(started, manager.StartLaunched), started
    try:
        again = tensorboard.start(tmp_path)
        assert isinstance(again, tensorboard.Reused), again
        assert again.pid == started.info.pid and again.url == f"http://127.0.0.1:{started.info.port}/"
        assert tensorboard.stop(again) is True
        assert _gone(started.info.pid)
    finally:
        if not _gone(started.info.pid):
            os.kill(started.info.pid, 9)


def test_same_logdir_is_reused(served):
    started = time.monotonic()
    again = tensorboard.start(served.logdir)
    assert isinstance(again, tensorboard.Reused), again
    assert (again.port, again.pid, again.url) == (served.port, served.pid, served.url)
    assert time.monotonic() - started < 5
    assert isinstance(tensorboard.start(served.logdir + "/", port=served.port), tensorboard.Reused)


def test_running_lists_instances_by_logdir(served, tmp_path):
    mine = tensorboard.running(served.logdir)
    assert [(i.pid, i.port, i.host) for i in mine] == [(served.pid, served.port, "127.0.0.1")]
    assert served.pid in [i.pid for i in tensorboard.running()]
    assert tensorboard.running(tmp_path) == []


def test_profile_url(served, tmp_path):
    page = served.url + "data/plugin/profile/index.html?new_nav=1"  # XProf's own page, with its side rail
    assert tensorboard.profile_url(served) == page
    capture = os.path.join(served.logdir, "plugins", "profile", "2024_01_02_03_04_05")
    os.makedirs(capture, exist_ok=True)
    xplane = os.path.join(capture, "vm.xplane.pb")
    open(xplane, "wb").close()
    assert tensorboard.profile_url(served, run=xplane) == page + "&run=2024_01_02_03_04_05&tag=overview_page&host=vm"
    assert tensorboard.profile_url(served, run="train/x") == page + "&run=train%2Fx&tag=overview_page"
    with pytest.raises(TypeError):
        tensorboard.profile_url(tensorboard.Failed("no"))


def test_other_logdir_gets_its_own_instance_and_stop_kills_it(served, tmp_path):
    other = tensorboard.start(tmp_path)
    try:
        assert isinstance(other, tensorboard.Launched), other
        assert other.port != served.port and other.pid != served.pid
        assert other.logdir == str(tmp_path)
    finally:
        stopped = not isinstance(other, tensorboard.Failed) and tensorboard.stop(other)
    assert stopped is True
    assert _gone(other.pid)
    assert tensorboard.running(tmp_path) == []
    assert tensorboard.stop(other) is False
    assert tensorboard.stop(other.port) is False
    assert _get_json(served.url + "data/logdir")["logdir"] == served.logdir  # the other one is untouched


def test_taken_port_fails_with_a_useful_message(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = tensorboard.start(tmp_path, port=port)
    assert isinstance(result, tensorboard.Failed), result
    assert f"Port {port} on 127.0.0.1 is already in use" in result.message
    assert "port=None" in result.message
    assert tensorboard.running(tmp_path) == []


def test_port_of_another_tensorboard_names_it(served, tmp_path):
    result = tensorboard.start(tmp_path, port=served.port)
    assert isinstance(result, tensorboard.Failed), result
    assert f"TensorBoard pid {served.pid} serving {served.logdir}" in result.message


@pytest.mark.parametrize("exists", [True, False], ids=["logdir", "missing_logdir"])
def test_timeout_stops_the_process_it_started(tmp_path, exists):
    logdir = tmp_path if exists else tmp_path / "not-yet"
    result = tensorboard.start(logdir, timeout=0.3)
    assert isinstance(result, tensorboard.Failed), result
    assert "did not answer" in result.message and "timeout=" in result.message
    pid = int(re.search(r"pid (\d+)", result.message).group(1))
    assert _gone(pid)
    assert tensorboard.running(logdir) == []
    log = re.search(r"its log \((.+?)\):", result.message).group(1)
    assert os.path.isfile(log)  # kept for the user to read
    # Under the logdir; in the temp dir only when the logdir is not a directory yet (start creates none).
    assert os.path.dirname(log) == (str(logdir) if exists else tempfile.gettempdir())
    if not exists:
        assert not logdir.exists()
    os.remove(log)


def _dead_pid():
    """A pid no process has now (one that has just ended)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_logs_go_under_the_logdir_and_those_of_ended_servers_are_removed(served, tmp_path):
    from tensorboard.backend.event_processing import io_wrapper

    dead = _dead_pid()
    old = time.time() - 3600
    stale = tmp_path / f".tensorboard-{dead}.log"
    stale_tmp = os.path.join(tempfile.gettempdir(), f"tpukit-tensorboard-{dead}.log")
    live = tmp_path / f".tensorboard-{served.pid}.log"  # its server still runs
    young = tmp_path / f".tensorboard-{_dead_pid()}.log"  # a failed start's log, kept a while to be read
    unrelated = tmp_path / "notes.log"
    for path in (stale, stale_tmp, live, young, unrelated):
        with open(path, "w") as f:
            f.write("x")
        if path is not young:
            os.utime(path, (old, old))
    result = tensorboard.start(tmp_path)
    try:
        assert isinstance(result, tensorboard.Launched), result
        assert result.log == str(tmp_path / f".tensorboard-{result.pid}.log") and os.path.isfile(result.log)
        assert not io_wrapper.IsTensorFlowEventsFile(result.log)  # TensorBoard reads only event files
        assert "TensorBoard" in open(result.log).read()  # its output ("Serving TensorBoard on ...")
        assert not stale.exists() and not os.path.exists(stale_tmp)
        assert live.exists() and young.exists() and unrelated.exists()
    finally:
        if os.path.exists(stale_tmp):
            os.remove(stale_tmp)
        if not isinstance(result, tensorboard.Failed):
            tensorboard.stop(result)
    assert not os.path.exists(result.log)  # stop removes the log of the server it ends


def test_unusable_host_fails(tmp_path):
    result = tensorboard.start(tmp_path, host="192.0.2.1")  # TEST-NET-1: never a local address
    assert isinstance(result, tensorboard.Failed)
    assert "192.0.2.1" in result.message


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"port": 0}, "port=0"),
        ({"port": "6006"}, "port='6006'"),
        ({"host": ""}, "host=''"),
        ({"timeout": 0}, "timeout=0"),
    ],
)
def test_bad_arguments_raise(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        tensorboard.start(tmp_path, **kwargs)


def test_stop_rejects_other_types():
    with pytest.raises(TypeError):
        tensorboard.stop("6006")


def test_colab_embed_uses_the_mechanism_of_tensorboards_own_magic():
    """tpukit's Colab frame does what `%tensorboard`'s Colab branch does (TensorBoard 2.20 and 2.21 alike)."""
    import inspect

    from tensorboard import notebook

    from tpukit.ui import embed

    theirs = inspect.getsource(notebook._display_colab)
    ours = embed.tensorboard("http://127.0.0.1:6006/?run=x&tool=overview_page#profile", "colab", height=500)
    for piece in (
        "await google.colab.kernel.proxyPort(",
        "cache",
        "searchParams.set('tensorboardColab', 'true')",
        "document.createElement('iframe')",
    ):
        assert piece in theirs and piece in ours.javascript, piece
    assert '(6006, "/?run=x&tool=overview_page#profile", 500)' in ours.javascript
