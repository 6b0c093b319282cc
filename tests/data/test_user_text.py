"""The user's own text: prompt/response pairs, dicts, JSONL files and Hugging Face datasets become `text.Text`, and a
bad row is one line naming it. `datasets` is not installed here: its `Dataset` is a duck-typed stand-in."""

import json

import pytest

from tpukit import RunConfig, registry
from tpukit.data import sources, text, user_text
from tpukit.data.types import DataError


def word_encoder(sequence_length=8):
    """An `Encoder` that reads whitespace words as ids (a word's length + 3), so tests can count tokens by eye."""
    return text.Encoder(
        lambda docs: [[len(w) + 3 for w in d.split()] for d in docs],
        sequence_length,
        pad_id=0,
        vocabulary_size=100,
        bos_id=2,
        eos_id=1,
    )


def test_pairs_and_dicts_of_prompts_and_responses_are_the_same_text():
    pairs = [("What is 2+2?", "4"), ("Capital of France?", "Paris")]
    dicts = [{"prompt": p, "response": r} for p, r in pairs]
    as_pairs, as_dicts = (
        sources.prepare(d, name="<text>", encoder=word_encoder, validation_split=None) for d in (pairs, dicts)
    )
    assert as_pairs.fingerprint == as_dicts.fingerprint and "prompt tokens are no label" in as_pairs.notes[0]
    texts_ = sources.prepare(
        [{"text": "one two"}, {"text": "three"}], name="<text>", encoder=word_encoder, validation_split=None
    )
    assert (
        texts_.fingerprint
        == sources.prepare(["one two", "three"], name="<text>", encoder=word_encoder, validation_split=None).fingerprint
    )
    named = {  # a run records text handed to train() by its form
        "<pairs>": (pairs, dicts),
        "<strings>": (["one two", "three"], [{"text": "one two"}]),
        "<messages>": ([[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]],),
        "<text>": (["one", ("a", "b")],),  # mixed forms: text_of refuses them, naming the row
    }
    for label, forms in named.items():
        for data in forms:
            assert registry.with_labels(RunConfig(), None, data)[0].dataset == label, data
    assert registry.with_labels(RunConfig(), None, [{"messages": []}])[0].dataset == "<messages>"
    assert sources.planned_train_examples(RunConfig(), pairs) is None  # two pairs, not (x, y)


@pytest.mark.parametrize(
    "data, message",
    [
        ([{"prompt": "p"}], r"^data\[0\] has no 'response' field beside 'prompt'\. Received: keys \['prompt'\]\.$"),
        (
            [{"txt": "x"}],
            r"^data\[0\] has no 'text' field, no 'messages' and no 'prompt' and 'response' fields\. Received: keys "
            r"\['txt'\]\.$",
        ),
        ([{"text": 3}], r"^data\[0\]: field 'text' must be a string\. Received: int 3\.$"),
        (
            [("p", "r"), "just text"],
            r"^data\[1\]: a string among conversations: give every row as text alone or every row as a "
            r"conversation \(a prompt and a response, or messages\)\. Received: str 'just text'\.$",
        ),
        ([{"text": "a"}, {"prompt": "p", "response": "r"}], r"^data\[1\]: a conversation among strings"),
    ],
)
def test_bad_rows_are_one_line_naming_the_row_and_the_forms(data, message):
    with pytest.raises(DataError, match=message) as info:
        sources.prepare(data, name="<text>", encoder=word_encoder)
    assert "\n" not in str(info.value)


def test_a_jsonl_file_is_a_dataset_name_read_line_by_line(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"prompt": "What is 2+2?", "response": "4"}\n\n{"prompt": "Hi", "response": "Hello there"}\n')
    entry = registry.entry("dataset", str(path))
    assert entry.description == f"text from the JSONL file {path}"
    source = sources.prepare(str(path), name=str(path), encoder=word_encoder, validation_split=None)
    pairs = sources.prepare(
        [("What is 2+2?", "4"), ("Hi", "Hello there")], name="<text>", encoder=word_encoder, validation_split=None
    )
    assert source.fingerprint == pairs.fingerprint
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"text": "one two"}\n{"text": "three", "id": 7}\n')
    assert sources.prepare(str(plain), name="p", encoder=word_encoder, validation_split=None).spec.num_train == 2


