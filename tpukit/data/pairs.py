"""Preference data: a prompt with a chosen and a rejected answer, what DPO and SimPO learn from (`models.preference`).

People keep it as rows of `prompt`, `chosen` and `rejected` (TRL's and most preference sets' columns), where the
prompt may be a conversation (`messages`, or `prompt` as a list of role/content dicts) and the answers strings or
assistant turns; or, as Hugging Face's chat preference sets write them (UltraFeedback, HH-RLHF in messages form),
`chosen` and `rejected` as whole conversations, whose shared first turns are the prompt. Each becomes a `Pair`, and
`Preferences` holds them until the model's tokenizer is known.

`tokenize` writes each answer after its prompt in the family's chat template (`chat`), one row of `sequence_length`
tokens each, chosen and rejected side by side: x is `token_ids`, `padding_mask` and `labels` of shape (pairs, 2,
length), the labels being the next token on the answer's tokens and `text.NO_LABEL` elsewhere (the prompt, its
header, padding), so a log-probability counts the answer alone. y is the pair's reference log-probabilities, zero
until the run scores them (`models.preference`).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Tuple

from tpukit.data import chat
from tpukit.data.text import NO_LABEL
from tpukit.data.types import Arrays, DataError, describe, frozen

FIELDS = ("prompt", "chosen", "rejected")
FORMS = (
    "rows with 'prompt' (a string, or a list of role/content messages; or 'messages'), 'chosen' and 'rejected' (strings "
    "or assistant messages), or 'chosen' and 'rejected' as whole conversations whose first turns are the prompt"
)


@dataclasses.dataclass(frozen=True)
class Pair:
    """One preference: the prompt's turns, and the chosen and the rejected answer's turns (assistant turns)."""

    prompt: chat.Conversation
    chosen: chat.Conversation
    rejected: chat.Conversation
    where: str = dataclasses.field(default="", compare=False)  # the row, as an error names it


@dataclasses.dataclass(frozen=True)
class Preferences:
    """Preference pairs to tune a language model on, tokenized once the model (its tokenizer) is known."""

    pairs: Tuple[Pair, ...]
    name: str = "preferences"

    def __len__(self) -> int:
        return len(self.pairs)


def is_row(row) -> bool:
    """Whether a row is a preference (it has a chosen or a rejected answer): decides how a file's rows are read."""
    return isinstance(row, dict) and ("chosen" in row or "rejected" in row)


def from_named_rows(rows: Iterable, name: str, where: str) -> Preferences:
    """`Preferences` from (what names the row in an error, row) pairs; DataError naming the first bad row."""
    pairs = [pair_of(row, here) for here, row in rows]
    if not pairs:
        raise DataError(f"{where}: no preference pairs. Received: 0 rows; preference data is {FORMS}.")
    return Preferences(tuple(pairs), name)


def pair_of(row, where: str) -> Pair:
    """The `Pair` in one row (`FORMS`): DataError naming the row and what is missing or wrong."""
    if isinstance(row, dict) and not is_row(row):
        raise DataError(
            f"{where} has no 'chosen' and 'rejected' fields, among rows of preference pairs. Received: keys "
            f"{sorted(map(str, row))[:6]}."
        )
    if not is_row(row):
        raise DataError(f"{where}: expected a preference row; preference data is {FORMS}. Received: {describe(row)}.")
    for field in ("chosen", "rejected"):
        if field not in row:
            raise DataError(
                f"{where} has no {field!r} field: a preference row has 'prompt', 'chosen' and 'rejected'. "
                f"Received: keys {sorted(map(str, row))[:6]}."
            )
    chosen, rejected = (_answer(row[f], f"{where} field {f!r}") for f in ("chosen", "rejected"))
    shared = 0
    while shared < min(len(chosen), len(rejected)) - 1 and chosen[shared] == rejected[shared]:
        shared += 1
    prompt = chosen[:shared]  # whole conversations: their shared first turns are the prompt
    chosen, rejected = chosen[shared:], rejected[shared:]
    if not prompt:
        prompt = _prompt(row, where)
    for field, answer in (("chosen", chosen), ("rejected", rejected)):
        if any(role != "assistant" for role, _ in answer):
            raise DataError(
                f"{where}: the {field} answer must be assistant turns after the prompt. Received: roles "
                f"{[r for r, _ in answer]}."
            )
    if prompt[-1][0] == "assistant":
        raise DataError(f"{where}: the prompt ends with an assistant turn; it must end with the user's turn.")
    if chosen == rejected:
        raise DataError(
            f"{where}: the chosen and the rejected answer are the same, so there is no preference to learn. "
            f"Received: {chosen[-1][1][:60]!r} twice."
        )
    return Pair(prompt, chosen, rejected, where)


