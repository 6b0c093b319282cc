"""RunConfig's messages as sentences a person reads under a field; no widgets, so the controller can use them."""

from __future__ import annotations

import re
from typing import Optional

_FIELD_IN_MESSAGE = re.compile(r"^RunConfig\.(\w+):\s*")
_EXPECTED = re.compile(r"^RunConfig\.(\w+): expected (.+?)\. Received: \w+=(.*?)\.?$", re.DOTALL)
# How a sentence names a field, where its label is terse.
SAY = {"batch_size": "batch size", "steps_per_epoch": "steps per epoch", "steps_per_execution": "steps per execution",
       "learning_rate": "learning rate", "profile": "the profile window", "name": "the run name"}


def field_of(message: str) -> Optional[str]:
    """The field a RunConfig message names ("RunConfig.batch_size: ..."), or None."""
    match = _FIELD_IN_MESSAGE.match(message)
    return match.group(1) if match else None


def plain(message: str) -> str:
    """A RunConfig message as a sentence for a person: "RunConfig.batch_size: expected an integer >= 1.
    Received: batch_size='1.5'." becomes "batch size must be a whole number ≥ 1; received '1.5'."."""
    match = _EXPECTED.match(message)
    if match:
        field, expected, received = match.groups()
        for old, new in (("an integer", "a whole number"), (" >= ", " ≥ "), (" <= ", " ≤ "), (" or None", " or empty")):
            expected = expected.replace(old, new)
        received = "nothing" if received in ("''", "None") else received
        return f"{SAY.get(field, field.replace('_', ' '))} must be {expected}; received {received}."
    field = field_of(message)
    if field is None:
        return message
    rest = _FIELD_IN_MESSAGE.sub("", message, count=1)
    return f"{SAY.get(field, field.replace('_', ' '))}: {rest}"
