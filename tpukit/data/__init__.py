"""Data: the bundled datasets (`builtin`), what a run's data is (`sources`), and how it is fed (`pipeline`).

`tpukit.data.load("digits")` and friends are the bundled datasets' functions, as in the notebooks.
"""

from tpukit.data.builtin import (
    DATASETS,
    OFFLINE_DATASETS,
    ONLINE_DATASETS,
    DatasetUnavailable,
    ImageData,  # noqa: F401
    cached,
    eval_dataset,
    info,
    load,
    steps_per_epoch,
    train_dataset,
    train_size,
)
from tpukit.data import user_text  # noqa: F401,E402  (registers JSONL names and text labels with the registry)
