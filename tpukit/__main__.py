"""`python -m tpukit ...`: see tpukit/cli/main.py."""

import os
import sys

from tpukit.cli import nativelog
from tpukit.cli.main import EXIT_STOPPED, main

code = main()
if code == EXIT_STOPPED:
    # Interrupted: the run is recorded. Leave now, with the documented status: a C extension that printed the
    # KeyboardInterrupt (TensorFlow's, JAX's) would make Python's shutdown end the process by SIGINT instead.
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    nativelog.flush()  # the stderr filter (this process's parent) shows the rest, then leaves with this status
    os._exit(code)
raise SystemExit(code)
