"""Pretrained language models from KerasHub presets: a preset is a model like any other.

`RunConfig(model=...)` and the CLI's `--model` take a preset where they take a zoo name: a local preset directory
(what `save_to_preset` writes), `kaggle://owner/model/keras/variant`, `hf://owner/name`, or a KerasHub name such as
`gemma3_instruct_1b`. The registry asks `named` about a name it does not know, and gets a `Preset`: the run
builds it through `build_for` (the seam `modeling.build` calls), and text data is tokenized with its tokenizer
(`encoder`). Nothing is downloaded until a run builds the model.

With `RunConfig.lora_rank` set (the default, 4), the weights load in bfloat16 (not mixed: frozen weights need no
float32 copy) and only the LoRA adapters, which KerasHub keeps in float32, train. Importing this module loads no
KerasHub.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
from typing import TYPE_CHECKING, Optional, Tuple

from tpukit.data import text as texts
from tpukit.errors import one_line
from tpukit.models import preset_access
from tpukit.models.modeling import ModelError

if TYPE_CHECKING:
    import keras

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
    if name.startswith(SCHEMES) or is_preset_dir(name):
        return Preset(name)
    if os.sep in name or importlib.util.find_spec("keras_hub") is None:
        return None
    try:
        import keras_hub

        known = keras_hub.models.CausalLM.presets
    except Exception:  # a KerasHub that cannot load here (a Keras too old for it): the name stays unknown
        return None
    return Preset(name) if name in known else None


def _keras_hub():
    """KerasHub, or a one-line ModelError: not installed (it is an extra: tpukit[hub]), or installed beside a Keras
    older than it declares (its import would fail somewhere inside, or worse, half work)."""
    too_old = _keras_too_old()
    if too_old:
        raise ModelError(too_old)
    try:
        import keras_hub
    except ImportError as e:
        if importlib.util.find_spec("keras_hub") is not None:
            raise ModelError(f"KerasHub is installed but did not import ({one_line(e)}): reinstall it with "
                             f"pip install 'tpukit[hub]' (on Colab's TPU runtime: {preset_access.SETUP_HUB}).") from e
        raise ModelError(f"pretrained models need KerasHub, which is not installed ({one_line(e)}): "
                         "pip install 'tpukit[hub]' (on Colab's TPU runtime: tpukit.colab.setup(hub=True), first in "
                         "a fresh runtime).") from None
    return keras_hub


def _installed_version(distribution: str) -> Optional[str]:
    """The installed version of `distribution` (None: not installed)."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _keras_too_old() -> Optional[str]:
    """The line for a Keras older than the installed keras-hub declares, or None (read from the packages' metadata)."""
    from importlib import metadata

    hub, keras = _installed_version("keras-hub"), _installed_version("keras")
    if hub is None or keras is None:
        return None
    return preset_access.keras_too_old(metadata.requires("keras-hub"), keras, hub)


def _kaggle_handle(name: str) -> Optional[str]:
    """A KerasHub preset name's Kaggle handle (`kaggle://keras/gemma3/keras/gemma3_instruct_1b/3`), or None."""
    try:
        return _keras_hub().models.CausalLM.presets.get(name, {}).get("kaggle_handle")
    except Exception:
        return None


def _not_loaded(source: str, what: str, error: BaseException) -> ModelError:
    """The one-line ModelError for a preset (or its tokenizer) that did not load: why the download failed where it
    did (`preset_access`), else KerasHub's own words."""
    problem = preset_access.download_problem(source, error, reach=preset_access.reachable,
                                             kaggle_handle=_kaggle_handle)
    return ModelError(problem or f"preset {source!r}{what}: {one_line(error)}")


