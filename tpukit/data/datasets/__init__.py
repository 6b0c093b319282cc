"""Data files that ship with tpukit (see README.md here)."""
