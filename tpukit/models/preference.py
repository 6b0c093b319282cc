"""Preference tuning of a KerasHub causal language model (DPO, SimPO): a kind of model source, chosen once.

`RunConfig(method="dpo")` on a preset makes its run's source a `PreferencePreset`: the same preset (built, LoRA,
QLoRA, samples, export, `load` and `generate` as a supervised run has them) trained on preference pairs
(`data.pairs`) through `PairScores`, a Keras model around it that scores each answer by its log-probability
(summed over the answer's tokens for DPO, their mean for SimPO), chosen and rejected in one batch of 2 x pairs rows.
The loss and the metrics are Keras functions of (the reference's scores, the model's scores), so Keras' own `fit`
trains it, with every callback, on both backends:

- DPO (Rafailov et al., 2023): loss = -log sigmoid(beta ((c - c_ref) - (r - r_ref))), where c and r are the chosen
  and the rejected answer's summed log-probabilities.
- SimPO (Meng et al., 2024): loss = -log sigmoid(beta (c - r) - gamma), c and r the mean per answer token.

DPO's reference costs no second copy of the model: before training, the model as the run starts (the preset, or
`init_from`'s fine-tune; with `reference="base"` the preset with its LoRA adapters off) scores every pair once, and
the scores go with the data (y) and into the run's directory, so a resume or an extension compares with the same
reference. Where LoRA adapters train, the start is the base with zero updates, since KerasHub's adapters start at 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional, Tuple

from tpukit.data import text as texts
from tpukit.data.types import Arrays, DataError
from tpukit.models import lora
from tpukit.models.modeling import ModelError
from tpukit.models.pretrained import Preset
from tpukit.models.source import TUNED
from tpukit.validation import PREFERENCE_DEFAULTS, preference_option

REFERENCE_ARRAYS = ("train", "validation", "test")  # the parts of the data a reference scores, as kept


@dataclasses.dataclass(frozen=True)
class Method:
    """A preference objective: how a pair's scores become its loss and its reward margin (Keras ops).

    `y_pred` is the model's (chosen, rejected) score per pair, and `y_true` the reference's (zeros for a
    reference-free method)."""

    name: str
    beta: float
    gamma: float = 0.0
    reference: Optional[str] = None  # None: reference-free

    @property
    def mean(self) -> bool:
        """Whether an answer's score is the mean log-probability of its tokens (else their sum)."""
        return self.reference is None

    def margin(self, y_true, y_pred):
        """The chosen answer's reward minus the rejected one's, per pair."""
        import keras

        ops = keras.ops
        y_pred = ops.cast(y_pred, "float32")
        y_true = ops.cast(y_true, "float32")
        gained = y_pred - y_true if self.reference is not None else y_pred
        return self.beta * (gained[:, 0] - gained[:, 1])

    def loss(self, y_true, y_pred):
        """-log sigmoid(margin - gamma), per pair: softplus, which is exact where the sigmoid underflows."""
        import keras

        return keras.ops.softplus(self.gamma - self.margin(y_true, y_pred))

    def metrics(self) -> list:
        """Keras metrics of (reference, model) scores: reward accuracy (the chosen answer's reward above the
        rejected one's), reward margin, and the two answers' log-probabilities."""
        import keras

        def reward_accuracy(y_true, y_pred):
            return keras.ops.cast(self.margin(y_true, y_pred) > 0, "float32")

        def reward_margin(y_true, y_pred):
            return self.margin(y_true, y_pred)

        def logp_chosen(y_true, y_pred):
            return keras.ops.cast(y_pred[:, 0], "float32")

        def logp_rejected(y_true, y_pred):
            return keras.ops.cast(y_pred[:, 1], "float32")

        return [reward_accuracy, reward_margin, logp_chosen, logp_rejected]

    def describe(self) -> str:
        if self.reference is None:
            return f"SimPO (beta {self.beta:g}, gamma {self.gamma:g}; reference-free, mean log-probability per token)"
        against = "the preset with its LoRA adapters off" if self.reference == "base" else "the model as the run starts"
        return f"DPO (beta {self.beta:g}) against {against}"