@dataclasses.dataclass(frozen=True)
class Preset:
    """A KerasHub causal language model preset, named by `source` (a directory, a URL or a KerasHub name)."""

    source: str

    @property
    def description(self) -> str:
        return f"KerasHub preset {self.source}"

    def settings_note(self, config) -> Tuple[str, str]:
        """What `config` makes of this preset, before anything loads: (its LoRA, its text), a line each."""
        if config.lora_rank:
            alpha = "alpha = rank" if config.lora_alpha is None else f"alpha {config.lora_alpha:g}"
            where = ", ".join(config.lora_targets) if config.lora_targets else "the attention's query and value"
            lora = f"LoRA adapters of rank {config.lora_rank} ({alpha}) on {where}; the other weights frozen, in bfloat16"
        else:
            lora = "every weight trains, in the run's precision"
        return lora, f"text packed end to end into rows of {config.sequence_length:,} tokens"

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
                backbone = json.load(f)["config"]
            with open(os.path.join(self.source, "metadata.json")) as f:
                parameters = int(json.load(f)["parameter_count"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""
        found = memory.estimate_unbuilt(
            backbone, parameters, lora_rank=config.lora_rank, batch_size=config.batch_size,
            sequence_length=config.sequence_length, optimizer=config.optimizer, remat=config.remat is True,
            accumulation=config.accumulation_steps, device=runtime.device_memory if runtime else None,
            upcast=bool(runtime and runtime.upcasts))
        if found is None:
            return ""
        if runtime is None:
            return f"{found.note()}; Connect compares it with the device's"
        return memory.verdict(found, None, None)

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
        return (make(mesh, model_parallel_dim_name="model", data_parallel_dim_name="batch") if make else None,
                f"{named}.get_layout_map" if make else named)

    def __call__(self):
        """Build it as a plain factory would (no LoRA, the run's dtype policy), for callers that know no config."""
        return self._load(None)

    # ---- the run's seam (modeling.build) ----------------------------------------------------------------------
    def build_for(self, config) -> Tuple["keras.Model", str]:
        """The model for a run of `config`, compiled for it, and a sentence on what was built.

        LoRA adapters of rank `config.lora_rank` (scaled by `lora_alpha` / rank) on `config.lora_targets` (None:
        KerasHub's default, the attention's query and value projections), the frozen weights in bfloat16;
        `config.lora_rank=None` trains every weight, in the run's dtype policy. Compiled with the config's optimizer and learning rate, and a next-token loss that ignores
        the tokenizer's padding id.
        """
        import keras

        from tpukit import precision as precisions

        rank = config.lora_rank
        model = self._load("bfloat16" if rank else None)
        longest = getattr(model.backbone, "max_sequence_length", None)  # learned positions end there (GPT-2, OPT)
        if longest and config.sequence_length > longest:
            raise ModelError(f"RunConfig.sequence_length={config.sequence_length} is longer than preset "
                             f"{self.source!r} takes: its backbone's max_sequence_length is {longest}; use "
                             f"sequence_length={longest} or less.")
        tokenizer = self.tokenizer()
        vocabulary = int(tokenizer.vocabulary_size())
        if vocabulary > model.backbone.vocabulary_size:
            raise ModelError(f"preset {self.source!r}: its tokenizer has {vocabulary} tokens, and the backbone's "
                             f"embedding only {model.backbone.vocabulary_size}: ids past it cannot be embedded; use "
                             f"a tokenizer of at most {model.backbone.vocabulary_size} tokens.")
        if rank:
            _enable_lora(model.backbone, rank, config.lora_alpha, config.lora_targets, self.source)
        _feed_as_keras(model)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=tokenizer.pad_token_id)
        # Unwrapped: `modeling.compile` wraps it for the precision the run resolves (loss scaling), as for any model.
        optimizer = precisions.make_optimizer(config.optimizer, config.learning_rate, precisions.FLOAT32.name,
                                              config.accumulation_steps)
        model.compile(optimizer=optimizer, loss=loss, weighted_metrics=[])
        model._tpukit_compiled_by = (f"compiled by tpukit: {config.optimizer} at learning rate "
                                     f"{config.learning_rate}, next-token loss ignoring padding (id "
                                     f"{tokenizer.pad_token_id})")
        return model, f"{self.description} ({type(model).__name__}), {trainable_note(model, rank, config.lora_alpha)}"

    def encoder(self, sequence_length: int) -> texts.Encoder:
        """How text becomes token ids for this model: its tokenizer's SentencePiece model, run by sentencepiece
        (no TensorFlow), with its padding, start and end ids."""
        tokenizer = self.tokenizer()
        proto = getattr(tokenizer, "proto", None)
        if not isinstance(proto, (bytes, bytearray)):
            raise ModelError(f"preset {self.source!r}: its tokenizer ({type(tokenizer).__name__}) is not a "
                             "SentencePiece model, which is what tpukit tokenizes text with; pass token ids as "
                             "arrays ({'token_ids', 'padding_mask'}, next-token labels) instead.")
        return texts.sentencepiece_encoder(bytes(proto), sequence_length, pad_id=tokenizer.pad_token_id,
                                           bos_id=getattr(tokenizer, "start_token_id", None),
                                           eos_id=getattr(tokenizer, "end_token_id", None))

    def generate(self, model, prompt: str, max_length: int = 64) -> str:
        """The text `model` (this preset, as a run trained or `load()` rebuilt it) continues `prompt` with, greedily,
        up to `max_length` tokens in all: the same weights give the same text. Tokenized with sentencepiece, so no
        preprocessor (and no TensorFlow) is needed.

        >>> Preset("./my_preset").generate(tpukit.load(run_dir).model, "The import statement")
        """
        import numpy as np

        keras_hub = _keras_hub()
        encoder = self.encoder(max_length)
        ids = ([encoder.bos_id] if encoder.bos_id is not None else []) + list(encoder.encode([prompt])[0])
        if len(ids) >= max_length:
            raise ModelError(f"the prompt is {len(ids)} tokens, and generate's max_length={max_length} leaves it no "
                             f"room: give a max_length above {len(ids)}.")
        token_ids = np.full((1, max_length), encoder.pad_id, dtype="int32")
        token_ids[0, :len(ids)] = ids
        mask = (np.arange(max_length) < len(ids)).astype("int32")[None, :]
        if not isinstance(getattr(model, "sampler", None), keras_hub.samplers.GreedySampler):
            model.sampler = keras_hub.samplers.get("greedy")  # what compile(sampler=) sets, without a new optimizer
            model.generate_function = None  # built again for this sampler (else kept: a second call compiles nothing)
        out = model.generate({"token_ids": token_ids, "padding_mask": mask}, stop_token_ids=None)
        generated = np.asarray(out["token_ids"][0])[np.asarray(out["padding_mask"][0]).astype(bool)][len(ids):]
        return encoder.decode([int(i) for i in generated])

    def prompt_from(self, token_ids, sequence_length: int) -> str:
        """The first words of a training row (`token_ids`), as text: the prompt a run's samples continue when the
        config names none."""
        encoder = self.encoder(sequence_length)
        skip = {encoder.pad_id, encoder.bos_id, encoder.eos_id}
        return encoder.decode([int(i) for i in token_ids if int(i) not in skip][:PROMPT_TOKENS]).strip()

    @functools.cached_property
    def _tokenizer(self):
        keras_hub = _keras_hub()
        try:
            return keras_hub.tokenizers.Tokenizer.from_preset(self.source)
        except Exception as e:
            raise _not_loaded(self.source, ": its tokenizer did not load", e) from e

    def tokenizer(self):
        """The preset's tokenizer (loaded once)."""
        return self._tokenizer

    def _load(self, dtype: Optional[str]):
        keras_hub = _keras_hub()
        try:
            return keras_hub.models.CausalLM.from_preset(self.source, preprocessor=None,
                                                         **({"dtype": dtype} if dtype else {}))
        except Exception as e:
            raise _not_loaded(self.source, " did not load as a causal language model", e) from e


def _enable_lora(backbone, rank: int, alpha: Optional[float], targets, source: str) -> None:
    """KerasHub's `enable_lora` on `targets`, then alpha on each adapted layer (KerasHub's call takes no alpha; Keras'
    layers read theirs at every call). Targets that match no layer are a one-line ModelError naming the layers that
    would take adapters."""
    backbone.enable_lora(rank, target_layer_names=list(targets) if targets else None)
    adapted = [layer for layer in backbone._flatten_layers(include_self=False) if getattr(layer, "lora_enabled", False)]
    if not adapted:
        names = sorted({layer.name for layer in backbone._flatten_layers(include_self=False)
                        if hasattr(layer, "enable_lora") and layer.weights})
        raise ModelError(f"preset {source!r}: no layer is named {', '.join(targets or ())}, so LoRA adapted none; "
                         f"layers that take adapters: {', '.join(names)}.")
    if alpha is not None:
        missing = [layer.name for layer in adapted if not hasattr(layer, "lora_alpha")]
        if missing:
            import keras

            raise ModelError(f"lora_alpha={alpha}: Keras {keras.__version__}'s layers have no LoRA alpha; leave "
                             "lora_alpha=None (alpha = rank) or install a newer Keras.")
        for layer in adapted:
            layer.lora_alpha = alpha


def _feed_as_keras(model) -> None:
    """Give `model` Keras' own fit, evaluate and predict: it takes token ids (no preprocessor), and KerasHub's
    (`PipelineModel`) turn every input into a tf.data or grain dataset, refusing the `keras.utils.PyDataset` that
    tpukit feeds on JAX. With nothing to preprocess, Keras' own are what KerasHub's end up calling."""
    import types

    import keras

    for name in ("fit", "evaluate", "predict"):
        setattr(model, name, types.MethodType(getattr(keras.Model, name), model))


def trainable_note(model, rank: Optional[int], alpha: Optional[float] = None) -> str:
    """`LoRA rank 4: 704 of 7,696 parameters train (9.1%), frozen weights in bfloat16`: what trains, in one line
    (`LoRA rank 4, alpha 8` where alpha is set)."""
    import math

    trainable = sum(math.prod(w.shape) for w in model.trainable_weights)
    total = sum(math.prod(w.shape) for w in model.weights)
    frozen = {w.dtype for w in model.weights if not w.trainable}
    what = (f"LoRA rank {rank}" + (f", alpha {alpha:g}" if alpha is not None else "")) if rank else "full fine-tuning"
    where = f", frozen weights in {', '.join(sorted(frozen))}" if frozen else ""
    return f"{what}: {trainable:,} of {total:,} parameters train ({trainable / max(1, total):.1%}){where}"


def sampler_for(model_source) -> Optional[Preset]:
    """What generates a run's samples (a `Preset`), or None for a model that writes no text."""
    return model_source if isinstance(model_source, Preset) else None


def encoder_for(model_source, sequence_length: int) -> Optional[texts.Encoder]:
    """The text encoder of what a run trains (a `Preset`), or None for a model without a tokenizer."""
    make = getattr(model_source, "encoder", None)
    return make(sequence_length) if callable(make) else None
