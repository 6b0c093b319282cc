"""RunConfig's refusals as sentences a person reads under a field; no widgets, so the controller can use them.

It exists so the panel words the engine's `ConfigError` in one place. The facts come from the error itself where
it carries them (`.field`, `.value`, `.choices`); reading them out of the message text (a "RunConfig.<field>:
expected <what>. Received: <field>=<value>." sentence, as `tpukit.config` writes it) is the fallback.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Union

# fallback until the engine error carries .field (issue 20): the message format of tpukit/config.py's _fail
_FIELD_IN_MESSAGE = re.compile(r"^RunConfig\.(\w+):\s*")
_EXPECTED = re.compile(r"^RunConfig\.(\w+): expected (.+?)\. Received: \w+=(.*?)\.?$", re.DOTALL)
# How a sentence names a field, where its label is terse.
SAY = {"batch_size": "batch size", "steps_per_epoch": "steps per epoch", "steps_per_execution": "steps per execution",
       "learning_rate": "learning rate", "profile": "the profile window", "name": "the run name"}
_UNSET = object()

Refusal = Union[BaseException, str]  # an error (ConfigError, or any ValueError/TypeError), or its message


def field_of(error: Refusal) -> Optional[str]:
    """The field a refusal names: the error's `.field`, else the one its message names ("RunConfig.batch_size:
    ..."), else None."""
    field = getattr(error, "field", None)
    if field is not None:
        return field
    # fallback until the engine error carries .field (issue 20)
    match = _FIELD_IN_MESSAGE.match(str(error))
    return match.group(1) if match else None


def plain(error: Refusal) -> str:
    """A refusal as a sentence for a person: "RunConfig.batch_size: expected an integer >= 1.
    Received: batch_size='1.5'." becomes "batch size must be a whole number ≥ 1; received '1.5'."."""
    message = str(error)
    field = field_of(error)
    expected, received = _expected(error, message), _received(error, message)
    if field is not None and expected is not None and received is not None:
        for old, new in (("an integer", "a whole number"), (" >= ", " ≥ "), (" <= ", " ≤ "), (" or None", " or empty")):
            expected = expected.replace(old, new)
        received = "nothing" if received in ("''", "None") else received
        return f"{_say(field)} must be {expected}; received {received}."
    if field is None:
        return message
    rest = _FIELD_IN_MESSAGE.sub("", message, count=1)  # fallback until the engine error carries .field (issue 20)
    return f"{_say(field)}: {rest}"


def _say(field: str) -> str:
    return SAY.get(field, field.replace("_", " "))


def _expected(error: Refusal, message: str) -> Optional[str]:
    """What the field takes: "one of ..." from the error's `.choices`, else the message's "expected ..." part."""
    choices = getattr(error, "choices", None)
    if choices is not None:
        return "one of " + ", ".join(repr(c) for c in choices)
    # fallback until the engine error carries .field (issue 20)
    match = _EXPECTED.match(message)
    return match.group(2) if match else None


def _received(error: Refusal, message: str) -> Optional[str]:
    """The refused value as the message writes it (its repr): the error's `.value`, else read from the message."""
    value: Any = getattr(error, "value", _UNSET) if getattr(error, "field", None) is not None else _UNSET
    if value is not _UNSET:
        return repr(value)
    # fallback until the engine error carries .field (issue 20)
    match = _EXPECTED.match(message)
    return match.group(3) if match else None