def method_of(config) -> Method:
    """The preference objective `config` asks for (`RunConfig.method`, its options or their defaults)."""
    reference = preference_option(config, "reference") if config.method == "dpo" else None
    return Method(
        config.method,
        float(preference_option(config, "beta")),
        float(preference_option(config, "gamma") or 0.0),
        reference,
    )


def pair_scores(model, mean: bool):
    """A Keras model around the causal LM `model` that scores preference pairs (`PairScores`)."""
    import keras

    class PairScores(keras.Model):
        """Each answer's log-probability under the causal LM `language_model`: inputs of shape (pairs, 2, length)
        (`data.pairs`), output (pairs, 2); chosen and rejected run as one batch of 2 x pairs rows."""

        def __init__(self, language_model, mean: bool):
            super().__init__(name="pair_scores")
            self.language_model, self.mean = language_model, mean
            # Nothing of its own to build (the language model is built): unbuilt, Keras' predict would build it by
            # running the whole model eagerly on the first batch.
            self.built = True

        def call(self, inputs, training=False):
            ops = keras.ops
            length = ops.shape(inputs["token_ids"])[-1]

            def rows(a):
                return ops.reshape(a, (-1, length))

            logits = self.language_model(
                {"token_ids": rows(inputs["token_ids"]), "padding_mask": rows(inputs["padding_mask"])},
                training=training,
            )
            logits = ops.cast(logits, "float32")
            labels = rows(inputs["labels"])
            counted = ops.not_equal(labels, texts.NO_LABEL)
            picked = ops.take_along_axis(logits, ops.expand_dims(ops.where(counted, labels, 0), -1), axis=-1)
            token_logp = picked[..., 0] - ops.logsumexp(logits, axis=-1)
            weights = ops.cast(counted, "float32")
            score = ops.sum(token_logp * weights, axis=-1)
            if self.mean:
                score = score / ops.maximum(ops.sum(weights, axis=-1), 1.0)
            return ops.reshape(score, (-1, 2))

    return PairScores(model, mean)


