"""Conversations as a model family's chat template writes them, with the assistant's tokens the only labels.

Chat data is a list of turns, each a role (system, user, assistant) and its content: the `messages` convention of
chat datasets, and a (prompt, response) pair is a user turn and an assistant turn. A model fine-tuned on chat learns
its family's turn format, so the turns are written in it: Gemma's `<start_of_turn>`/`<end_of_turn>`, Llama 3's
header tokens and `<|eot_id|>`, ChatML's `<|im_start|>`/`<|im_end|>` (Qwen). KerasHub (0.26 to 0.32) keeps no chat
templates, so the family is recognised by what its tokenizer has: a template is used where every one of its special
tokens is in the vocabulary. A model with none of them (GPT-2, a base model's own vocabulary) gets `PLAIN`: each turn's
text and a newline, each response closed by the end token.

The special tokens enter as their ids, never as text to tokenize: a byte-pair tokenizer would otherwise split
`<|eot_id|>` into bytes wherever its own special-token handling differs between KerasHub versions. The loss sees each
assistant turn's content and its end-of-turn token (what teaches the model to stop), nothing of the prompts or headers.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from tpukit.data.types import DataError, describe

ROLES = ("system", "user", "assistant")
ALIASES = {"model": "assistant"}  # Gemma's name for the assistant's role, as Gemma chat datasets write it

Turn = Tuple[str, str]  # (role, content)
Conversation = Tuple[Turn, ...]


@dataclasses.dataclass(frozen=True)
class Special:
    """A special token of a template, entered by its id."""

    token: str


@dataclasses.dataclass(frozen=True)
class Template:
    """How one family writes a turn: `start`, the role's name, `header_end` (text, or a special token), the content,
    `end` and `after` (text after the end token). `roles` renames a role (Gemma's assistant is "model"); where
    `system_role` is False, a system turn's content opens the first user turn, as the family's own template does."""

    name: str
    start: Optional[Special]
    header_end: Tuple  # pieces after the role's name: text or Special
    end: Optional[Special]  # None: the tokenizer's end token, after an assistant's turn only (PLAIN)
    after: str = ""
    roles: Dict[str, str] = dataclasses.field(default_factory=dict)
    system_role: bool = True

    @property
    def specials(self) -> Tuple[str, ...]:
        pieces = (self.start, *self.header_end, self.end)
        return tuple(p.token for p in pieces if isinstance(p, Special))

    def describe(self) -> str:
        if not self.specials:
            return (
                f"{self.name} (no chat template in the tokenizer: each turn's text and a newline, a response closed "
                "by its end token)"
            )
        return f"{self.name}'s chat template ({' '.join(self.specials)})"


GEMMA = Template(
    "Gemma",
    Special("<start_of_turn>"),
    ("\n",),
    Special("<end_of_turn>"),
    after="\n",
    roles={"assistant": "model"},
    system_role=False,
)
LLAMA3 = Template(
    "Llama 3", Special("<|start_header_id|>"), (Special("<|end_header_id|>"), "\n\n"), Special("<|eot_id|>")
)
CHATML = Template("ChatML", Special("<|im_start|>"), ("\n",), Special("<|im_end|>"), after="\n")
PLAIN = Template("plain", None, (), None, after="")
END = Special("")  # where a template has no end-of-turn token: the tokenizer's own end token (`render`'s `eos`)
TEMPLATES = (GEMMA, LLAMA3, CHATML)


def template_for(special_id: Callable[[str], Optional[int]]) -> Template:
    """The first template whose special tokens the tokenizer all has (`special_id` gives a token's id, or None),
    else `PLAIN`."""
    for template in TEMPLATES:
        if all(special_id(token) is not None for token in template.specials):
            return template
    return PLAIN


def _turns(conversation: Conversation, template: Template) -> List[Turn]:
    """The turns as `template` writes them: a system turn folded into the first user turn where it has no role."""
    turns = list(conversation)
    if not template.system_role and turns and turns[0][0] == "system":
        system = turns.pop(0)[1]
        if turns and turns[0][0] == "user":
            turns[0] = ("user", f"{system}\n\n{turns[0][1]}")
        else:
            turns.insert(0, ("user", system))
    return turns


def pieces(conversation: Conversation, template: Template, *, up_to_answer: bool = False) -> List[Tuple[object, bool]]:
    """The conversation as (piece, trained) pairs, a piece being text or a `Special` (the tokenizer's end token is
    `END`). `up_to_answer`: only the turns before the first assistant turn, then its header: the prompt a
    trained model answers."""
    out: List[Tuple[object, bool]] = []
    for role, content in _turns(conversation, template):
        answer = role == "assistant"
        if template.start is not None:
            out += [(template.start, False), (template.roles.get(role, role), False)]
            out += [(p, False) for p in template.header_end]
        if answer and up_to_answer:
            return out
        if template.start is None and not answer:  # PLAIN: a prompt's text and a newline
            out.append((content + "\n", False))
            continue
        out.append((content, answer))
        out.append((template.end if template.end is not None else END, answer))
        if template.after:
            out.append((template.after, False))
    return out


def render(
    conversations: Sequence[Conversation],
    template: Template,
    encode: Callable[[Sequence[str]], List[List[int]]],
    special_id: Callable[[str], Optional[int]],
    *,
    bos: Sequence[int] = (),
    eos: Sequence[int] = (),
    up_to_answer: bool = False,
) -> Tuple[List[List[int]], List[List[bool]]]:
    """Each conversation's token ids and, per token, whether it is a label the loss sees; `bos` opens each one, and
    `eos` is the plain template's end of a response. The text pieces of all conversations are encoded in one call
    (a tokenizer is fastest on a batch)."""
    laid_out = [pieces(c, template, up_to_answer=up_to_answer) for c in conversations]
    texts = [p for layout in laid_out for p, _ in layout if isinstance(p, str) and p]
    encoded = iter(encode(texts) if texts else [])
    ids_of = {token: special_id(token) for token in template.specials}
    all_ids, all_trained = [], []
    for layout in laid_out:
        ids, trained = list(bos), [False] * len(bos)
        for piece, label in layout:
            if isinstance(piece, Special):
                got = list(eos) if piece == END else [ids_of[piece.token]]
            elif piece:
                got = [int(i) for i in next(encoded)]
            else:
                got = []
            ids += got
            trained += [label] * len(got)
        all_ids.append(ids)
        all_trained.append(trained)
    return all_ids, all_trained


def turns_of(messages, where: str) -> Conversation:
    """The (role, content) turns of a list of {'role', 'content'} dicts: DataError naming the turn that has no such
    fields, an unknown role or content that is not a string."""
    turns = []
    for j, message in enumerate(messages):
        at = f"{where} message {j}"
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            keys = sorted(map(str, message))[:6] if isinstance(message, dict) else describe(message)
            raise DataError(f"{at}: a message is a dict with 'role' and 'content'. Received: {keys}.")
        role = ALIASES.get(message["role"], message["role"])
        if role not in ROLES:
            raise DataError(f"{at}: role must be one of {', '.join(ROLES)}. Received: role={message['role']!r}.")
        if not isinstance(message["content"], str):
            raise DataError(f"{at}: content must be a string. Received: {describe(message['content'])}.")
        turns.append((role, message["content"]))
    return tuple(turns)
