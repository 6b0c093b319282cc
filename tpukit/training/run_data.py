"""A run's data: loaded and checked against the run it continues, then made ready for the built model's loss.

`Run` (`training.run`) takes these steps from `RunData`, as it takes the ways it ends from `RunEnding`.
"""

from __future__ import annotations

from typing import Optional

from tpukit.data import pipeline, sources
from tpukit.runs import directory
from tpukit.training.plan import steps_per_epoch


class RunData:
    """The data steps of a `Run`: `_load_data` before the model exists, `_ready_data` once it is built."""

    def _load_data(self):
        """The prepared data (`sources.Source`), checked against the run it continues."""
        config = self.config
        source = sources.prepare(
            self.data_arg if self.data_arg is not None else config.dataset,
            name=config.dataset,
            seed=config.seed,
            size=config.dataset_size,
            validation_split=config.validation_split,
            validation_data=self.validation_data,
            test_data=self.test_data,
            encoder=self._text_encoder,
            writes_text=self.model_source.writes_text(),
        )
        self.notes.extend(source.notes)
        for note in source.notes:
            if note.startswith("data: "):  # what a dataset file held and how it was read: said before training
                self.announce(note)
        self.model_source.check_data(source)
        if self.previous is not None:
            recorded = self.previous.data.get("fingerprint")
            if recorded and source.fingerprint and recorded != source.fingerprint:
                raise sources.DataError(
                    f"the data differs from the data this run trained on (fingerprint {source.fingerprint}, "
                    f"recorded {recorded}); resume needs the same data. Received: dataset={config.dataset!r}."
                )
        self.feeder = pipeline.choose(self.runtime.feeder, fixed=self.runtime.feeder_fixed)
        if source.validation_from == "split":
            self.notes.append(
                f"validation: {config.validation_split:.0%} of the training data "
                f"({source.spec.num_validation} examples, split with seed {config.seed})"
            )
        return source

    def _text_encoder(self):
        """How the model turns text into token ids (a pretrained preset's tokenizer), or None; asked only for text."""
        return self.model_source.encoder(self.config.sequence_length)

    def _steps_per_epoch(self, config) -> Optional[int]:
        """The steps in an epoch of `config`'s batch on the loaded data (None where only the run can count them);
        at least one global batch must fit."""
        source, replicas = self.source, self.runtime.replicas
        if not source.ordered:
            return config.steps_per_epoch or source.train.steps
        config.check_examples(len(source.train), replicas, source.validation_from == "split")
        return steps_per_epoch(config, len(source.train), replicas)

    def _ready_data(self):
        """The data as the model's loss needs it (a preference run's reference scores), and what the run keeps of
        it written once into its directory, where a resume or an extension reads it back."""
        kept = directory.kept_arrays(self.run_dir, self.parent)
        data, scores, note = self.model_source.ready_data(
            self.model, self.source, kept, self.plan.config.global_batch_size
        )
        if note:
            self.notes.append(note)
        if scores is not None:
            directory.keep_arrays(self.run_dir, scores)
        return data
