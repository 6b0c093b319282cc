"""A trained model in the formats people share: Keras' `.keras` file (`saving.export`), and for a fine-tuned KerasHub
model a KerasHub preset or a Hugging Face Transformers folder.

Each writes a float32 copy with the LoRA adapters merged into the kernels (`saving.float32_copy(merge=True)`):
KerasHub's own `export_to_transformers` writes a LoRA model's frozen kernels and drops the adapters. A preset or
Hugging Face folder is written under a temporary name and renamed. A preset exported to `kaggle://...` or `hf://...`
is uploaded (`upload`), with the credentials the download libraries read (`models.credentials`).
"""

from __future__ import annotations

import os
from pathlib import Path

from tpukit.errors import one_line
from tpukit.models import credentials, lora
from tpukit.runs import saving
from tpukit.runs.saving import Exported, ExportError, check_writable, float32_copy

FORMATS = ("keras", "preset", "hf")  # what `export` writes: Keras' file, a KerasHub preset, Hugging Face's safetensors
UPLOADS = {"kaggle://": "kaggle", "hf://": "hf"}  # where `export` uploads a preset, and whose credentials it needs


def export(model, path, format: str = "keras") -> Exported:
    """Write `model` to `path` in `format`, its LoRA adapters merged into the kernels in float32.

    - "keras": a float32 `.keras` file, and a SavedModel beside it on TensorFlow (`saving.export`).
    - "preset": a KerasHub preset folder (`save_to_preset`: config, weights, tokenizer), which
      `keras_hub.models.CausalLM.from_preset(path)` loads, and `keras_hub.upload_preset` shares.
    - "hf": a Hugging Face Transformers folder (`export_to_transformers`: config.json, model.safetensors, the
      tokenizer's files), for the families KerasHub exports.

    A `path` of `kaggle://OWNER/MODEL/keras/VARIANT` or `hf://OWNER/NAME` uploads the preset there (`upload`).

    Raises:
        ExportError: an unknown format, a path that cannot be written, a model that is not a KerasHub one for
            "preset" and "hf", or one that cannot be copied into float32 layers.
    """
    if format not in FORMATS:
        raise ExportError(f"format: expected one of {', '.join(FORMATS)}. Received: format={format!r}.")
    if str(path).startswith(tuple(UPLOADS)):
        if format != "preset":
            raise ExportError(
                f"{path} is a hub to upload to, and what KerasHub uploads is a preset: export(..., format='preset'), "
                f"or a local path for format={format!r}."
            )
        return upload(model, str(path))
    if format == "keras":
        return saving.export(model, path)
    return write(model, Path(path), format)


