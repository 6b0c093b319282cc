"""The user's own text, in the forms people keep it, as `text.Text`: what `train(data=...)` takes for a language model.

A fine-tune's data rarely starts as token ids. People hold a list of strings, prompt/response pairs (tuples, or dicts
as most instruction sets are written), conversations (`messages`: lists of role/content dicts, as chat datasets and
OpenAI's fine-tuning files write them), a JSONL file (one JSON object a line, as Hugging Face, OpenAI and most
fine-tuning tools write them) or a Hugging Face `datasets.Dataset`. Each becomes a `Text` here, and the model's
tokenizer makes token ids of it (`text.tokenize`); pairs and conversations are written in the model's chat template
(`chat`), and the loss sees the assistant's tokens only.

`datasets` is never imported: a Hugging Face dataset is recognised by what it has (`column_names`, and rows that are
dicts), so tpukit needs no such dependency. A JSONL path is a dataset name (`RunConfig(dataset="train.jsonl")`, the
CLI's `--dataset`): the registry asks `named` about it, as it asks `pretrained.named` about a preset, so a resumed
run reads it again by itself. Bad input is one `DataError` line naming the value and the forms taken.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Iterable, Optional

from tpukit import registry

from tpukit.data import chat, pairs
from tpukit.data.text import Text
from tpukit.data.types import DataError
from tpukit.data.types import describe as _describe

FORMS = (
    "a list of strings, of (prompt, response) pairs, of conversations (lists of {'role', 'content'} dicts) or of "
    "dicts with a 'text', 'messages' or 'prompt' and 'response' field; a JSONL file of such objects (or a .json "
    "file of one array of them); or a Hugging Face datasets.Dataset with such columns"
)
NAME_HINT = (  # the registry's hint
    'a JSONL file path (lines of {"text": ...}, {"messages": [...]} or {"prompt": ..., "response": ...}) or a .json '
    "file of one array of them"
)
SUFFIXES = (".jsonl", ".json")  # JSON Lines, or one JSON array of such objects


def is_text(data) -> bool:
    """Whether `data` is one of the text forms (not arrays `(x, y)`): decides before anything is read or checked.

    A list or tuple is text when each element is a string, a dict, a pair of strings or a conversation (a list of
    dicts; a mix is refused by `text_of`, which names the row); a Hugging Face dataset when it has `column_names` (a
    `DatasetDict` too, which `text_of` refuses, naming the split to pick).
    """
    if hasattr(data, "column_names") and not isinstance(data, (list, tuple, dict, str)):
        return True
    if not isinstance(data, (list, tuple)) or not data:
        return False
    return all(isinstance(d, (str, dict)) or _is_pair(d) or _is_messages(d) for d in data)


def _is_messages(value) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, dict) for v in value)


def language_model_text(data, name: str) -> Optional[Text]:
    """For a model that writes text: `data` as `Text` where it is in a text form; a one-line DataError where it is
    text in a shape tpukit does not take (an empty list, a row of another kind, a single string, a dict of
    columns), naming the row or the value and the forms taken; None for anything else (token-id arrays, a dataset,
    a name), which the array path reads."""
    if is_text(data):
        return text_of(data, name)
    if isinstance(data, str) and (len(data.split()) > 1 or "\n" in data) and not os.path.exists(data):
        raise DataError(
            f"data is one string of {len(data):,} characters, and a language model trains on a list of documents: "
            f"pass data=[text] (or one string per document). Received: {_describe(data)}."
        )
    if isinstance(data, dict) and data and all(_is_column(v) for v in data.values()):
        columns = sorted(map(str, data))
        fix = (
            "[{'text': t} for t in data['text']]"
            if "text" in data
            else "[{'prompt': p, 'response': r} for p, r in zip(data['prompt'], data['response'])]"
        )
        raise DataError(
            f"data is a dict of columns ({', '.join(columns[:4])}), and text is taken as rows: pass data={fix}, or "
            f"datasets.Dataset.from_dict(data). Received: dict of {len(data)} column(s)."
        )
    if isinstance(data, (list, tuple)) and not any(_is_array(d) for d in data):
        return from_rows(data, name, where="data")  # an empty list, or rows of another kind: named there
    return None


def _is_column(value) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) for v in value)


def _is_array(value) -> bool:
    """Whether `value` is (or holds, as a dict) arrays: token ids and labels, which are no text mistake."""
    if isinstance(value, dict):
        return any(_is_array(v) for v in value.values())
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _is_pair(value) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str) for v in value)


def text_of(data, name: str) -> Text:
    """The `Text` in `data` (one of the forms `is_text` recognises), checked: DataError naming the first bad row."""
    if hasattr(data, "column_names") and not isinstance(data, (list, tuple)):
        return _from_hugging_face(data, name)
    return from_rows(data, name, where="data")


def from_rows(rows: Iterable, name: str, *, where: str) -> Text:
    """A `Text` from rows that are all strings (or dicts with 'text'), or all conversations: (prompt, response) pairs,
    lists of role/content dicts, dicts with 'messages' or with 'prompt' and 'response'. `where` names them in an
    error (`data`, `train.jsonl`), and each row is named by its index there."""
    return _from_named_rows(((f"{where}[{i}]", row) for i, row in enumerate(rows)), name, where)


def _from_named_rows(rows: Iterable, name: str, where: str):
    """`from_rows` of (what names the row in an error, row) pairs; rows of preference pairs (a chosen and a rejected
    answer) as `pairs.Preferences`."""
    rows = iter(rows)
    first = next(rows, None)
    if first is not None:
        rows = itertools.chain([first], rows)
        if pairs.is_row(first[1]):
            return pairs.from_named_rows(rows, name, where)
    documents, conversations = [], []
    kind = None
    for here, row in rows:
        if isinstance(row, str):
            found, value = "strings", row
        elif _is_pair(row):
            found, value = "conversations", (("user", row[0]), ("assistant", row[1]))
        elif isinstance(row, dict):
            value = _from_dict(row, here)
            found = "strings" if isinstance(value, str) else "conversations"
        elif _is_messages(row):
            found, value = "conversations", conversation(row, here)
        elif isinstance(row, (tuple, list)) and all(isinstance(v, str) for v in row):
            raise DataError(
                f"{here}: a pair is a prompt and a response, two strings; this row has {len(row)}. "
                f"Received: {_describe(row)}."
            )
        else:
            raise DataError(
                f"{here}: expected a string, a (prompt, response) pair, a conversation or a dict; text is "
                f"{FORMS}. Received: {_describe(row)}."
            )
        if kind is not None and found != kind:
            raise DataError(
                f"{here}: {_ONE[found]} among {kind}: give every row as text alone or every row as a conversation "
                f"(a prompt and a response, or messages). Received: {_describe(row)}."
            )
        kind = found
        (documents if found == "strings" else conversations).append(value)
    if kind is None:
        raise DataError(f"{where}: no rows of text. Received: 0 rows; text is {FORMS}.")
    return Text(tuple(documents), name) if kind == "strings" else Text(name=name, conversations=tuple(conversations))


_ONE = {"strings": "a string", "conversations": "a conversation"}


def conversation(messages, where: str) -> "chat.Conversation":
    """A conversation from a list of {'role', 'content'} dicts (the chat-dataset convention): DataError naming the
    turn that has no such fields, an unknown role, or a conversation with no assistant turn (nothing to learn)."""
    turns = chat.turns_of(messages, where)
    if not any(role == "assistant" for role, _ in turns):
        raise DataError(
            f"{where}: a conversation with no assistant message leaves the model nothing to learn (the loss "
            f"sees the assistant's tokens only). Received: roles {[r for r, _ in turns]}."
        )
    return turns


def _from_dict(row: dict, where: str):
    """A dict row's text (a string) or conversation: DataError naming the missing or non-string field."""
    if "text" in row:
        fields = ("text",)
    elif "messages" in row:
        if not isinstance(row["messages"], (list, tuple)):
            raise DataError(
                f"{where}: field 'messages' must be a list of role/content dicts. Received: "
                f"{_describe(row['messages'])}."
            )
        return conversation(row["messages"], where)
    elif "prompt" in row or "response" in row:
        fields = ("prompt", "response")
    else:
        raise DataError(
            f"{where} has no 'text' field, no 'messages' and no 'prompt' and 'response' fields. Received: keys "
            f"{sorted(map(str, row))[:6]}."
        )
    for field in fields:
        if field not in row:
            raise DataError(
                f"{where} has no {field!r} field beside {fields[1 - fields.index(field)]!r}. "
                f"Received: keys {sorted(map(str, row))[:6]}."
            )
        if not isinstance(row[field], str):
            raise DataError(f"{where}: field {field!r} must be a string. Received: {_describe(row[field])}.")
    return row["text"] if fields == ("text",) else (("user", row["prompt"]), ("assistant", row["response"]))


