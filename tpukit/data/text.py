"""Text for fine-tuning a language model: an offline default, token ids, and packing into fixed-length rows.

The default text is the English help topics every Python ships (`pydoc_data.topics`: 79 topics, about 0.5 MB), so
a fine-tune runs with no network. Text becomes token ids through the model's tokenizer (an `Encoder`, which
`tpukit.models.pretrained` makes from a preset's own KerasHub tokenizer, SentencePiece or byte-pair, and
`sentencepiece_encoder` from a SentencePiece model alone): no TensorFlow on keras-hub 0.32, so it works on Colab's TPU
runtime, which has none. Conversations (`chat`) are written in the family's chat template. Each document starts its
own row of `sequence_length` tokens (packed end to end, documents would attend to each other), and the run's notes
say how much of the rows is padding, and which length would hold most documents whole.

Importing this module is cheap: sentencepiece and NumPy load when text is tokenized.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional, Sequence, Tuple

from tpukit.data import chat
from tpukit.data.types import Arrays, DataError, frozen

PYDOC = "pydoc"

# The label of a position the loss skips: padding, and a prompt's tokens. Not a token id, so no family's real token
# (id 0 is "!" in GPT-2's, Llama 3's and Qwen's vocabularies, and their padding id) is ever skipped for it.
NO_LABEL = -1


@dataclasses.dataclass(frozen=True)
class Text:
    """Text to train a language model on, tokenized once the model (its tokenizer) is known: `documents` (plain text,
    every token a label) or `conversations` (chat: turns of (role, content), written in the family's chat template,
    only the assistant's tokens labels; a (prompt, response) pair is a user turn and an assistant turn)."""

    documents: Tuple[str, ...] = ()
    name: str = "text"
    conversations: Optional[Tuple[chat.Conversation, ...]] = None

    def __len__(self) -> int:
        return len(self.conversations) if self.conversations is not None else len(self.documents)


@dataclasses.dataclass(frozen=True)
class Encoder:
    """How a model turns documents into token ids: `encode(documents)` gives one list of ids per document, and
    `decode(ids)` (where known) text again.

    `pad_id` fills the end of a row; `bos_id`/`eos_id` (None: none) open and close each document. `special(token)`
    is a special token's id, None where the vocabulary has no such token: what picks the chat template.
    """

    encode: Callable[[Sequence[str]], List[List[int]]]
    sequence_length: int
    pad_id: int
    vocabulary_size: int
    bos_id: Optional[int] = None
    eos_id: Optional[int] = None
    decode: Optional[Callable[[List[int]], str]] = None  # token ids back to text (generated samples)
    special: Callable[[str], Optional[int]] = lambda token: None

    @property
    def template(self) -> chat.Template:
        """The chat template this tokenizer's vocabulary has the tokens of (`chat.PLAIN` where none)."""
        return chat.template_for(self.special)

    def conversation_ids(self, conversations, *, up_to_answer: bool = False):
        """(ids, trained) of each conversation in this tokenizer's chat template (`chat.render`)."""
        return chat.render(
            conversations,
            self.template,
            self.encode,
            self.special,
            bos=[self.bos_id] if self.bos_id is not None else [],
            eos=[self.eos_id] if self.eos_id is not None else [],
            up_to_answer=up_to_answer,
        )


@dataclasses.dataclass(frozen=True)
class Packed:
    """Token ids in rows: `arrays` (x: token_ids and padding_mask; y: the next token), and what the rows hold.

    Each document (or conversation) starts a row of its own: KerasHub's causal LMs take a padding mask and no
    document ids, so two documents in one row would attend to each other. `padding` is the share of the positions
    that are padding; `fits` the shortest row length, in multiples of 8, that would hold 90% of the documents whole.
    """

    arrays: Arrays
    tokens: int
    documents: int
    padding: float
    untrained: int = 0  # labels the loss ignores though they are text: the prompts' tokens
    template: Optional[str] = None  # for conversations: the chat template they were written in
    prompt: Optional[str] = None  # the first conversation's prompt: what a run's samples answer
    fits: Optional[int] = None

    def note(self) -> str:
        rows, length = self.arrays.y.shape
        kind = "conversations" if self.template else "documents"
        parts = [
            f"text: {self.documents} {kind}, {self.tokens:,} tokens in {rows} rows of {length}, each {kind[:-1]} "
            f"starting its own row; padding {self.padding:.1%} of the positions"
        ]
        if self.fits is not None and self.padding > 0.5 and self.fits < length:
            parts.append(f"(sequence_length={self.fits} would hold 90% of the {kind} whole)")
        line = " ".join(parts)
        if self.template:
            line += f"; written in {self.template}"
        if self.untrained:
            line += f"; {self.untrained:,} prompt tokens are no label (the loss sees the responses only)"
        return line


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


def train_sentencepiece(
    documents: Sequence[str], vocabulary_size: int, *, model_type: str = "unigram", specials: Sequence[str] = ()
) -> bytes:
    """A SentencePiece model of `vocabulary_size` pieces trained on `documents` (its serialized proto).

    Ids 0-3 are <pad>, <eos>, <bos>, <unk>, as Gemma's tokenizer has them; `specials` (e.g. Gemma's
    `<start_of_turn>`, `<end_of_turn>`) follow, each one piece. For tests and offline demos: a tokenizer whose
    vocabulary equals a freshly built backbone's (one larger than it makes `generate` fail).
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
        user_defined_symbols=list(specials),
        minloglevel=2,
        num_threads=1,
    )
    return out.getvalue()


def train_byte_pair(documents: Sequence[str], vocabulary_size: int, *, specials: Sequence[str] = ()):
    """A byte-level BPE of `vocabulary_size` tokens trained on `documents` with `tokenizers`, `specials` first (e.g.
    Llama 3's `<|begin_of_text|>`): `(vocabulary, merges)`, what KerasHub's byte-pair tokenizers (GPT-2, Llama 3,
    Qwen) take. For tests and offline demos, as `train_sentencepiece` is for SentencePiece families."""
    import json
    import os
    import tempfile

    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    lines = [line for doc in documents for line in doc.splitlines() if line.strip()]
    bpe.train_from_iterator(
        lines, vocab_size=vocabulary_size, min_frequency=2, special_tokens=list(specials), show_progress=False
    )
    with tempfile.TemporaryDirectory() as files:
        bpe.save_model(files)
        with open(os.path.join(files, "vocab.json")) as f:
            vocabulary = json.load(f)
        with open(os.path.join(files, "merges.txt")) as f:
            merges = [m for m in f.read().splitlines() if m and not m.startswith("#")]
    return vocabulary, merges


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

    def special(token):
        i = processor.piece_to_id(token)
        return i if processor.id_to_piece(i) == token and i != processor.unk_id() else None

    return Encoder(
        lambda docs: processor.encode(list(docs)),
        sequence_length,
        vocabulary_size=processor.vocab_size(),
        decode=processor.decode,
        special=special,
        **found,
    )


def tokenize(text: Text, encoder: Encoder) -> Packed:
    """`text` as token ids in rows of `encoder.sequence_length` (see `pack`): documents between `<bos>` and `<eos>`,
    every token a label; conversations in the tokenizer's chat template, the assistant's tokens the only labels."""
    if text.conversations is not None:
        conversations = [c for c in text.conversations if any(content.strip() for _, content in c)]
        if not conversations:
            raise DataError(f"text {text.name!r} has no conversation with any text in it. Received: {len(text)} empty.")
        ids, trained = encoder.conversation_ids(conversations)
        packed = pack(ids, encoder.sequence_length, encoder.pad_id, trained)
        first = [turn for turn in conversations[0] if turn[0] != "assistant"]
        prompt = first[-1][1] if first else None
        return dataclasses.replace(packed, template=encoder.template.describe(), prompt=prompt)
    documents = [d for d in text.documents if d.strip()]
    if not documents:
        raise DataError(
            f"text {text.name!r} has no document with any text in it. Received: {len(text)} empty documents."
        )
    bos = [encoder.bos_id] if encoder.bos_id is not None else []
    eos = [encoder.eos_id] if encoder.eos_id is not None else []
    return pack([bos + list(doc) + eos for doc in encoder.encode(documents)], encoder.sequence_length, encoder.pad_id)


def pack(
    documents: Sequence[Sequence[int]],
    sequence_length: int,
    pad_id: int,
    trained: Optional[Sequence[Sequence[bool]]] = None,
) -> Packed:
    """Documents' token ids in rows: each document starts a row, and a long one goes on in the next rows. A row's
    inputs are `sequence_length` tokens and its labels the same tokens one later (the next token), so every token of a
    document but its first is a label once; no row holds two documents (see `Packed`).

    A document's last row is filled with `pad_id` (its padding_mask 0 there, its labels `NO_LABEL`, which the loss
    skips). `trained` (one flag per token, None: all) marks the tokens that are labels: an untrained one (a prompt's)
    is still an input, and its label is `NO_LABEL`, as padding's.
    """
    import numpy as np

    if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < 1:
        raise DataError(f"sequence_length: expected an integer >= 1. Received: sequence_length={sequence_length!r}.")
    length = sequence_length
    kept = [i for i, doc in enumerate(documents) if len(doc) > 1]  # one token is no label
    if not kept:
        raise DataError(
            f"the text has {sum(map(len, documents))} token(s) and no document of 2: at least 2 are needed for a label."
        )
    ids_rows, label_rows, mask_rows = [], [], []
    untrained = 0
    for i in kept:
        doc = np.asarray(documents[i], dtype=np.int32)
        rows = -(-(len(doc) - 1) // length)
        padded = np.full(rows * length + 1, pad_id, dtype=np.int32)
        padded[: len(doc)] = doc
        labels = padded[1:].copy()
        real = np.arange(1, rows * length + 1) < len(doc)
        if trained is not None:
            flags = np.zeros(rows * length + 1, dtype=bool)
            flags[: len(doc)] = np.asarray(trained[i], dtype=bool)
            untrained += int((real & ~flags[1:]).sum())
            real &= flags[1:]
        labels[~real] = NO_LABEL
        ids_rows.append(padded[:-1].reshape(rows, length))
        label_rows.append(labels.reshape(rows, length))
        mask_rows.append((np.arange(rows * length) < len(doc)).astype(np.int32).reshape(rows, length))
    token_ids, labels, mask = (np.concatenate(r) for r in (ids_rows, label_rows, mask_rows))
    lengths = np.array([len(documents[i]) for i in kept])
    needed = int(np.percentile(lengths - 1, 90, method="inverted_cdf"))  # labels 9 in 10 documents need in a row
    fits = 8 * -(-needed // 8)  # in a multiple of 8
    x = {"token_ids": token_ids, "padding_mask": mask}
    frozen(token_ids, mask, labels)
    return Packed(
        Arrays(x, labels),
        int(lengths.sum()),
        len(kept),
        float(1.0 - mask.sum() / mask.size),
        untrained,
        fits=fits,
    )