def write(model, path: Path, format: str) -> Exported:
    """`model` as a KerasHub preset ("preset") or a Hugging Face folder ("hf"), written to a temporary folder beside
    `path` and renamed: a failure halfway leaves no half-written model where one is expected."""
    import shutil

    if not (hasattr(model, "backbone") and hasattr(model, "save_to_preset")):
        raise ExportError(
            f"format={format!r} writes a KerasHub model, and this is a {type(model).__name__}: use format='keras'."
        )
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ExportError(f"cannot export to {path}: it exists and is not an empty folder; choose a new folder.")
    check_writable(path.parent, path)
    merged = float32_copy(model, merge=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if format == "preset":
            merged.save_to_preset(str(tmp))
        else:
            _to_transformers(merged, tmp)
        if path.exists():
            path.rmdir()
        os.replace(tmp, path)
    except OSError as e:
        raise ExportError(
            f"could not write {path} ({e.strerror or type(e).__name__}); choose a writable path."
        ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    merged_note = "the LoRA adapters merged into the kernels, " if lora.adapted_layers(model) else ""
    if format == "preset":
        return Exported(
            str(path),
            None,
            f"wrote the KerasHub preset {path} ({merged_note}float32; "
            f"keras_hub.models.CausalLM.from_preset({str(path)!r}) loads it)",
        )
    return Exported(
        str(path),
        None,
        f"wrote the Hugging Face model {path} ({merged_note}float32 safetensors, config.json and "
        f"the tokenizer; transformers' AutoModelForCausalLM.from_pretrained({str(path)!r}) loads it)",
    )


def _to_transformers(model, folder: Path) -> None:
    """KerasHub's `export_to_transformers`, its refusals as one ExportError line: a family it has no exporter for
    (naming those it has), or no `safetensors` package."""
    import keras_hub

    backbone = type(model.backbone).__name__
    try:
        from keras_hub.src.utils.transformers.export import hf_exporter  # where KerasHub (0.26-0.32) lists them

        families = sorted(hf_exporter.MODEL_CONFIGS)
    except ImportError:
        families = []
    if not hasattr(model, "export_to_transformers") or (families and backbone not in families):
        raise ExportError(
            f"format='hf': KerasHub {keras_hub.__version__} exports {', '.join(families) or 'no model'} to Hugging "
            f"Face, and this model's backbone is {backbone}: use format='preset' (or 'keras')."
        )
    try:
        model.export_to_transformers(str(folder))
    except ImportError as e:
        raise ExportError(
            f"format='hf' writes safetensors, and {one_line(e)}: pip install safetensors (Colab has it)."
        ) from None
    except ValueError as e:
        raise ExportError(f"format='hf': KerasHub did not export {backbone}: {one_line(e)}") from None
    _complete_config(folder / "config.json", model.backbone)


# The class Transformers builds for each `model_type`, as its own `save_pretrained` writes it in `architectures`.
# KerasHub 0.32 leaves it out for Gemma, GPT-2, Llama 3 and Qwen; the Hub's tools and KerasHub's own loader read it.
_ARCHITECTURES = {
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
}


def _complete_config(config_path: Path, backbone) -> None:
    """What KerasHub 0.32's exported config.json leaves out: `architectures` (from its `model_type`), a GPT-2's
    `n_inner` where its feed-forward is not 4 x hidden (Transformers reads it; without it, it builds 4 x hidden), and
    a Qwen 2's sliding window (`use_sliding_window`, `sliding_window`: KerasHub's own loader requires them)."""
    import json

    config = json.loads(config_path.read_text())
    architecture = _ARCHITECTURES.get(config.get("model_type"))
    if architecture and not config.get("architectures"):
        config["architectures"] = [architecture]
    inner = getattr(backbone, "intermediate_dim", None)
    if config.get("model_type") == "gpt2" and inner and inner != 4 * config.get("n_embd", 0):
        config["n_inner"] = int(inner)
    if config.get("model_type") == "qwen2" and hasattr(backbone, "use_sliding_window_attention"):
        config.setdefault("use_sliding_window", bool(backbone.use_sliding_window_attention))
        config.setdefault("sliding_window", backbone.sliding_window_size)
    config_path.write_text(json.dumps(config, indent=2))


def upload(model, uri: str) -> Exported:
    """Upload `model` to `uri` as a KerasHub preset (merged, float32): written to a temporary folder, then
    `keras_hub.upload_preset` sends it. The credentials are looked for where the hub's library reads them
    (`credentials.find`: the environment, its token files, Colab's Secrets, which `use` puts into the environment)
    and named, never read into a message or written to a file.

    Raises:
        ExportError: no credentials for the hub (which variables to set), its library not installed, or the upload
            refused (the hub's words, in one line).
    """
    import tempfile

    import keras_hub

    hub = next(h for prefix, h in UPLOADS.items() if uri.startswith(prefix))
    found = credentials.find(hub)
    if not found:
        raise ExportError(f"cannot upload to {uri}: {found.describe()}")
    credentials.use(found)
    with tempfile.TemporaryDirectory() as folder:
        written = write(model, Path(folder) / "preset", "preset")
        try:
            keras_hub.upload_preset(uri, written.keras_path)
        except ImportError as e:
            raise ExportError(f"cannot upload to {uri}: {one_line(e)}") from None
        except Exception as e:  # noqa: BLE001 - the hub's refusal (a bad handle, no permission), said in one line
            raise ExportError(f"{uri} refused the upload: {one_line(e)} ({found.describe()})") from None
    merged = "its LoRA adapters merged, " if lora.adapted_layers(model) else ""
    return Exported(
        uri,
        None,
        f"uploaded the KerasHub preset to {uri} ({merged}float32; keras_hub.models.CausalLM.from_preset({uri!r}) "
        f"loads it); {found.describe()}",
    )
