"""Seeing a run: progress (the one examples/s), TensorBoard scalars and server, profile captures and summaries."""
