"""Test harness: run `python -m tpukit ...` here and SIGKILL (or SIGTERM) this process at one file write.

    python tests/killer.py FILE_NAME N torn|after|term -- train --json ...

At the Nth time a file named FILE_NAME is renamed into place (tpukit writes every
run file to a temporary name, flushes it and renames it), the process kills
itself: `torn` cuts the temporary file to half its size first (a kill halfway
through the write), `after` lets the rename happen (a kill between this write
and the next), `term` lets it happen and sends SIGTERM instead (a stop asked for at a known point of the run,
whatever this machine's speed).
"""

import os
import signal
import sys

name, nth, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
assert sys.argv[4] == "--" and how in ("torn", "after", "term")
_replace = os.replace
_seen = 0


def _replace_then_die(src, dst, *args, **kwargs):
    global _seen
    if os.path.basename(os.fspath(dst)) == name:
        _seen += 1
        if _seen == nth:
            if how == "torn":
                with open(src, "r+b") as f:
                    f.truncate(os.path.getsize(src) // 2)
            else:
                _replace(src, dst, *args, **kwargs)
            if how == "term":
                os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode, in the main thread
                return None
            os.kill(os.getpid(), signal.SIGKILL)
    return _replace(src, dst, *args, **kwargs)


os.replace = _replace_then_die
from tpukit.cli.main import main  # noqa: E402

sys.exit(main(sys.argv[5:]))
