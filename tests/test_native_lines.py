"""Native log lines dropped from descriptor 2 (`tpukit.native_lines`), everything else passed through."""

import os
import subprocess
import sys
from pathlib import Path

from tpukit.native_lines import Filter

REPO = Path(__file__).resolve().parents[1]


def test_the_filter_drops_whole_native_lines_and_passes_the_rest(tmp_path):
    path = tmp_path / "out"
    with open(path, "wb") as out:
        lines = Filter(out.fileno())
        for chunk in (
            b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
            b"I0000 00:00:17957",
            b"71989.290966   22641 port.cc:153] oneDNN custom operations are on.\nepoch 1/2 \r",
            b"epoch 2/2\nW",
            b"hat a user wrote\n",
            b"",
        ):
            lines.feed(chunk)
    assert path.read_bytes() == b"epoch 1/2 \repoch 2/2\nWhat a user wrote\n"


def test_the_first_tensorflow_import_tpukit_makes_leaves_stderr_clean_and_working():
    """What a notebook's first tpukit cell would show in red: Abseil's pre-init warning and the oneDNN banner,
    which TF_CPP_MIN_LOG_LEVEL cannot hide. Plain `import tensorflow` prints them here; tpukit's does not, and
    descriptor 2 still carries what else is written to it, then and after."""
    code = (
        "import os, sys\n"
        "from tpukit import backend, native_lines\n"
        "with native_lines.dropped_from_stderr():\n"
        "    os.write(2, b'during\\n')\n"
        "backend.select('tensorflow')\n"
        "assert 'tensorflow' in sys.modules\n"
        "os.write(2, b'after\\n')\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND")}
    env["PYTHONPATH"] = str(REPO)
    plain = subprocess.run(
        [sys.executable, "-c", "import tensorflow"], capture_output=True, text=True, env=env, timeout=300
    )
    ours = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert ours.returncode == 0, ours.stderr[-2000:]
    assert "oneDNN custom operations" in plain.stderr or "absl::InitializeLog" in plain.stderr  # there to drop
    assert ours.stderr == "during\nafter\n"