def _from_hugging_face(dataset, name: str) -> Text:
    """A Hugging Face `datasets.Dataset` (duck-typed: `column_names`, rows that are dicts), read row by row.

    What is read, as datasets 5.2.0 has it (`arrow_dataset.py`): `Dataset.column_names` is a list, iterating gives
    dicts; a `DatasetDict`'s `column_names` is a dict of splits; an `IterableDataset`'s may be None.
    """
    columns = dataset.column_names
    if isinstance(columns, dict):  # a DatasetDict: one list of columns per split
        raise DataError(
            f"data is a Hugging Face DatasetDict (splits {sorted(columns)}): pass one split, e.g. "
            f"data=dataset[{sorted(columns)[0]!r}]. Received: {type(dataset).__name__}."
        )
    if columns is None:  # an IterableDataset whose columns are known only from its rows
        return from_rows(dataset, name, where="dataset")
    if {"chosen", "rejected"} <= set(columns):  # preference pairs, with their prompt where it is a column
        wanted = [c for c in ("prompt", "messages", "chosen", "rejected") if c in columns]
        return from_rows(({k: row[k] for k in wanted} for row in dataset), name, where="dataset")
    wanted = next((w for w in (("text",), ("messages",), ("prompt", "response")) if set(w) <= set(columns)), None)
    if wanted is None:
        raise DataError(
            f"the Hugging Face dataset has no 'text' column, no 'messages' and no 'prompt' and 'response' columns: "
            f"rename them (dataset.rename_column(...)). Received: columns {list(columns)[:8]}."
        )
    return from_rows(({k: row[k] for k in wanted} for row in dataset), name, where="dataset")


