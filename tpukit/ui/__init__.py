"""tpukit's notebook panel: a controller without widgets, and the widget view over it.

    import tpukit
    panel = tpukit.panel(tpukit.RunConfig(dataset="digits", model="mlp"))

Importing this package is cheap; ipywidgets, matplotlib and TensorFlow load
when a panel is built or trains. `Controller` never loads ipywidgets.
"""

from tpukit.ui.controller import Controller
from tpukit.ui.panel import Panel, panel
from tpukit.ui.state import KERNEL_RUNS, NoRunError, PanelBusy, Reproducibility, View

__all__ = ["Controller", "KERNEL_RUNS", "NoRunError", "Panel", "PanelBusy", "Reproducibility", "View", "panel"]
