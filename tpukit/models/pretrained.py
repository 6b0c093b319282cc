"""Pretrained language models from KerasHub presets: a preset is a model like any other.

`RunConfig(model=...)` and the CLI's `--model` take a preset where they take a zoo name: a local preset directory
(what `save_to_preset` writes), `kaggle://owner/model/keras/variant`, `hf://owner/name`, or a KerasHub name such as
`gemma3_instruct_1b`. The registry asks `named` about a name it does not know, and gets a `Preset`: the run
is a `models.source.ModelSource`, the one module that knows KerasHub's classes: it builds the model, tokenizes
text (`encoder`), writes samples, lays the weights out for model parallelism, rematerializes its blocks and trains
it with Keras' own fit. Nothing is downloaded until a run builds the model.

With `RunConfig.lora_rank` set (the default, 4), the weights load in bfloat16 (not mixed: frozen weights need no
float32 copy) and only the LoRA adapters (`models.lora`) train. Importing this module loads no KerasHub.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import importlib.util
import os
from typing import TYPE_CHECKING, Optional, Tuple

from tpukit.data import text as texts
from tpukit.errors import one_line
from tpukit import registry
from tpukit.models import credentials, hub_fit, lora, modeling, preset_access, preset_files
from tpukit.models.modeling import ModelError
from tpukit.models.source import KIND_SETTINGS, TUNED, ModelSource

if TYPE_CHECKING:
    import keras

    from tpukit.models import memory

SCHEMES = ("kaggle://", "hf://", "modelscope://", "gs://")
_PRESET_FILES = ("config.json", "metadata.json")  # what every KerasHub preset directory holds
PROMPT_TOKENS = 8  # a run's sample prompt, taken from its data: the first tokens of the first row
SAMPLE_TOKENS = 24  # what a run's sample adds to its prompt, at most
NAME_HINT = "a KerasHub preset directory, kaggle://, hf:// or a KerasHub preset name"  # the registry's unknown name


def is_preset_dir(path: str) -> bool:
    """Whether `path` is a directory KerasHub's `save_to_preset` wrote."""
    return os.path.isdir(path) and all(os.path.isfile(os.path.join(path, f)) for f in _PRESET_FILES)


def named(name: str) -> Optional["Preset"]:
    """The `Preset` that `name` points at, or None where it names no preset (the registry then says so).

    A directory or a URL is taken as it is; a bare name is looked up in KerasHub's list of presets, which
    loads KerasHub (where it is installed), so this is asked only about names the registry does not know.
    """
    if is_preset_dir(name):
        damaged = preset_files.problem(name)  # before a run directory: which file, not what its reader raised
        if damaged:
            raise registry.RegistryError(damaged)
        return Preset(name)
    if name.startswith(SCHEMES):
        return Preset(name)
    if os.sep in name or name.startswith(("~", ".")):
        raise registry.RegistryError(preset_access.not_a_preset_dir(name, _PRESET_FILES))
    if importlib.util.find_spec("keras_hub") is None:
        return None
    try:
        import keras_hub

        known = keras_hub.models.CausalLM.presets
    except Exception:  # a KerasHub that cannot load here (a Keras too old for it): the name stays unknown
        return None
    if name in known:
        return Preset(name)
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.85)
    if close:
        raise registry.RegistryError(
            f"unknown model {name!r}: did you mean KerasHub's preset {close[0]!r}? Received: model={name!r}."
        )
    return None


def _keras_hub():
    """KerasHub, or a one-line ModelError: not installed (it is an extra: tpukit[hub]), or installed beside a Keras
    older than it declares (its import would fail somewhere inside, or worse, half work)."""
    too_old = preset_access.keras_too_old_here()
    if too_old:
        raise ModelError(too_old)
    if importlib.util.find_spec("tensorflow") is not None:  # KerasHub (0.26 to 0.32) loads it, on any backend
        from tpukit import backend

        backend.import_tensorflow_quietly()  # else its banners show in red in a JAX notebook's cell
    try:
        import keras_hub
    except ImportError as e:
        if importlib.util.find_spec("keras_hub") is not None:
            raise ModelError(
                f"KerasHub is installed but did not import ({one_line(e)}): reinstall it with "
                f"pip install 'tpukit[hub]' (on Colab's TPU runtime: {preset_access.SETUP_HUB})."
            ) from e
        raise ModelError(
            f"pretrained models need KerasHub, which is not installed ({one_line(e)}): "
            "pip install 'tpukit[hub]' (on Colab's TPU runtime: tpukit.colab.setup(hub=True), first in "
            "a fresh runtime)."
        ) from None
    return keras_hub


