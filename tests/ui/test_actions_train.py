"""The Train action's status line."""

from tpukit.ui.actions_train import sentences_line


def test_the_status_line_puts_one_period_between_two_sentences():
    stopped = [
        "stopped: 20261128-run",
        "",
        "Resume continues it from epoch 4 of 20.",
        "'The import' continued: before 'x', after 'y'",
    ]
    assert sentences_line(stopped) == (
        "stopped: 20261128-run. Resume continues it from epoch 4 of 20. 'The import' continued: before 'x', after 'y'"
    )
    assert sentences_line(["stopped: r", "stopped on request.", "Resume continues it from epoch 2 of 3."]) == (
        "stopped: r. stopped on request. Resume continues it from epoch 2 of 3."
    )
    assert sentences_line(["completed: r, val_accuracy 0.9000"]) == "completed: r, val_accuracy 0.9000"


def test_a_train_that_connects_checks_the_settings_against_the_hardware_when_it_ends_not_under_the_run(tmp_path):
    """Train on a panel not yet connected: the job connects, trains what was clicked, and only then shows the
    settings again and checks them against the new hardware (once). Connect checks them at once."""
    from tpukit.ui.controller import Controller, View

    class Recorder(View):
        def __init__(self):
            super().__init__()
            self.events = []

        def connected(self, runtime):
            self.events.append("connected")

        def show_config(self, config):
            self.events.append("show_config")
            self.events.append(f"{len(controller.runs)} runs recorded")

        def status(self, text, kind="info"):
            if text.startswith("Training"):
                self.events.append("training")

    view = Recorder()
    controller = Controller(
        {"dataset": "digits", "model": "mlp", "epochs": 1, "batch_size": 64, "logdir": str(tmp_path)},
        view=view,
        context="none",
        runs=[],
    )
    view.events.clear()  # the starting state
    result = controller.train(wait=True)
    assert result.status == "completed"
    events = view.events
    assert events.count("connected") == 1 and events.count("show_config") == 1, events
    assert events.index("connected") < events.index("training") < events.index("show_config"), events
    assert events[events.index("show_config") + 1] == "1 runs recorded", events  # the run had ended

    view.events.clear()  # the same hardware: nothing to check again
    assert controller.train(wait=True).status == "completed"
    assert "show_config" not in view.events and "connected" not in view.events, view.events

    controller.config = controller.config.replace(replicas=2)
    view.events.clear()  # other hardware (two simulated replicas): Connect checks the settings at once
    assert controller.connect() is not None
    assert view.events[:2] == ["connected", "show_config"], view.events
