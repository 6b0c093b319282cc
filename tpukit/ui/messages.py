"""RunConfig's refusals as sentences a person reads under a field; no widgets, so the controller can use them.

It exists so the panel words the engine's `ConfigError` in one place, from the facts the error carries
(`.field`, `.value`, `.expected`, `.detail`): nothing here reads the engine's message text.
"""

from __future__ import annotations

from typing import Optional

# How a sentence names a field, where its label is terse.
SAY = {
    "batch_size": "batch size",
    "steps_per_epoch": "steps per epoch",
    "steps_per_execution": "steps per execution",
    "learning_rate": "learning rate",
    "profile": "the profile window",
    "name": "the run name",
}


def field_of(error: BaseException) -> Optional[str]:
    """The RunConfig field a refusal is about (`ConfigError.field`), or None (another error, or no one field)."""
    return getattr(error, "field", None)


def plain(error: BaseException) -> str:
    """A refusal as a sentence for a person: ConfigError(field="batch_size", expected="an integer >= 1",
    value="1.5") becomes "batch size must be a whole number ≥ 1; received '1.5'."; an error about no one field is
    its own message."""
    field = field_of(error)
    if field is None:
        return str(error)
    detail = getattr(error, "detail", None)
    if detail is not None:
        return f"{_say(field)}: {detail}"
    expected = getattr(error, "expected", None) or "something else"
    for old, new in (("an integer", "a whole number"), (" >= ", " ≥ "), (" <= ", " ≤ "), (" or None", " or empty")):
        expected = expected.replace(old, new)
    value = getattr(error, "value", None)
    received = "nothing" if value in ("", None) else repr(value)
    return f"{_say(field)} must be {expected}; received {received}."


def _say(field: str) -> str:
    return SAY.get(field, field.replace("_", " "))
