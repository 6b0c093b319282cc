"""A kind of model is an object (`models.source`): chosen once from what the user gave, it answers everything that
differs by kind; a new kind is one class, and a setting no kind of the run reads is one line, never ignored."""

import keras
import pytest

from tpukit import registry
from tpukit.config import ConfigError, RunConfig
from tpukit.models import pretrained, source
from tpukit.training.api import train


# ---- a kind tpukit has never seen, written here: one class, nothing changed outside models/ -----------------------
class LinearProbe(source.ModelSource):
    """A linear classifier over the flattened inputs, compiled with its own loss, that reads `sample_prompt` as the
    name of its output layer (a setting only some kinds read)."""

    description = "a linear probe"
    reads = ("sample_prompt",)

    def build(self, config, spec, *, in_place, policy):
        name = config.sample_prompt or "probe"
        model = keras.Sequential(
            [keras.Input(spec.input_shape), keras.layers.Flatten(), keras.layers.Dense(spec.num_classes, name=name)]
        )
        return model, f"a linear probe named {name}"

    def user_compile(self, model):
        return {"loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True), "metrics": ["accuracy"]}

    def compile(self, model, config):
        from tpukit.models import modeling

        return modeling.compile(model, config, self.user_compile(model), note="compiled by the probe")


def _digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return x.astype("float32") / 16.0, y.astype("int32")


def test_a_new_kind_of_model_is_one_class_and_trains_through_train(tmp_path):
    config = RunConfig(
        epochs=3, batch_size=32, learning_rate=1e-2, sample_prompt="head", logdir=str(tmp_path), loss="mse"
    )  # the kind's own loss wins over RunConfig's, as a compiled model's does
    result = train(config, model=LinearProbe(), data=_digits(), verbose=0)
    assert result.status == "completed", result.message
    assert result.history["loss"][-1] < result.history["loss"][0]
    assert result.model.layers[-1].name == "head"
    (note,) = [n for n in result.notes if n.startswith("model: ")]
    assert note == "model: a linear probe named head; compiled by the probe", note


def test_a_setting_the_kind_does_not_read_is_one_line_before_anything_is_made(tmp_path):
    config = RunConfig(epochs=1, lora_rank=8, logdir=str(tmp_path / "runs"))
    with pytest.raises(ConfigError) as info:
        train(config, model=LinearProbe(), data=_digits(), verbose=0)
    assert str(info.value).startswith(
        "RunConfig.lora_rank=8 applies to a model with LoRA adapters (a KerasHub "
        "preset), and a linear probe has none; leave lora_rank unset"
    ), info.value
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "changes, name",
    [
        (dict(lora_rank=8), "lora_rank"),
        (dict(lora_alpha=16.0), "lora_alpha"),
        (dict(lora_targets=("query",)), "lora_targets"),
        (dict(sequence_length=64), "sequence_length"),
        (dict(lora_rank=None), "lora_rank"),
        (dict(model_parallel=2), "model_parallel"),
        (dict(quantize="int8"), "quantize"),
    ],
)
def test_lora_and_text_settings_on_a_zoo_model_are_refused_in_one_line(changes, name, tmp_path):
    config = RunConfig(model="mlp", dataset="digits", epochs=1, logdir=str(tmp_path), **changes)
    with pytest.raises(ConfigError, match=rf"^RunConfig\.{name}=.* the model mlp has none; leave {name} unset") as info:
        train(config, verbose=0)
    assert "\n" not in str(info.value) and info.value.field == name
    assert list(tmp_path.iterdir()) == []


def test_the_defaults_and_a_recorded_config_are_not_settings_the_user_set():
    config = RunConfig(model="mlp")
    assert not any(config.is_set(name) for name in source.KIND_SETTINGS)
    source.choose(None, config).check(config)  # the defaults pass
    assert config.replace(lora_rank=4).is_set("lora_rank") is False  # replace() with the same value sets nothing
    recorded = RunConfig.from_dict(config.to_dict())  # a run's config.json read back: values, not choices
    assert not any(recorded.is_set(name) for name in source.KIND_SETTINGS)
    assert RunConfig.from_dict({**config.to_dict(), "lora_rank": 8}).is_set("lora_rank")


def test_the_kind_is_chosen_once_from_what_was_given():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    assert isinstance(source.choose(model, RunConfig()), source.BuiltModel)
    built = source.choose(lambda: model, RunConfig())
    assert isinstance(built, source.Factory) and not built.writes_text()
    zoo = source.choose(None, RunConfig(model="cnn"))
    assert isinstance(zoo, source.Factory) and zoo.factory is registry.entry("model", "cnn").target
    probe = LinearProbe()
    assert source.choose(probe, RunConfig()) is probe
    assert isinstance(source.choose(None, RunConfig(model="kaggle://keras/gemma3/keras/x")), pretrained.Preset)


def test_a_built_models_clone_gets_its_compile_arguments_without_a_mark_on_any_model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    kind = source.BuiltModel(model)
    clone = keras.models.clone_model(model)
    args = kind.user_compile(clone)
    assert args["loss"] == "mse" and isinstance(args["optimizer"], keras.optimizers.SGD)
    assert args["optimizer"] is not model.optimizer and kind.user_compile(model)["optimizer"] is model.optimizer
    assert not [a for m in (model, clone) for a in vars(m) if a.startswith("_tpukit")]
