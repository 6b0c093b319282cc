"""Training: `train`/`resume`, the run's callbacks, precision, determinism, batch-size tuning, multi-worker."""
