"""tpukit: drive a Colab TPU, a GPU or the CPU from a notebook.

    import tpukit
    runtime = tpukit.connect()                      # TPU, else GPUs, else CPU
    result = tpukit.train(tpukit.RunConfig(epochs=2), runtime)
    print(result.summary())

Importing tpukit is cheap: TensorFlow and Keras load on first use.
"""

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "TpukitError": "tpukit.errors",
    "TpukitWarning": "tpukit.errors",
    "RunConfig": "tpukit.config",
    "ConfigError": "tpukit.config",
    "PaddingWarning": "tpukit.config",
    "PreferenceOptions": "tpukit.config",
    "connect": "tpukit.hardware.connect",
    "Runtime": "tpukit.hardware.runtime",
    "ConnectError": "tpukit.hardware.runtime",
    "RestartRequired": "tpukit.hardware.runtime",
    "BackendError": "tpukit.backend",
    "set_tf32": "tpukit.hardware.gpu",
    "train": "tpukit.training.api",
    "register_model": "tpukit.registry",
    "register_dataset": "tpukit.registry",
    "RegistryError": "tpukit.registry",
    "Splits": "tpukit.data.sources",
    "DataSpec": "tpukit.data.sources",
    "DataError": "tpukit.data.sources",
    "ModelError": "tpukit.models.modeling",
    "OutOfMemory": "tpukit.models.memory",
    "resume": "tpukit.training.api",
    "tune_batch_size": "tpukit.training.tuning",
    "RunResult": "tpukit.runs.records",
    "load": "tpukit.runs.store",
    "export": "tpukit.runs.saving",
    "list_runs": "tpukit.runs.records",
    "fingerprint": "tpukit.training.determinism",
    "summarize_profile": "tpukit.observe.profiling",
    "ProfileError": "tpukit.observe.profiling",
    "RunDirError": "tpukit.runs.directory",
    "NotARunDir": "tpukit.runs.directory",
    "RunInUse": "tpukit.runs.directory",
    "BackupError": "tpukit.runs.backups",
    "RestoreError": "tpukit.runs.backups",
    "StateMismatch": "tpukit.runs.model_state",
    "ExportError": "tpukit.runs.saving",
    "DatasetUnavailable": "tpukit.data.builtin",
    "WorkerLost": "tpukit.hardware.tf_multiworker_loop",
    "panel": "tpukit.ui",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

# The registry is the engine's bottom layer and imports nothing above it: the zoo, the bundled datasets, presets and
# text register their names with it when imported, here (none of them loads a framework).
from tpukit import data as _data, models as _models  # noqa: E402,F401


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tpukit' has no attribute {name!r}")
    attr = "summarize" if name == "summarize_profile" else name
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return __all__
