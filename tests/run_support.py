"""Helpers that tests in several folders share: a callback that acts at a given step, and the CLI's last JSON line."""

import json

import keras


class CallAt(keras.callbacks.Callback):
    """Calls `action` at the end of global step `step` (test helper)."""

    def __init__(self, step, action):
        super().__init__()
        self.step, self.action, self.seen = step, action, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            self.action()


def last_json(proc):
    """The JSON object on the last stdout line of a finished `python -m tpukit ... --json` process."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
