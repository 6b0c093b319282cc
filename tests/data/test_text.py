"""Text for fine-tuning: Python's help topics offline, SentencePiece token ids, packing and its padding, no TensorFlow."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tpukit import registry
from tpukit.data import sources, text
from tpukit.data.types import DataError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def proto():
    """A SentencePiece model of 200 pieces trained on the help topics (about 1.5 s)."""
    pytest.importorskip("sentencepiece")
    return text.train_sentencepiece(text.pydoc_topics().documents, 200)


def test_pydoc_topics_are_the_offline_text_and_a_builtin_dataset():
    topics = text.pydoc_topics()
    assert topics.name == "pydoc" and len(topics.documents) >= 70  # 79 in CPython 3.11-3.13
    assert sum(map(len, topics.documents)) > 300_000 and "the" in topics.documents[0]
    assert topics == text.pydoc_topics()  # a fixed order
    entry = registry.entry("dataset", "pydoc")
    assert entry.builtin and "Python's help topics" in entry.description
    assert "pydoc" in registry.names("dataset")


def test_each_document_starts_its_own_row_labels_are_the_next_token_and_the_tails_are_padding():
    packed = text.pack([[5, 6, 7], [8, 9, 10, 11, 12, 13]], sequence_length=4, pad_id=0)
    x, y = packed.arrays.x, packed.arrays.y
    # [5, 6, 7]: one row, 2 labels; [8..13]: 5 labels, two rows, the second going on where the first stopped
    assert x["token_ids"].tolist() == [[5, 6, 7, 0], [8, 9, 10, 11], [12, 13, 0, 0]]
    no = text.NO_LABEL  # not id 0: a real token in BPE
    assert y.tolist() == [[6, 7, no, no], [9, 10, 11, 12], [13, no, no, no]]
    assert x["padding_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]]
    assert x["token_ids"].dtype == np.int32 and packed.tokens == 9 and packed.documents == 2
    assert packed.padding == pytest.approx(3 / 12)
    assert packed.note() == (
        "text: 2 documents, 9 tokens in 3 rows of 4, each document starting its own row; padding 25.0% of the positions"
    )
    with pytest.raises(DataError, match=r"sequence_length=0\.$"):
        text.pack([[1, 2]], 0, 0)
    with pytest.raises(DataError, match="at least 2"):
        text.pack([[1]], 4, 0)


def test_mostly_padded_rows_name_the_length_that_holds_the_documents_whole():
    packed = text.pack([[1] * 10] * 9 + [[1] * 40], sequence_length=128, pad_id=0)
    assert packed.padding > 0.85 and packed.fits == 16  # 9 labels, rounded up to a multiple of 8
    assert packed.note().endswith(
        "padding 89.8% of the positions (sequence_length=16 would hold 90% of the documents whole)"
    )


def test_help_topics_tokenized_with_sentencepiece_pack_with_little_padding(proto):
    encoder = text.sentencepiece_encoder(proto, 64)
    assert (encoder.vocabulary_size, encoder.pad_id, encoder.eos_id, encoder.bos_id) == (200, 0, 1, 2)
    packed = text.tokenize(text.pydoc_topics(), encoder)
    ids, mask, y = packed.arrays.x["token_ids"], packed.arrays.x["padding_mask"], packed.arrays.y
    assert ids.shape[1] == 64 and ids.shape == y.shape == mask.shape and len(ids) > 1000
    labels = y[:, :-1] != text.NO_LABEL  # the last row's tail is padding, no label
    assert 3 < ids.max() < 200 and (ids[:, 1:][labels] == y[:, :-1][labels]).all()  # the same stream, one later
    assert (ids[mask == 0] == 0).all() and packed.padding < 0.03  # the documents' last rows' tails
    assert (ids[:, 0] == 2).sum() == packed.documents >= 70  # each document opens a row with <bos>
    assert packed.fits > 64 and "would hold" not in packed.note()


def test_text_becomes_arrays_with_the_model_encoder_and_a_note(proto):
    source = sources.prepare(
        "pydoc", name="pydoc", encoder=lambda: text.sentencepiece_encoder(proto, 128), validation_split=0.1, size=200
    )
    assert len(source.train) == 180 and len(source.validation) == 20
    assert set(source.spec.input_shape) == {"token_ids", "padding_mask"}
    (note,) = source.notes
    assert re.fullmatch(
        r"text: \d+ documents, [\d,]+ tokens in \d+ rows of 128, each document starting its own row; padding "
        r"\d+\.\d% of the positions",
        note,
    ), note


def test_the_users_own_strings_are_text_too(proto):
    from tpukit import RunConfig

    documents = [text.pydoc_topics().documents[i] for i in (3, 5, 8)]
    source = sources.prepare(
        documents, name="<text>", encoder=lambda: text.sentencepiece_encoder(proto, 32), validation_split=None
    )
    assert source.train.y.shape[1] == 32 and source.notes[0].startswith("text: 3 documents, ")
    config, _, data = registry.with_labels(RunConfig(), None, documents)
    assert config.dataset == "<strings>" and data is documents
    assert registry.with_labels(RunConfig(), None, (np.zeros((4, 2)), np.zeros(4)))[0].dataset == "<arrays>"


def test_text_for_a_model_without_a_tokenizer_is_one_line_naming_the_fix():
    for encoder in (None, lambda: None):
        with pytest.raises(DataError) as info:
            sources.prepare("pydoc", name="pydoc", encoder=encoder)
        message = str(info.value)
        assert "\n" not in message and "no tokenizer" in message and "KerasHub preset" in message
        assert message.endswith("Received: dataset='pydoc'.")


def test_tokenizing_loads_no_tensorflow_or_keras():
    pytest.importorskip("sentencepiece")
    code = (
        "import sys\nfrom tpukit.data import text\n"
        "docs = text.pydoc_topics().documents[:10]\n"
        "packed = text.tokenize(text.Text(docs), text.sentencepiece_encoder(text.train_sentencepiece(docs, 100), 32))\n"
        "assert packed.arrays.y.shape[1] == 32\n"
        "assert not {'tensorflow', 'keras', 'jax'} & set(sys.modules), sorted(sys.modules)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}, timeout=120
    )


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


def test_a_prompt_is_an_input_and_no_label_the_response_is_both():
    pairs = ((("user", "dddd"), ("assistant", "a bb")), (("user", "e"), ("assistant", "ccc")))
    packed = text.tokenize(text.Text(conversations=pairs), word_encoder())
    # a tokenizer with no chat template's tokens: <bos> dddd\n | a bb <eos>, and <bos> e\n | ccc <eos>
    assert packed.arrays.x["token_ids"].tolist() == [[2, 7, 4, 5, 1, 0, 0, 0], [2, 4, 6, 1, 0, 0, 0, 0]]
    no = text.NO_LABEL
    assert packed.arrays.y.tolist() == [[no, 4, 5, 1, no, no, no, no], [no, 6, 1, no, no, no, no, no]]
    assert packed.untrained == 2 and "2 prompt tokens are no label (the loss sees the responses only)" in packed.note()
    assert "written in plain (no chat template" in packed.note() and packed.prompt == "dddd"
    plain = text.tokenize(text.Text(("a bb", "ccc")), word_encoder())
    assert plain.untrained == 0 and "prompt" not in plain.note() and plain.prompt is None
