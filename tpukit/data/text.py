"""Text for fine-tuning a language model: an offline default, token ids, and packing into fixed-length rows.

The default text is the English help topics every Python ships (`pydoc_data.topics`: 79 topics, about 0.5 MB), so
a fine-tune runs with no network. Text becomes token ids through the model's tokenizer (an `Encoder`, which
`tpukit.models.pretrained` makes from a preset's own KerasHub tokenizer, SentencePiece or byte-pair, and
`sentencepiece_encoder` from a SentencePiece model alone): no TensorFlow on keras-hub 0.32, so it works on Colab's TPU
runtime, which has none. The documents are packed end to end into rows of `sequence_length` tokens: a row per
document would be mostly padding, and the run's notes say how much padding is left.

Importing this module is cheap: sentencepiece and NumPy load when text is tokenized.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional, Sequence, Tuple

from tpukit.data.types import Arrays, DataError, frozen

PYDOC = "pydoc"


# How a prompt and its response become one document: the prompt, a newline, the response. Kept plain (no model's chat
# template), so any preset's tokenizer reads it; generate from a trained model with the prompt and this newline.
PROMPT_END = "\n"

# The label of a position the loss skips: padding, and a prompt's tokens. Not a token id, so no family's real token
# (id 0 is "!" in GPT-2's, Llama 3's and Qwen's vocabularies, and their padding id) is ever skipped for it.
NO_LABEL = -1


@dataclasses.dataclass(frozen=True)
class Text:
    """Documents to train a language model on; tokenized once the model (its tokenizer) is known.

    `prompts`, where given, pair each document with the prompt it responds to: the document is the prompt,
    `PROMPT_END` and the response, and only the response's tokens (and its end) are labels the loss sees.
    """

    documents: Tuple[str, ...]
    name: str = "text"
    prompts: Optional[Tuple[str, ...]] = None


@dataclasses.dataclass(frozen=True)
class Encoder:
    """How a model turns documents into token ids: `encode(documents)` gives one list of ids per document, and
    `decode(ids)` (where known) text again.

    `pad_id` fills the end of the last row, and is the label the loss ignores; `bos_id`/`eos_id` (None: none)
    open and close each document, so packed documents stay apart.
    """

    encode: Callable[[Sequence[str]], List[List[int]]]
    sequence_length: int
    pad_id: int
    vocabulary_size: int
    bos_id: Optional[int] = None
    eos_id: Optional[int] = None
    decode: Optional[Callable[[List[int]], str]] = None  # token ids back to text (generated samples)


@dataclasses.dataclass(frozen=True)
class Packed:
    """Token ids packed into rows: `arrays` (x: token_ids and padding_mask; y: the next token), and the padding.

    `padding` is the share of the rows' positions that are padding; `unpacked_padding` the share a row per document
    (the same rows cut at each document's end) would have had.
    """

    arrays: Arrays
    tokens: int
    documents: int
    padding: float
    unpacked_padding: float
    untrained: int = 0  # labels the loss ignores though they are text: the prompts' tokens

    def note(self) -> str:
        rows, length = self.arrays.y.shape
        prompts = (
            f"; {self.untrained:,} prompt tokens are no label (the loss sees the responses only)"
            if self.untrained
            else ""
        )
        return (
            f"text: {self.documents} documents, {self.tokens:,} tokens packed into {rows} rows of {length}; "
            f"padding {self.padding:.1%} of the positions (one document per row: {self.unpacked_padding:.1%})"
            f"{prompts}"
        )


def pydoc_topics() -> Text:
    """Python's help topics in English (`help('topics')`), in a fixed order: the offline default text."""
    from pydoc_data.topics import topics

    return Text(tuple(topics[name] for name in sorted(topics)), PYDOC)


def _load_pydoc(size: Optional[int] = None, seed: int = 0) -> Text:
    """Python's help topics (79 English documents, ~0.5 MB): offline text for fine-tuning a language model."""
    return pydoc_topics()


def entries():
    """The bundled text for `tpukit.registry`: (name, loader, description)."""
    return [
        (
            PYDOC,
            _load_pydoc,
            "Python's help topics: 79 English documents (~0.5 MB), for fine-tuning a language model offline",
        )
    ]


def train_sentencepiece(documents: Sequence[str], vocabulary_size: int, *, model_type: str = "unigram") -> bytes:
    """A SentencePiece model of `vocabulary_size` pieces trained on `documents` (its serialized proto).

    Ids 0-3 are <pad>, <eos>, <bos>, <unk>, as Gemma's tokenizer has them. For tests and offline demos: a
    tokenizer whose vocabulary equals a freshly built backbone's (one larger than it makes `generate` fail).
    """
    import io

    import sentencepiece

    lines = [line for doc in documents for line in doc.splitlines() if line.strip()]
    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=vocabulary_size,
        model_type=model_type,
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        pad_piece="<pad>",
        eos_piece="<eos>",
        bos_piece="<bos>",
        unk_piece="<unk>",
        hard_vocab_limit=True,
        minloglevel=2,
        num_threads=1,
    )
    return out.getvalue()