@pytest.mark.parametrize(
    "content, message",
    [
        (
            '{"text": "a"}\n{"text": "b"}\n{"body": "c"}\n',
            r"line 3 has no 'text' field, no 'messages' and no 'prompt' and 'response' "
            r"fields\. Received: keys \['body'\]\.$",
        ),
        ('{"text": "a"}\nnot json\n', r"line 2 is not JSON \(.*\); each line must be an object such as"),
        (
            '["a"]\n',
            r"line 1: expected a JSON object with a 'text', 'messages' or 'prompt' and 'response' field\. Received: a "
            r"JSON list\.$",
        ),
        ('{"text": "a"}\n{"prompt": "p", "response": "r"}\n', r"line 2: a conversation among strings"),
        ("\n\n", r": no rows of text\. Received: 0 rows; text is"),
    ],
)
def test_a_bad_jsonl_line_is_one_line_naming_the_file_and_the_line(tmp_path, content, message):
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=message) as info:
        sources.prepare(str(path), name=str(path), encoder=word_encoder)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)
    with pytest.raises(DataError, match=r"^the JSONL file '.*missing\.jsonl' does not exist"):
        sources.prepare(str(tmp_path / "missing.jsonl"), name="m", encoder=word_encoder)


class DuckTypedHuggingFaceDataset:
    """A stand-in for `datasets.Dataset` (not installed here): what tpukit reads of one, `column_names` and rows as
    dicts, as `datasets.Dataset.from_list(rows)` gives them."""

    def __init__(self, rows):
        self.rows = rows
        self.column_names = list(rows[0])

    def __iter__(self):
        return iter(dict(r) for r in self.rows)

    def __len__(self):
        return len(self.rows)


class DuckTypedHuggingFaceDatasetDict:
    column_names = {"train": ["text"], "test": ["text"]}


def test_a_duck_typed_hugging_face_dataset_is_text_by_its_columns():
    rows = [{"prompt": "What is 2+2?", "response": "4", "source": "math"}, {"prompt": "Hi", "response": "Hello"}]
    data = DuckTypedHuggingFaceDataset(rows)
    source = sources.prepare(data, name="<text>", encoder=word_encoder, validation_split=None)
    pairs = sources.prepare(
        [(r["prompt"], r["response"]) for r in rows], name="<text>", encoder=word_encoder, validation_split=None
    )
    assert source.fingerprint == pairs.fingerprint
    assert registry.with_labels(RunConfig(), None, data)[0].dataset == "<hf_dataset>"
    with pytest.raises(
        DataError,
        match=r"^the Hugging Face dataset has no 'text' column, no 'messages' and no 'prompt' and "
        r"'response' columns: rename them .*Received: columns \['question'\]\.$",
    ):
        sources.prepare(DuckTypedHuggingFaceDataset([{"question": "q"}]), name="<text>", encoder=word_encoder)
    with pytest.raises(
        DataError,
        match=r"^data is a Hugging Face DatasetDict \(splits \['test', 'train'\]\): pass "
        r"one split, e.g. data=dataset\['test'\]",
    ):
        sources.prepare(DuckTypedHuggingFaceDatasetDict(), name="<text>", encoder=word_encoder)


@pytest.mark.parametrize(
    "data, message",
    [
        ([], "data: no rows of text. Received: 0 rows; text is a list of strings"),
        ([1, 2, 3], "data[0]: expected a string, a (prompt, response) pair, a conversation or a dict; text is"),
        (["ok", None], "data[1]: expected a string, a (prompt, response) pair, a conversation or a dict; text is"),
        ([("prompt only",)], "data[0]: a pair is a prompt and a response, two strings; this row has 1."),
        ("The import statement\nbinds names.", "data is one string of 33 characters, and a language model trains on"),
        ({"text": ["a", "b"]}, "data is a dict of columns (text), and text is taken as rows: pass data=[{'text': t}"),
    ],
)
def test_text_in_a_shape_a_language_model_cannot_take_is_one_line_naming_it(data, message):
    with pytest.raises(DataError) as info:
        user_text.language_model_text(data, "<text>")
    assert str(info.value).startswith(message) and "\n" not in str(info.value), str(info.value)


def test_token_ids_and_names_are_no_text_mistake_and_a_json_array_file_is_rows(tmp_path):
    import numpy as np

    ids = {"token_ids": np.zeros((2, 4), "int32"), "padding_mask": np.ones((2, 4), "int32")}
    assert user_text.language_model_text((ids, np.zeros((2, 4), "int32")), "x") is None
    assert user_text.language_model_text("pydoc", "pydoc") is None
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"prompt": "p1", "response": "r1"}, {"prompt": "p2", "response": "r2"}]))
    text = user_text.named(str(path))()
    assert text.documents == () and text.conversations == (
        (("user", "p1"), ("assistant", "r1")),
        (("user", "p2"), ("assistant", "r2")),
    )
    path.write_text(json.dumps([{"text": "a"}, 5]))
    with pytest.raises(
        DataError, match=r"^rows.json\[1\]: expected a string, a \(prompt, response\) pair, a conversation or a dict"
    ):
        user_text.named(str(path))()
