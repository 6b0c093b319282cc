"""tpukit's notebook panel: widgets over the engine.

    import tpukit
    panel = tpukit.panel(tpukit.RunConfig(dataset="digits", model="mlp"))

Importing this package is cheap; ipywidgets, matplotlib and TensorFlow load
when a panel is built or trains.
"""

from tpukit.ui.panel import KERNEL_RUNS, NoRunError, Panel, PanelBusy, Reproducibility, panel

__all__ = ["KERNEL_RUNS", "NoRunError", "Panel", "PanelBusy", "Reproducibility", "panel"]