# ---- JSONL files, as dataset names --------------------------------------------------


class JsonLines:
    """A JSONL file as the registry's dataset loader: calling it reads the file into a `Text`."""

    def __init__(self, path: str):
        self.path = path
        self.description = f"text from the JSONL file {path}"

    def __call__(self) -> Text:
        return read_jsonl(self.path)

    def __eq__(self, other) -> bool:
        return isinstance(other, JsonLines) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)


def named(name: str) -> Optional[JsonLines]:
    """The loader of a JSONL file `name` (a path ending in .jsonl, found or not: reading says which), else None."""
    return JsonLines(name) if name.lower().endswith(SUFFIXES) else None


def read_jsonl(path: str) -> Text:
    """A JSONL file's rows as `Text`: each line a JSON object with 'text', 'messages', or 'prompt' and 'response'
    (blank lines skipped). DataError naming the file and the line (counted from 1) that is not such an object. A
    `.json` file that holds one JSON array of such objects is read as its rows."""
    if not os.path.isfile(path):
        raise DataError(f"the JSONL file {path!r} does not exist. Received: dataset={path!r}.")
    name = os.path.basename(path)
    if path.lower().endswith(".json"):
        with open(path, encoding="utf-8") as f:
            content = f.read()
        if content.lstrip().startswith("["):
            return _json_array(content, path)
        _refuse_wrapped_rows(content, path)
    with open(path, encoding="utf-8") as f:
        return _from_named_rows(_json_lines(f, path), name, path)