def sentencepiece_encoder(proto: bytes, sequence_length: int, **ids) -> Encoder:
    """An `Encoder` from a SentencePiece model (its serialized proto); `ids` override its pad/bos/eos ids."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=proto)

    def known(i):
        return i if i is not None and i >= 0 else None

    found = dict(pad_id=known(processor.pad_id()), bos_id=known(processor.bos_id()), eos_id=known(processor.eos_id()))
    found.update(ids)
    if found["pad_id"] is None:
        found["pad_id"] = 0
    return Encoder(
        lambda docs: processor.encode(list(docs)),
        sequence_length,
        vocabulary_size=processor.vocab_size(),
        decode=processor.decode,
        **found,
    )


def tokenize(text: Text, encoder: Encoder) -> Packed:
    """`text`'s documents as token ids packed into rows of `encoder.sequence_length` (see `pack`); with prompts, the
    prompt's tokens (and the `<bos>` before them) are no label."""
    pairs = list(zip(text.prompts or [""] * len(text.documents), text.documents))
    pairs = [(p, d) for p, d in pairs if d.strip()]
    if not pairs:
        raise DataError(
            f"text {text.name!r} has no document with any text in it. Received: {len(text.documents)} empty documents."
        )
    bos = [encoder.bos_id] if encoder.bos_id is not None else []
    eos = [encoder.eos_id] if encoder.eos_id is not None else []
    responses = encoder.encode([d for _, d in pairs])
    if text.prompts is None:
        return pack([bos + list(doc) + eos for doc in responses], encoder.sequence_length, encoder.pad_id)
    prompts = encoder.encode([p + PROMPT_END for p, _ in pairs])  # apart, so the boundary is a token boundary
    ids = [bos + list(p) + list(r) + eos for p, r in zip(prompts, responses)]
    trained = [[False] * (len(bos) + len(p)) + [True] * (len(r) + len(eos)) for p, r in zip(prompts, responses)]
    return pack(ids, encoder.sequence_length, encoder.pad_id, trained)


def pack(
    documents: Sequence[Sequence[int]],
    sequence_length: int,
    pad_id: int,
    trained: Optional[Sequence[Sequence[bool]]] = None,
) -> Packed:
    """Documents' token ids, end to end, cut into rows: each row's inputs are `sequence_length` tokens and its
    labels the same tokens one later (the next token), so every token but the first is a label once.

    The last row is filled with `pad_id` (its padding_mask 0 there, its labels `NO_LABEL`, which the loss skips).
    `trained` (one flag per token, None: all) marks the tokens that are labels: an untrained one (a prompt's) is
    still an input, and its label is `NO_LABEL`, as padding's.
    """
    import numpy as np

    if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 1:
        raise DataError(f"sequence_length: expected an integer >= 1. Received: sequence_length={sequence_length!r}.")
    stream = np.fromiter((t for doc in documents for t in doc), dtype=np.int32)
    if len(stream) < 2:
        raise DataError(f"the text has {len(stream)} token(s): at least 2 are needed for one label.")
    length = sequence_length
    rows = -(-(len(stream) - 1) // length)
    padded = np.full(rows * length + 1, pad_id, dtype=np.int32)
    padded[: len(stream)] = stream
    starts = np.arange(rows)[:, None] * length + np.arange(length)[None, :]
    token_ids, labels = padded[starts], padded[starts + 1]
    labels = np.where(starts + 1 < len(stream), labels, np.int32(NO_LABEL))
    untrained = 0
    if trained is not None:
        flags = np.zeros(rows * length + 1, dtype=bool)
        flags[: len(stream)] = np.fromiter((f for doc in trained for f in doc), dtype=bool, count=len(stream))
        ignored = ~flags[starts + 1] & (starts + 1 < len(stream))
        labels = np.where(ignored, np.int32(NO_LABEL), labels)
        untrained = int(ignored.sum())
    mask = (starts < len(stream)).astype(np.int32)
    padding = 1.0 - mask.sum() / mask.size
    lengths = np.array([len(d) for d in documents if len(d) > 1])
    per_doc_rows = -(-(lengths - 1) // length)
    unpacked = 1.0 - (lengths - 1).sum() / max(1, per_doc_rows.sum() * length)
    x = {"token_ids": token_ids, "padding_mask": mask}
    frozen(token_ids, mask, labels)
    return Packed(Arrays(x, labels), int(len(stream)), len(documents), float(padding), float(unpacked), untrained)
