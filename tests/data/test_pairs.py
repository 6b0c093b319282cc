"""Preference data: the forms people keep it in become the same pairs, the labels count the answers' tokens only, and
a bad row is one line naming it. `datasets` is not installed here: its `Dataset` is a duck-typed stand-in."""

import json

import pytest

from tpukit import RunConfig, registry
from tpukit.data import chat, pairs, sources, text
from tpukit.data.types import DataError


def chat_encoder(sequence_length=16):
    """Whitespace words as ids (a word's length + 10), with ChatML's turn tokens as ids 3 and 4: tokens counted by
    eye, and the chat template a real family has."""
    specials = {"<|im_start|>": 3, "<|im_end|>": 4}
    return text.Encoder(
        lambda docs: [[len(w) + 10 for w in d.split()] for d in docs],
        sequence_length,
        pad_id=0,
        vocabulary_size=100,
        bos_id=2,
        eos_id=1,
        special=specials.get,
    )


def prepared(data, **kw):
    return sources.prepare(data, name="<preferences>", encoder=chat_encoder, validation_split=None, **kw)


class FakeDataset:
    """What tpukit reads of a Hugging Face `datasets.Dataset`: `column_names` and rows that are dicts."""

    def __init__(self, rows):
        self.rows, self.column_names = rows, list(rows[0])

    def __iter__(self):
        return iter(self.rows)


USER = [{"role": "user", "content": "what is a b"}]


def test_every_form_of_a_pair_is_the_same_pair_and_its_labels_are_the_answer_alone():
    plain = [{"prompt": "what is a b", "chosen": "a list", "rejected": "no idea at all"}]
    forms = {
        "strings": plain,
        "messages as the prompt": [{"messages": USER, "chosen": "a list", "rejected": "no idea at all"}],
        "conversational (TRL)": [
            {
                "prompt": USER,
                "chosen": [{"role": "assistant", "content": "a list"}],
                "rejected": [{"role": "assistant", "content": "no idea at all"}],
            }
        ],
        "whole conversations": [
            {
                "prompt": "what is a b",  # UltraFeedback's rows also carry the prompt beside them
                "chosen": USER + [{"role": "assistant", "content": "a list"}],
                "rejected": USER + [{"role": "assistant", "content": "no idea at all"}],
            }
        ],
        "a Hugging Face dataset": FakeDataset(plain),
    }
    found = {name: prepared(data) for name, data in forms.items()}
    assert len({s.fingerprint for s in found.values()}) == 1, {n: s.fingerprint for n, s in found.items()}
    source = found["strings"]
    x = source.train.x
    assert x["token_ids"].shape == x["labels"].shape == x["padding_mask"].shape == (1, 2, 16)
    assert source.train.y.shape == (1, 2) and not source.train.y.any()  # the reference: scored by the run
    assert source.chat_prompt == "what is a b"
    assert "1 pairs" in source.notes[0] and "ChatML's chat template" in source.notes[0], source.notes
    # bos, <|im_start|> user \n what is a b <|im_end|> \n, <|im_start|> assistant \n: the prompt, then the answer
    prompt = [2, 3, 14, 14, 12, 11, 11, 4]  # ChatML's "\n" pieces are no words here, so no ids
    assert x["token_ids"][0, 0, : len(prompt)].tolist() == prompt
    for side, answer in ((0, [11, 14]), (1, [12, 14, 12, 13])):
        labels = x["labels"][0, side]
        header = [3, 19]  # <|im_start|> assistant
        counted = labels[labels != text.NO_LABEL].tolist()
        assert counted == answer + [4], counted  # the answer's words and its end of turn, nothing of the prompt
        row = x["token_ids"][0, side].tolist()
        assert row[len(prompt) : len(prompt) + 2] == header
        assert x["padding_mask"][0, side].sum() == len(prompt) + 2 + len(answer) + 1
    named = registry.with_labels(RunConfig(), None, plain)[0]
    assert named.dataset == "<preferences>"


