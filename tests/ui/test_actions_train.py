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