def file_note(path: str, data) -> str:
    """What was read from a JSON or JSONL dataset file, for the run's notes and the line said before training: how
    the file held its rows (one JSON array or a row a line), how many, and as what they train."""
    with open(path, encoding="utf-8") as f:
        array = path.lower().endswith(".json") and f.read(4096).lstrip().startswith("[")
    held = "one JSON array of" if array else "JSON Lines:"
    if isinstance(data, pairs.Preferences):
        what = "preference pairs (prompt, chosen, rejected)"
    elif getattr(data, "conversations", None) is not None:
        what = "conversations (only the assistant's tokens are labels)"
    else:
        what = "documents (every token a label)"
    return f"data: {path} holds {held} {len(data)} rows, read as {what}"


def _json_lines(lines, path: str):
    """(its name, the JSON object) of each of a file's lines (blank ones skipped): DataError naming the line that is
    not an object."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise DataError(
                f"{path} line {number} is not JSON ({str(e).splitlines()[0][:80]}); each line must be an object "
                'such as {"text": ...}, {"messages": [...]} or {"prompt": ..., "response": ...}.'
            ) from None
        if not isinstance(row, dict):
            raise DataError(
                f"{path} line {number}: expected a JSON object with a 'text', 'messages' or 'prompt' and 'response' "
                f"field. Received: a JSON {type(row).__name__}."
            )
        yield f"{path} line {number}", row


def _refuse_wrapped_rows(content: str, path: str) -> None:
    """DataError for a `.json` file that is one object holding the rows under a key (`{"data": [...]}`, as some
    exports write): read as one JSONL row it would say only that the row has no 'text'."""
    try:
        whole = json.loads(content)
    except ValueError:
        return  # JSON Lines in a .json file: read line by line
    lists = [k for k, v in whole.items() if isinstance(v, list) and v] if isinstance(whole, dict) else []
    if lists and not any(k in whole for k in ("text", "messages", "prompt", "chosen")):
        key = lists[0]
        raise DataError(
            f"{path} holds one JSON object whose {key!r} is a list of {len(whole[key])} rows; a dataset file holds "
            f"one JSON array of rows or a row a line (JSONL): pass the rows themselves, "
            f"data=json.load(open({path!r}))[{key!r}], or write them as JSONL."
        )


def _json_array(content: str, path: str) -> Text:
    """The `.json` file `path`'s `content`, one array (it starts with "[") of rows, the forms `from_rows` takes;
    DataError naming the file, and the row by its index in the array."""
    try:
        rows = json.loads(content)
    except ValueError as e:
        raise DataError(f"{path} is not JSON ({str(e).splitlines()[0][:80]}).") from None
    return from_rows(rows, os.path.basename(path), where=os.path.basename(path))


# The forms of text handed to train(), as a run records them (its dataset name): what each row is.
_FORMS = (("chosen", "<preferences>"), ("text", "<strings>"), ("prompt", "<pairs>"), ("messages", "<messages>"))


def _label(data) -> Optional[str]:
    """What a run records as the dataset of text handed to train(), named by its form (the panel, the Runs table and
    the run's name show it): <strings>, <pairs> (tuples, or prompt and response fields), <messages>, or
    <hf_dataset> (a Hugging Face dataset); <text> for rows of mixed forms (which `text_of` refuses, naming the row)."""
    if not is_text(data):
        return None
    if not isinstance(data, (list, tuple)):
        return "<hf_dataset>"
    forms = set()
    for row in data:
        if isinstance(row, dict):
            forms.add(next((form for key, form in _FORMS if key in row), "<text>"))
        else:
            forms.add("<strings>" if isinstance(row, str) else "<pairs>" if _is_pair(row) else "<messages>")
    return forms.pop() if len(forms) == 1 else "<text>"


registry.add_name_provider("dataset", named, NAME_HINT)
registry.add_labeller("dataset", _label)