def test_a_jsonl_file_and_a_json_array_of_pairs_are_read_as_pairs(tmp_path):
    rows = [{"prompt": f"q {i}", "chosen": "good answer", "rejected": "bad"} for i in range(4)]
    lines = tmp_path / "pairs.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    array = tmp_path / "pairs.json"
    array.write_text(json.dumps(rows))
    found = [sources.prepare(str(p), name=str(p), encoder=chat_encoder, validation_split=None) for p in (lines, array)]
    assert found[0].fingerprint == found[1].fingerprint == prepared(rows).fingerprint
    assert isinstance(registry.entry("dataset", str(lines)).target(), pairs.Preferences)


def test_an_answer_longer_than_the_row_is_cut_and_said():
    long = " ".join(["word"] * 30)
    source = prepared([{"prompt": "q", "chosen": long, "rejected": "no"}])
    labels = source.train.x["labels"][0]
    assert (labels[0] != text.NO_LABEL).sum() == 16 - 6  # bos, the prompt (4) and the header (2) come first
    assert "1 answers cut at sequence_length=16" in source.notes[0], source.notes


@pytest.mark.parametrize(
    "rows, message",
    [
        (
            [{"prompt": "q", "chosen": "same", "rejected": "same"}],
            r"^data\[0\]: the chosen and the rejected answer are the same, so there is no preference to learn\. "
            r"Received: 'same' twice\.$",
        ),
        (
            [{"prompt": "q", "chosen": "a", "rejected": "b"}, {"prompt": "q", "chosen": "a"}],
            r"^data\[1\] has no 'rejected' field: a preference row has 'prompt', 'chosen' and 'rejected'\. "
            r"Received: keys \['chosen', 'prompt'\]\.$",
        ),
        ([{"chosen": "a", "rejected": "b"}], r"^data\[0\] has no 'prompt' field \(nor 'messages'"),
        ([{"prompt": "", "chosen": "a", "rejected": "b"}], r"^data\[0\]: field 'prompt' must be a non-empty string"),
        ([{"prompt": "q", "chosen": 3, "rejected": "b"}], r"^data\[0\] field 'chosen': expected a string or a list"),
        (
            [{"prompt": "q", "chosen": [{"role": "user", "content": "a"}], "rejected": "b"}],
            r"^data\[0\]: the chosen answer must be assistant turns after the prompt\. Received: roles \['user'\]\.$",
        ),
        (
            [{"prompt": [{"role": "robot", "content": "q"}], "chosen": "a", "rejected": "b"}],
            r"^data\[0\] field 'prompt' message 0: role must be one of system, user, assistant",
        ),
        (
            [{"prompt": " ".join(["long"] * 20), "chosen": "a", "rejected": "b"}],
            r"^data\[0\]: its prompt is 2\d tokens, and sequence_length=16 leaves its answers no room: use "
            r"sequence_length=\d+ or more, or a shorter prompt\.$",
        ),
    ],
)
def test_a_bad_pair_is_one_line_naming_the_row(rows, message):
    with pytest.raises(DataError, match=message):
        prepared(rows)


def test_a_bad_line_of_a_jsonl_file_is_named_by_its_file_and_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b"}) + "\n\n" + json.dumps({"prompt": "q"}))
    with pytest.raises(DataError, match=rf"^{path} line 3 has no 'chosen' and 'rejected' fields, among rows of "):
        sources.prepare(str(path), name=str(path), encoder=chat_encoder, validation_split=None)


def test_the_chat_template_pieces_of_a_prompt_are_a_prefix_of_its_answer_s():
    """What `tokenize` relies on to label the answer alone: a prompt rendered alone is where its answers start."""
    encoder = chat_encoder(64)
    for template_tokens in ({"<|im_start|>": 3, "<|im_end|>": 4}, {}):  # ChatML, and the plain template
        encoder = text.Encoder(
            encoder.encode, 64, pad_id=0, vocabulary_size=100, bos_id=2, eos_id=1, special=template_tokens.get
        )
        prompt = (("system", "be brief"), ("user", "what is it"))
        (alone,), _ = encoder.conversation_ids([prompt])
        (whole,), _ = encoder.conversation_ids([prompt + (("assistant", "a thing"),)])
        assert whole[: len(alone)] == alone and len(whole) > len(alone)
        assert encoder.template in (chat.CHATML, chat.PLAIN)
