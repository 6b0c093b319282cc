"""Conversations in a family's chat template (`tpukit.data.chat`), with a tokenizer of whole words whose vocabulary
decides the template, so each test reads its tokens by eye; the real families' tokenizers are in
tests/behaviour/test_kerashub_families.py."""

import re

import pytest

from tpukit.data import chat, text, user_text
from tpukit.data.types import DataError


def words_encoder(specials=()):
    """An `Encoder` of whole words and newlines; `specials` are the special tokens its vocabulary has."""
    vocabulary = {"<pad>": 0, "<eos>": 1, "<bos>": 2, **{s: 3 + i for i, s in enumerate(specials)}}

    def encode(documents):
        return [[vocabulary.setdefault(w, len(vocabulary)) for w in re.findall(r"[^ \n]+|\n", d)] for d in documents]

    def decode(ids):
        names = {i: w for w, i in vocabulary.items()}
        return " ".join(names[i] for i in ids)

    return text.Encoder(
        encode, 16, pad_id=0, vocabulary_size=1000, bos_id=2, eos_id=1, decode=decode, special=vocabulary.get
    )


def labelled(encoder, conversation):
    """The conversation's tokens as words, a label the loss sees marked with *."""
    (ids,), (trained,) = encoder.conversation_ids([conversation])
    return " ".join(w + ("*" if t else "") for w, t in zip(encoder.decode(ids).split(" "), trained))


CONVERSATION = (
    ("system", "Be brief."),
    ("user", "Hi"),
    ("assistant", "Hello there"),
    ("user", "Bye"),
    ("assistant", "Bye now"),
)


def test_gemma_folds_the_system_turn_into_the_first_users_and_names_the_assistant_model():
    encoder = words_encoder(chat.GEMMA.specials)
    assert encoder.template is chat.GEMMA
    assert labelled(encoder, CONVERSATION) == (
        "<bos> <start_of_turn> user \n Be brief. \n \n Hi <end_of_turn> \n "
        "<start_of_turn> model \n Hello* there* <end_of_turn>* \n "
        "<start_of_turn> user \n Bye <end_of_turn> \n "
        "<start_of_turn> model \n Bye* now* <end_of_turn>* \n"
    )


def test_llama_3_and_chatml_write_a_system_turn_and_every_role_in_its_header():
    llama = words_encoder(chat.LLAMA3.specials)
    assert llama.template is chat.LLAMA3
    assert labelled(llama, CONVERSATION[:3]) == (
        "<bos> <|start_header_id|> system <|end_header_id|> \n \n Be brief. <|eot_id|> "
        "<|start_header_id|> user <|end_header_id|> \n \n Hi <|eot_id|> "
        "<|start_header_id|> assistant <|end_header_id|> \n \n Hello* there* <|eot_id|>*"
    )
    chatml = words_encoder(chat.CHATML.specials + ("<|endoftext|>",))
    assert chatml.template is chat.CHATML
    assert labelled(chatml, CONVERSATION[1:3]) == (
        "<bos> <|im_start|> user \n Hi <|im_end|> \n <|im_start|> assistant \n Hello* there* <|im_end|>* \n"
    )


def test_a_vocabulary_without_all_of_a_templates_tokens_gets_the_plain_format_which_says_so():
    encoder = words_encoder(("<start_of_turn>",))  # one of Gemma's two: not Gemma's template
    assert encoder.template is chat.PLAIN
    assert labelled(encoder, CONVERSATION[1:]) == "<bos> Hi \n Hello* there* <eos>* Bye \n Bye* now* <eos>*"
    assert chat.PLAIN.describe().startswith("plain (no chat template in the tokenizer")
    assert chat.GEMMA.describe() == "Gemma's chat template (<start_of_turn> <end_of_turn>)"


def test_the_prompt_a_trained_model_answers_ends_with_the_assistants_header():
    encoder = words_encoder(chat.GEMMA.specials)
    (ids,), (trained,) = encoder.conversation_ids([(("user", "Hi"), ("assistant", ""))], up_to_answer=True)
    assert encoder.decode(ids) == "<bos> <start_of_turn> user \n Hi <end_of_turn> \n <start_of_turn> model \n"
    assert not any(trained)


def test_conversations_tokenize_into_rows_with_the_template_in_the_note():
    encoder = words_encoder(chat.CHATML.specials)
    data = [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there"}]}]
    packed = text.tokenize(user_text.text_of(data, "<text>"), encoder)
    assert packed.prompt == "Hi" and packed.template == "ChatML's chat template (<|im_start|> <|im_end|>)"
    assert "1 conversations" in packed.note() and "written in ChatML's chat template" in packed.note()
    assert packed.untrained == 10  # <|im_start|> user \n Hi <|im_end|> \n <|im_start|> assistant \n, and the last \n


def test_messages_lists_dicts_jsonl_and_pairs_are_one_conversation(tmp_path):
    messages = [{"role": "user", "content": "Hi"}, {"role": "model", "content": "Hello"}]  # Gemma's name for it
    expected = (("user", "Hi"), ("assistant", "Hello"))
    path = tmp_path / "chat.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}\n')
    for data in ([messages], [{"messages": messages}], [("Hi", "Hello")], [{"prompt": "Hi", "response": "Hello"}]):
        assert user_text.text_of(data, "<text>").conversations == (expected,)
    assert user_text.read_jsonl(str(path)).conversations == (expected,)


@pytest.mark.parametrize(
    "messages, message",
    [
        ([{"role": "user", "content": "Hi"}], r"^data\[0\]: a conversation with no assistant message leaves the model"),
        (
            [{"role": "bot", "content": "Hi"}],
            r"^data\[0\] message 0: role must be one of system, user, assistant\. Received: role='bot'\.$",
        ),
        ([{"role": "user", "text": "Hi"}], r"^data\[0\] message 0: a message is a dict with 'role' and 'content'"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            r"^data\[0\] message 0: content must be a string\. Received: list",
        ),
    ],
)
def test_a_bad_message_is_one_line_naming_the_row_and_the_message(messages, message):
    with pytest.raises(DataError, match=message) as info:
        user_text.text_of([{"messages": messages}], "<text>")
    assert "\n" not in str(info.value)
