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
    "RunConfig": "tpukit.config",
    "ConfigError": "tpukit.config",
    "PaddingWarning": "tpukit.config",
    "connect": "tpukit.runtime",
    "Runtime": "tpukit.runtime",
    "ConnectError": "tpukit.runtime",
    "RestartRequired": "tpukit.runtime",
    "BackendError": "tpukit.backend",
    "set_tf32": "tpukit.runtime",
    "train": "tpukit.training",
    "register_model": "tpukit.registry",
    "register_dataset": "tpukit.registry",
    "RegistryError": "tpukit.registry",
    "Splits": "tpukit.sources",
    "DataSpec": "tpukit.sources",
    "DataError": "tpukit.sources",
    "ModelError": "tpukit.modeling",
    "resume": "tpukit.training",
    "tune_batch_size": "tpukit.tuning",
    "RunResult": "tpukit.records",
    "load": "tpukit.saving",
    "export": "tpukit.saving",
    "list_runs": "tpukit.records",
    "fingerprint": "tpukit.determinism",
    "summarize_profile": "tpukit.profiling",
    "ProfileError": "tpukit.profiling",
    "RunDirError": "tpukit.records",
    "panel": "tpukit.ui",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


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
