"""Widgets without a browser or a kernel, for the panel tests here and in Colab's package sets."""

import ipywidgets


def headless_widgets():
    """Let widgets be built without a kernel; returns a function that undoes it.

    ipywidgets 8 needs nothing. ipywidgets 7 (Colab's 7.7.1) opens a comm for each
    widget and fails without a kernel, so it gets a comm that sends nowhere, as
    ipywidgets 7's own tests do.
    """
    try:
        ipywidgets.Button().close()
    except Exception:  # "Comms cannot be opened without a kernel"
        pass
    else:
        return lambda: None
    from ipykernel.comm import Comm
    from ipywidgets.widgets import widget

    class NowhereComm(Comm):
        comm_id = "tpukit-test"
        kernel = "Truthy"

        def __init__(self, *args, **kwargs):
            super().__init__()

        def open(self, *args, **kwargs):
            pass

        def on_msg(self, *args, **kwargs):
            pass

        def send(self, *args, **kwargs):
            pass

        def close(self, *args, **kwargs):
            pass

    original = widget.Comm
    widget.Comm = NowhereComm

    def restore():
        widget.Comm = original

    return restore


def headless_panel(config_fields: dict, **options):
    """A panel on `config_fields`, not displayed, in a Jupyter context, with its own runs list."""
    import tpukit
    from tpukit.ui import context

    headless_widgets()
    return tpukit.panel(
        tpukit.RunConfig(**config_fields),
        display=False,
        context=context.JUPYTER,
        display_fn=lambda obj: None,
        runs=[],
        **options,
    )
