"""`python -m tpukit`: the command line, the local multi-process launcher, and the native log filter."""
