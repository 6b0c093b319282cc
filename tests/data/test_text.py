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


def test_pack_labels_are_the_next_token_and_the_tail_is_padding():
    packed = text.pack([[5, 6, 7], [8, 9, 10, 11]], sequence_length=4, pad_id=0)
    x, y = packed.arrays.x, packed.arrays.y
    # the stream 5..11 (7 tokens) gives 6 labels: two rows of 4, the last two positions padding
    assert x["token_ids"].tolist() == [[5, 6, 7, 8], [9, 10, 11, 0]]
    assert y.tolist() == [[6, 7, 8, 9], [10, 11, text.NO_LABEL, text.NO_LABEL]]  # not id 0: a real token in BPE
    assert x["padding_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert x["token_ids"].dtype == np.int32 and packed.tokens == 7 and packed.documents == 2
    assert packed.padding == pytest.approx(1 / 8)
    # a row per document: [5,6,7] -> 1 row (2 labels of 4), [8..11] -> 1 row (3 of 4)
    assert packed.unpacked_padding == pytest.approx(3 / 8)
    assert (
        "7 tokens packed into 2 rows of 4; padding 12.5% of the positions (one document per row: 37.5%)"
        in packed.note()
    )
    with pytest.raises(DataError, match=r"sequence_length=0\.$"):
        text.pack([[1, 2]], 0, 0)
    with pytest.raises(DataError, match="at least 2"):
        text.pack([[1]], 4, 0)


def test_help_topics_tokenized_with_sentencepiece_pack_with_little_padding(proto):
    encoder = text.sentencepiece_encoder(proto, 64)
    assert (encoder.vocabulary_size, encoder.pad_id, encoder.eos_id, encoder.bos_id) == (200, 0, 1, 2)
    packed = text.tokenize(text.pydoc_topics(), encoder)
    ids, mask, y = packed.arrays.x["token_ids"], packed.arrays.x["padding_mask"], packed.arrays.y
    assert ids.shape[1] == 64 and ids.shape == y.shape == mask.shape and len(ids) > 1000
    labels = y[:, :-1] != text.NO_LABEL  # the last row's tail is padding, no label
    assert 3 < ids.max() < 200 and (ids[:, 1:][labels] == y[:, :-1][labels]).all()  # the same stream, one later
    assert (ids[mask == 0] == 0).all() and packed.padding < 0.01  # only the last row's tail
    starts = np.flatnonzero(np.concatenate([ids[:, 0:1], ids[:, 1:]], 1).ravel() == 2)
    assert len(starts) >= 70  # each document opens with <bos>
    assert packed.unpacked_padding > packed.padding


def test_text_becomes_arrays_with_the_model_encoder_and_a_note(proto):
    source = sources.prepare(
        "pydoc", name="pydoc", encoder=lambda: text.sentencepiece_encoder(proto, 128), validation_split=0.1, size=200
    )
    assert len(source.train) == 180 and len(source.validation) == 20
    assert set(source.spec.input_shape) == {"token_ids", "padding_mask"}
    (note,) = source.notes
    assert re.fullmatch(
        r"text: \d+ documents, [\d,]+ tokens packed into \d+ rows of 128; padding \d+\.\d% of the "
        r"positions \(one document per row: \d+\.\d%\)",
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
    assert config.dataset == "<text>" and data is documents
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
    packed = text.tokenize(text.Text(("a bb", "ccc"), prompts=("dddd", "e")), word_encoder())
    # <bos> dddd | a bb <eos> <bos> e | ccc <eos>: the prompts' words (7, 4) and each <bos> are inputs
    stream = [2, 7, 4, 5, 1, 2, 4, 6, 1]  # 9 tokens, 8 labels: one row of 8
    assert packed.arrays.x["token_ids"].tolist() == [stream[:8]]
    labels = [t if trained else text.NO_LABEL for t, trained in zip(stream[1:], [0, 1, 1, 1, 0, 0, 1, 1])]
    assert packed.arrays.y.tolist() == [labels] and packed.untrained == 3  # dddd, the second <bos>, e
    assert "3 prompt tokens are no label (the loss sees the responses only)" in packed.note()
    plain = text.tokenize(text.Text(("a bb", "ccc")), word_encoder())
    assert plain.untrained == 0 and "prompt" not in plain.note()