def _answer(value, where: str) -> chat.Conversation:
    """An answer: a string (one assistant turn) or a list of role/content messages."""
    if isinstance(value, str):
        return (("assistant", value),)
    if isinstance(value, (list, tuple)) and value:
        return chat.turns_of(value, where)
    raise DataError(f"{where}: expected a string or a list of role/content messages. Received: {describe(value)}.")


def _prompt(row: dict, where: str) -> chat.Conversation:
    """The prompt's turns: 'prompt' (a string: one user turn, or messages) or 'messages'."""
    field = "prompt" if "prompt" in row else "messages" if "messages" in row else None
    if field is None:
        raise DataError(
            f"{where} has no 'prompt' field (nor 'messages', nor whole conversations as 'chosen' and 'rejected'): "
            f"an answer is preferred to another for a prompt. Received: keys {sorted(map(str, row))[:6]}."
        )
    value = row[field]
    if isinstance(value, str) and value.strip():
        return (("user", value),)
    if isinstance(value, (list, tuple)) and value:
        return chat.turns_of(value, f"{where} field {field!r}")
    raise DataError(
        f"{where}: field {field!r} must be a non-empty string or a list of role/content messages. Received: "
        f"{describe(value)}."
    )


@dataclasses.dataclass(frozen=True)
class PackedPairs:
    """Preference pairs as token ids (`arrays`, see the module's docstring), and what the rows hold."""

    arrays: Arrays
    template: str
    tokens: int
    cut: int  # answers cut at the row's end
    padding: float

    def note(self) -> str:
        pairs, _, length = self.arrays.x["token_ids"].shape
        line = (
            f"preferences: {pairs} pairs, each answer after its prompt in a row of {length} tokens (chosen and "
            f"rejected side by side), {self.tokens:,} tokens, padding {self.padding:.1%} of the positions; written in "
            f"{self.template}; the log-probabilities count the answers' tokens only"
        )
        if self.cut:
            line += f"; {self.cut} answers cut at sequence_length={length} (a longer one keeps more)"
        return line


def tokenize(preferences: Preferences, encoder) -> Tuple[PackedPairs, str]:
    """(the pairs as token ids in the tokenizer's chat template, the first pair's prompt: what a run's samples
    answer). DataError naming the first pair whose prompt leaves its answers no room in a row."""
    import numpy as np

    length = encoder.sequence_length
    pairs = preferences.pairs
    prompts, _ = encoder.conversation_ids([p.prompt for p in pairs])
    ids, trained = encoder.conversation_ids([p.prompt + a for p in pairs for a in (p.chosen, p.rejected)])
    shape = (len(pairs), 2, length)
    token_ids = np.full(shape, encoder.pad_id, dtype=np.int32)
    labels = np.full(shape, NO_LABEL, dtype=np.int32)
    mask = np.zeros(shape, dtype=np.int32)
    cut = tokens = 0
    for i, prompt in enumerate(prompts):
        if len(prompt) >= length:
            raise DataError(
                f"{pairs[i].where or f'pair {i}'}: its prompt is {len(prompt)} tokens, and sequence_length={length} "
                f"leaves its answers no room: use sequence_length={8 * -(-(len(prompt) + 64) // 8)} or more, or a "
                "shorter prompt."
            )
        for side in (0, 1):
            row, flags = ids[2 * i + side], np.asarray(trained[2 * i + side], dtype=bool)
            flags[: len(prompt)] = False  # an answer's log-probability counts the answer alone
            cut += len(row) - 1 > length
            n = min(len(row), length)
            token_ids[i, side, :n] = row[:n]
            mask[i, side, :n] = 1
            following = np.asarray(row[1 : length + 1])
            labels[i, side, : len(following)] = np.where(flags[1 : length + 1], following, NO_LABEL)
            tokens += n
    frozen(token_ids, mask, labels)
    reference = np.zeros((len(pairs), 2), dtype=np.float32)
    x = {"token_ids": token_ids, "padding_mask": mask, "labels": labels}
    packed = PackedPairs(Arrays(x, reference), encoder.template.describe(), tokens, cut, 1.0 - mask.mean())
    first = pairs[0].prompt
    return packed, first[-1][1]