def _kaggle_handle(name: str) -> Optional[str]:
    """A KerasHub preset name's Kaggle handle (`kaggle://keras/gemma3/keras/gemma3_instruct_1b/3`), or None."""
    try:
        return _keras_hub().models.CausalLM.presets.get(name, {}).get("kaggle_handle")
    except Exception:
        return None


def _not_loaded(source: str, what: str, error: BaseException) -> ModelError:
    """The one-line ModelError for a preset (or its tokenizer) that did not load: why the download failed where it
    did (`preset_access`), else KerasHub's own words."""
    problem = preset_access.download_problem(source, error, reach=preset_access.reachable, kaggle_handle=_kaggle_handle)
    if problem is None and os.path.isdir(source):
        problem = preset_files.loading_problem(source, error)
    return ModelError(problem or f"preset {source!r}{what}: {one_line(error)}")


@dataclasses.dataclass(frozen=True)
class Preset(ModelSource):
    """A KerasHub causal language model preset, named by `source` (a directory, a URL or a KerasHub name)."""

    source: str
    reads = tuple(KIND_SETTINGS)
    chart = "perplexity"

    @property
    def description(self) -> str:
        return f"KerasHub preset {self.source}"

    def settings_note(self, config) -> Tuple[str, str]:
        """What `config` makes of this preset, before anything loads: (its LoRA, its text), a line each."""
        if config.lora_rank:
            alpha = "alpha = rank" if config.lora_alpha is None else f"alpha {config.lora_alpha:g}"
            where = ", ".join(config.lora_targets) if config.lora_targets else "the attention's query and value"
            frozen = f"quantized to {config.quantize} (QLoRA)" if config.quantize else "in bfloat16"
            lora = f"LoRA adapters of rank {config.lora_rank} ({alpha}) on {where}; the other weights frozen, {frozen}"
        else:
            lora = "every weight trains, in the run's precision"
        return lora, f"text in rows of {config.sequence_length:,} tokens, each document starting its own"

    def memory_note(self, config, runtime=None) -> str:
        """A training step's memory, estimated from the preset's own files before anything loads (`memory`), and
        whether it fits `runtime`'s device: for the panel, beside the model. A preset not on disk yet is estimated
        when the run loads it (its notes say so)."""
        import json

        from tpukit.models import memory

        if not is_preset_dir(self.source):
            return "memory: estimated when the run loads the preset (the run's notes say it)"
        try:
            with open(os.path.join(self.source, "config.json")) as f:
                backbone = json.load(f)
            with open(os.path.join(self.source, "metadata.json")) as f:
                parameters = int(json.load(f)["parameter_count"])
            shape = memory.backbone_shape(backbone["class_name"], backbone["config"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""
        found = memory.estimate_unbuilt(
            shape,
            parameters,
            lora_rank=config.lora_rank,
            quantize=config.quantize,
            batch_size=config.batch_size * self.rows_per_example,
            sequence_length=config.sequence_length,
            optimizer=config.optimizer,
            remat=config.remat is True,
            accumulation=config.accumulation_steps,
            device=runtime.device_memory if runtime else None,
            upcast=bool(runtime and runtime.upcasts),
        )
        if found is None:
            return ""
        if runtime is None:
            return f"{found.note()}; Connect compares it with the device's"
        return memory.verdict(found, None, None)

    def shape(self, model) -> Optional["memory.Shape"]:
        """The widths of `model`'s backbone, from its config (`memory.backbone_shape`)."""
        from tpukit.models import memory

        return memory.backbone_shape(type(model.backbone).__name__, model.backbone.get_config())

    def layout_map(self, mesh) -> Tuple[Optional["keras.distribution.LayoutMap"], str]:
        """(how this preset's weights lie over `mesh`'s "model" axis: its backbone's `get_layout_map`, or None where
        its family has none, such as Gemma 3 in KerasHub 0.32; the backbone's name, for the run's notes)."""
        keras_hub = _keras_hub()
        import keras

        try:
            from keras_hub.src.utils.preset_utils import load_json  # reads (or fetches) config.json alone

            backbone = keras.saving.get_registered_object(load_json(self.source, "config.json")["registered_name"])
        except Exception as e:
            raise ModelError(f"preset {self.source!r}: its config did not load: {one_line(e)}") from e
        named = f"{getattr(backbone, '__name__', backbone)} (KerasHub {keras_hub.__version__})"
        make = getattr(backbone, "get_layout_map", None)
        return (
            make(mesh, model_parallel_dim_name="model", data_parallel_dim_name="batch") if make else None,
            f"{named}.get_layout_map" if make else named,
        )

    def for_method(self, config) -> ModelSource:
        """This preset, or for a preference method (`RunConfig.method`) the same preset tuned on preference pairs
        (`models.preference`)."""
        return self if config.method == "sft" else TUNED[config.method](self, config)

    def check_data(self, data) -> None:
        from tpukit.data import sources, types

        x = getattr(data.train, "x", None)
        if isinstance(x, dict) and "labels" in x:
            raise ModelError(
                f"dataset {data.name!r} holds preference pairs (a chosen and a rejected answer), and method='sft' "
                "learns a text's next tokens: set method='dpo' (or 'simpo') to learn which answer is preferred."
            )
        received = types.not_token_ids(sources.inputs_of(data.train, 2))
        if received:  # images or features: Keras would say only that the model wants two named inputs
            named = "the data" if data.name.startswith("<") else f"dataset {data.name!r}"
            raise types.DataError(
                f"preset {self.source!r} is a causal language model, which trains on text, and {named} holds "
                f"{received}: give it text (a list of strings, prompt/response pairs, a JSONL file, "
                "dataset='pydoc'), or train a model made for such data (model='cnn' for images, or your own)."
            )

    def __call__(self):
        """Build it as a plain factory would (no LoRA, the run's dtype policy), for callers that know no config."""
        return self._load(None)

    # ---- what a run asks of its model source (models.source.ModelSource) -------------------------------------
    def build(self, config, spec=None, *, in_place: bool = True, policy: str = "float32"):
        """The model for a run of `config` (not compiled: `compile` does it once), and a sentence on what was built.

        LoRA adapters of rank `config.lora_rank` (scaled by `lora_alpha` / rank) on `config.lora_targets` (None:
        KerasHub's default, the attention's query and value projections), the frozen weights in bfloat16;
        `config.lora_rank=None` trains every weight, in the run's dtype policy.
        """
        rank, said = config.lora_rank, self._credentials()
        arrival = preset_access.Arrival.of(self.source, _kaggle_handle)  # where a Kaggle download's files came from
        model = self._load("bfloat16" if rank else None)
        said = "; ".join(filter(None, [said, arrival and arrival.say()]))
        longest = getattr(model.backbone, "max_sequence_length", None)  # learned positions end there (GPT-2, OPT)
        if longest and config.sequence_length > longest:
            raise ModelError(
                f"RunConfig.sequence_length={config.sequence_length} is longer than preset "
                f"{self.source!r} takes: its backbone's max_sequence_length is {longest}; use "
                f"sequence_length={longest} or less."
            )
        vocabulary = int(self.tokenizer().vocabulary_size())
        if vocabulary > model.backbone.vocabulary_size:
            raise ModelError(
                f"preset {self.source!r}: its tokenizer has {vocabulary} tokens, and the backbone's "
                f"embedding only {model.backbone.vocabulary_size}: ids past it cannot be embedded; use "
                f"a tokenizer of at most {model.backbone.vocabulary_size} tokens."
            )
        if rank:
            lora.enable(model.backbone, rank, config.lora_alpha, config.lora_targets, self.source, config.quantize)
        return (
            model,
            f"{self.description} ({type(model).__name__}), {lora.trainable_note(model, rank, config.lora_alpha)}"
            + (f"; {said}" if said else ""),
        )

    def _credentials(self) -> Optional[str]:
        """Where the credentials for this preset's download are (`credentials.find`), those in Colab's Secrets put
        where the download library reads them; None for a preset on disk."""
        hub = preset_access.hub_of(self.source)
        if hub is None:
            return None
        found = credentials.find(hub)
        credentials.use(found)
        return found.describe()

    def user_compile(self, model) -> dict:
        """A next-token loss that skips the positions labelled `NO_LABEL` (padding, prompts); the optimizer is the
        RunConfig's."""
        import keras

        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=texts.NO_LABEL)
        return {"loss": loss, "weighted_metrics": []}

    def compile(self, model, config) -> str:
        note = (
            f"compiled by tpukit: {config.optimizer} at learning rate {config.learning_rate}, next-token loss "
            f"skipping padding and prompts (label {texts.NO_LABEL})"
        )
        return modeling.compile(model, config, self.user_compile(model), note=note)

    def writes_text(self) -> bool:
        return True

    def callbacks(self) -> list:
        """Perplexity, exp of the mean next-token loss (loss and val_loss), in each epoch's logs: the figure people
        compare language models by, at no cost to the step (a second crossentropy over the logits would cost about
        what the loss does)."""
        import keras

        return [keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: modeling.add_perplexity(logs))]

    def sample(self, model, prompt: str, sequence_length: int, chat: bool = False) -> str:
        """`generate` with room for `SAMPLE_TOKENS` after the prompt; with `chat` (the run trained on conversations),
        the prompt is a user's turn in the preset's chat template, and the sample the assistant's answer to it."""
        if chat:
            return self.answer(model, prompt, max_new_tokens=SAMPLE_TOKENS)
        length = len(self.encoder(sequence_length).encode([prompt])[0]) + 1 + SAMPLE_TOKENS
        return self.generate(model, prompt, max_length=length)

    def answer(self, model, message: str, max_new_tokens: int = 64) -> str:
        """The assistant's answer of `model` to a user's `message`, written in the preset's chat template as the
        fine-tune's conversations were (`chat`), greedily, until the template's end of turn (or the tokenizer's end
        token) or `max_new_tokens`.

        The template's special tokens go in as ids, as in training, so the prompt is the model's own format whatever
        the installed KerasHub does with special tokens inside text: the model is given token ids, its preprocessor
        set aside for the call.

        >>> Preset("./my_preset").answer(result.model, "What does the import statement do?")
        """
        import numpy as np

        encoder = self.encoder(max_new_tokens)
        (ids,), _ = encoder.conversation_ids([(("user", message), ("assistant", ""))], up_to_answer=True)
        template = encoder.template
        stops = [
            i for i in (encoder.special(template.end.token) if template.end else None, encoder.eos_id) if i is not None
        ]
        length = len(ids) + max_new_tokens
        # The places to write hold any id but a stop id: KerasHub's sampler stops once every row has a stop id
        # outside its prompt, and the padding id is the end id in some families (GPT-2, Qwen).
        unwritten = min(set(range(len(stops) + 1)) - set(stops))
        token_ids = np.full((1, length), unwritten, dtype="int32")
        token_ids[0, : len(ids)] = ids
        mask = np.zeros((1, length), dtype="int32")
        mask[0, : len(ids)] = 1
        preprocessor = getattr(model, "preprocessor", None)
        model.preprocessor = None
        try:
            with self._generating(model):
                out = model.generate(
                    {"token_ids": token_ids, "padding_mask": mask},
                    max_length=length,
                    stop_token_ids=tuple(stops) or None,
                )
        finally:
            model.preprocessor = preprocessor
        written = [int(i) for i, on in zip(out["token_ids"][0][len(ids) :], out["padding_mask"][0][len(ids) :]) if on]
        end = next((k for k, i in enumerate(written) if i in stops), len(written))  # the first stop, if any
        return encoder.decode(written[:end])

    @staticmethod
    @contextlib.contextmanager
    def _generating(model):
        """Greedy sampling on `model` (the same weights write the same text), with no `keras.distribution` set:
        under one, KerasHub's generate splits its batch, one prompt, over the devices' batch axis."""
        import keras

        keras_hub = _keras_hub()
        if not isinstance(getattr(model, "sampler", None), keras_hub.samplers.GreedySampler):
            model.sampler = keras_hub.samplers.get("greedy")  # what compile(sampler=) sets, without a new optimizer
            model.generate_function = None  # built again for this sampler (else kept: a second call compiles nothing)
        active = keras.distribution.distribution()
        keras.distribution.set_distribution(None)
        try:
            yield
        finally:
            keras.distribution.set_distribution(active)

    def rematerialize(self, model) -> Optional[str]:
        """Each transformer block of `model` recomputes its activations in the backward pass, keeping only its
        input: what building it inside `keras.RematScope(mode="list_of_layers")` does, set on the built blocks
        (a layer reads its remat mode when called), so the preset is not loaded a second time."""
        import keras

        blocks = getattr(model.backbone, "transformer_layers", None) or []
        if not blocks or not hasattr(keras, "RematScope"):
            return f"{type(model.backbone).__name__} has no transformer blocks Keras {keras.__version__} rematerializes"
        with keras.RematScope(mode="list_of_layers", layer_names=[block.name for block in blocks]) as scope:
            for block in blocks:
                block._remat_mode = scope  # what Layer.__init__ reads from the scope
        return None

    def trainer(self, model):
        """Keras' own fit and evaluate for `model`: KerasHub's (`PipelineModel`) turn every input into a tf.data
        or grain dataset, refusing the `keras.utils.PyDataset` tpukit feeds on JAX; with token ids to feed and
        nothing to preprocess, Keras' own are what KerasHub's end up calling."""
        return hub_fit.KerasFit(model)

    def rebuild(self, config, spec=None):
        model, _ = self.build(config)
        self.compile(model, config)
        return model

    def encoder(self, sequence_length: int) -> texts.Encoder:
        """How text becomes token ids for this model: the preset's own KerasHub tokenizer, whatever its kind
        (SentencePiece for Gemma, byte-pair for Llama 3, Qwen and GPT-2), with its padding, start and end ids.
        keras-hub 0.32 runs both kinds without TensorFlow (through `sentencepiece` and `tokenizers`), so a TPU
        runtime needs none; before 0.32 it runs them through tensorflow-text, which Colab's GPU runtime has."""
        tokenizer = self.tokenizer()

        def encode(documents):
            return [[int(i) for i in ids] for ids in tokenizer.tokenize(list(documents))]

        def decode(ids):
            if not ids:
                return ""
            text = tokenizer.detokenize([list(ids)])[0]
            return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)

        return texts.Encoder(
            encode,
            sequence_length,
            pad_id=int(tokenizer.pad_token_id),
            vocabulary_size=int(tokenizer.vocabulary_size()),
            bos_id=getattr(tokenizer, "start_token_id", None),
            eos_id=getattr(tokenizer, "end_token_id", None),
            decode=decode,
            special=self._special_ids.get,
        )

    @functools.cached_property
    def _special_ids(self) -> dict:
        """The ids of the chat templates' special tokens this preset's vocabulary has (`chat.TEMPLATES`): what picks
        the template its conversations are written in."""
        from tpukit.data import chat

        tokenizer = self.tokenizer()
        vocabulary = set(tokenizer.get_vocabulary())
        wanted = {token for template in chat.TEMPLATES for token in template.specials} & vocabulary
        return {token: int(tokenizer.token_to_id(token)) for token in wanted}

    def generate(self, model, prompt: str, max_length: int = 64) -> str:
        """The text `model` (this preset, as a run trained or `load()` rebuilt it) continues `prompt` with, greedily,
        up to `max_length` tokens in all, without the prompt: the same weights give the same text. Through the
        model's own `generate` and the preset's preprocessor, which the run attached, as a KerasHub user calls it.
        For a model fine-tuned on conversations, `answer` writes the prompt in its chat template.

        >>> Preset("./my_preset").generate(tpukit.load(run_dir).model, "The import statement")
        """
        encoder = self.encoder(max_length)
        length = len(encoder.encode([prompt])[0]) + (encoder.bos_id is not None)
        if length >= max_length:
            raise ModelError(
                f"the prompt is {length} tokens, and generate's max_length={max_length} leaves it no "
                f"room: give a max_length above {length}."
            )
        if getattr(model, "preprocessor", None) is None:
            raise ModelError(
                f"this {type(model).__name__} has no preprocessor to turn text into token ids; attach the preset's: "
                f"model.preprocessor = keras_hub.models.CausalLMPreprocessor.from_preset({self.source!r})."
            )
        with self._generating(model):
            text = model.generate(prompt, max_length=max_length, stop_token_ids=None, strip_prompt=True)
        return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)

    def prompt_from(self, token_ids, sequence_length: int) -> str:
        """The first words of a training row (`token_ids`), as text: the prompt a run's samples continue when the
        config names none."""
        encoder = self.encoder(sequence_length)
        skip = {encoder.pad_id, encoder.bos_id, encoder.eos_id}
        return encoder.decode([int(i) for i in token_ids if int(i) not in skip][:PROMPT_TOKENS]).strip()

    @functools.cached_property
    def _hub(self):
        """KerasHub, to load this preset. Offline with nothing cached: one line, before KerasHub's downloader retries
        for half a minute. Asked once a preset (the tokenizer and the model both load through it)."""
        handle = self.source if self.source.startswith("kaggle://") else _kaggle_handle(self.source)
        line = preset_access.refuse_offline(self.source, handle, preset_access.reachable)
        if line:
            raise ModelError(line)
        return _keras_hub()

    @functools.cached_property
    def _tokenizer(self):
        keras_hub = self._hub
        try:
            return keras_hub.tokenizers.Tokenizer.from_preset(self.source)
        except Exception as e:
            raise _not_loaded(self.source, ": its tokenizer did not load", e) from e

    def tokenizer(self):
        """The preset's tokenizer (loaded once)."""
        return self._tokenizer

    def _load(self, dtype: Optional[str]):
        keras_hub = self._hub
        try:
            # With the preset's preprocessor, so that `generate("text")` works on the trained model as on any
            # KerasHub task; training feeds token ids through Keras' own fit (`trainer`), which never calls it.
            return keras_hub.models.CausalLM.from_preset(self.source, **({"dtype": dtype} if dtype else {}))
        except Exception as e:
            raise _not_loaded(self.source, " did not load as a causal language model", e) from e


registry.add_name_provider("model", named, NAME_HINT, preset_access.listed_presets)