@dataclasses.dataclass(frozen=True)
class PreferencePreset(Preset):
    """A KerasHub preset tuned on preference pairs by `method` (`Method`): what `Preset.for_method` returns."""

    method: Method = None
    _scorers: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    rows_per_example = 2  # a pair: the chosen and the rejected answer, each a row of tokens
    chart = "reward_accuracy"

    @property
    def description(self) -> str:
        return f"KerasHub preset {self.source}"

    def settings_note(self, config) -> Tuple[str, str]:
        lora_line, _ = super().settings_note(config)
        return lora_line, (
            f"preference pairs, each answer after its prompt in a row of {config.sequence_length:,} tokens; "
            f"{self.method.describe()}"
        )

    def check_data(self, data) -> None:
        if self.method.reference is not None and _processes() > 1:
            raise ModelError(
                f"method={self.method.name!r} scores its reference in one process, and this run spans several: "
                "train it in one process on all of its devices (train --replicas N, without launch), or use "
                "method='simpo', which needs no reference."
            )
        if not _pairs(data.train):
            raise DataError(
                f"method={self.method.name!r} learns which of two answers is preferred, and dataset "
                f"{data.name!r} holds no preference pairs: give rows with 'prompt', 'chosen' and 'rejected' (or set "
                "method='sft' to learn the text itself)."
            )

    def check_fits(self, model, data, loss_name: str, user) -> None:
        """The pairs were tokenized by this preset's own tokenizer into its rows: nothing else to check."""

    def compile(self, model, config) -> str:
        """The causal LM compiled as a supervised run's (its optimizer is the run's), then `PairScores` around it
        compiled with that same optimizer, the method's loss and metrics, and the run's steps per execution and
        XLA: what `trainer` fits."""
        super().compile(model, config)
        scorer = pair_scores(model, self.method.mean)
        scorer.compile(
            optimizer=model.optimizer,
            loss=self.method.loss,
            metrics=self.method.metrics(),
            steps_per_execution=config.steps_per_execution,
            jit_compile=config.jit_compile,
        )
        self._scorers[id(model)] = scorer
        return (
            f"compiled by tpukit: {config.optimizer} at learning rate {config.learning_rate}, "
            f"{self.method.describe()}: each answer's log-probability over its own tokens, chosen and rejected in "
            "one batch"
        )

    def trainer(self, model):
        return self._scorers[id(model)]

    def callbacks(self) -> list:
        return []  # perplexity is a next-token loss's figure

    def training_flops(self, model, sample):
        """A pair's training FLOPs: its two rows', the forward and backward passes of each."""
        count, how = super().training_flops(model, _rows(sample))
        return (count * 2 if count else count), (
            how + "; per pair: two sequences, chosen and rejected" if count else how
        )

    def ready_data(self, model, data, kept: Optional[dict], batch: int):
        """(the data with each pair's reference scores as y, the scores to keep, a note): those `kept` by the run
        (a resume, an extension), else scored now by `model` as it starts. A reference-free method needs none."""
        if self.method.reference is None:
            return data, None, "reference: none (SimPO is reference-free)"
        parts = {name: getattr(data, name) for name in REFERENCE_ARRAYS if isinstance(getattr(data, name), Arrays)}
        if kept is not None:
            for name, part in parts.items():
                if name not in kept or kept[name].shape != (len(part), 2):
                    raise DataError(
                        f"the run's kept reference scores do not fit its {name} data ({len(part)} pairs); resume "
                        "needs the data it trained on."
                    )
            scores, how = {name: kept[name] for name in parts}, "kept by the run, scored when it started"
        else:
            with lora.adapters_off(model) if self.method.reference == "base" else contextlib.nullcontext():
                scores = {name: self._score(model, part, batch) for name, part in parts.items()}
            how = "scored once before training by the same model, no second copy"
        data = dataclasses.replace(data, **{n: Arrays(p.x, scores[n]) for n, p in parts.items()})
        return data, scores, f"reference: {self.method.describe()}; its log-probabilities {how}"

    def _score(self, model, part: Arrays, batch: int):
        """Each pair's (chosen, rejected) score by `model`, in batches of the run's global batch (the last one
        filled with the final pair again, so every call has one shape)."""
        import numpy as np

        scorer = self._scorers[id(model)]
        _build_preprocessor(model)
        count = len(part)
        out = np.empty((count, 2), dtype=np.float32)
        for start in range(0, count, batch):
            index = np.minimum(np.arange(start, start + batch), count - 1)
            chunk = {k: v[index] for k, v in part.x.items()}
            out[start : start + batch] = np.asarray(scorer.predict_on_batch(chunk), dtype=np.float32)[: count - start]
        return out


def _build_preprocessor(model) -> None:
    """Keras' `predict_on_batch` runs the whole model eagerly on its batch, at every call, while a layer it holds is
    unbuilt, and a preset's preprocessor (kept for `generate("text")`) is built by its first text: built here the
    same way, on one string, so that scoring the reference runs the compiled step alone."""
    preprocessor = getattr(model, "preprocessor", None)
    if preprocessor is None or preprocessor.built:
        return
    try:
        preprocessor(["a"])
    except Exception:  # noqa: BLE001 - one that takes no plain text: Keras runs the eager pass instead, slower
        pass


def _processes() -> int:
    """The processes a JAX run spans (1 on TensorFlow, whose workers each feed a whole batch)."""
    import keras

    if keras.backend.backend() != "jax":
        return 1
    import jax

    return jax.process_count()


def _pairs(part) -> bool:
    x = getattr(part, "x", None)
    return isinstance(x, dict) and "labels" in x and getattr(x["token_ids"], "ndim", 0) == 3


def _rows(sample):
    """A few pairs' inputs as the causal LM's rows: (2 x pairs, length)."""
    length = sample["token_ids"].shape[-1]
    return {k: sample[k].reshape(-1, length) for k in ("token_ids", "padding_mask")}


def _tuned(preset: Preset, config) -> PreferencePreset:
    return PreferencePreset(preset.source, method_of(config))


TUNED.update({method: _tuned for method in PREFERENCE_DEFAULTS})
