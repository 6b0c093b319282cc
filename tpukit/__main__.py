"""`python -m tpukit ...`: see tpukit/cli.py."""

from tpukit.cli import main

raise SystemExit(main())
