"""RunConfig: validation at construction, one-line errors, derived values, JSON round trip."""

import json
import re
import warnings

import pytest

from tpukit.config import PreferenceOptions, ConfigError, PaddingWarning, RunConfig, padding_advice, padding_waste


@pytest.mark.parametrize(
    "changes, field, shown",
    [
        (dict(batch_size=0), "batch_size", "batch_size=0"),
        (dict(batch_size=-3), "batch_size", "batch_size=-3"),
        (dict(batch_size="64"), "batch_size", "batch_size='64'"),
        (dict(precision="fp8"), "precision", "'mixed_bfloat16'"),
        (dict(dataset=""), "dataset", "import path"),
        (dict(model=7), "model", "model=7"),
        (dict(loss=None), "loss", "loss=None"),
        (dict(metrics=("accuracy", 3)), "metrics", "('accuracy', 3)"),
        (dict(validation_split=1.0), "validation_split", "validation_split=1.0"),
        (dict(validation_split=0), "validation_split", "validation_split=0"),
        (dict(accelerator="npu"), "accelerator", "'tpu'"),
        (dict(replicas=0), "replicas", "replicas=0"),
        (dict(epochs=0), "epochs", "epochs=0"),
        (dict(profile=(5, 2)), "profile", "(5, 2)"),
        (dict(profile=(-1, 2)), "profile", "(-1, 2)"),
        (dict(learning_rate=0), "learning_rate", "learning_rate=0"),
        (dict(jit_compile=1), "jit_compile", "jit_compile=1"),
        (dict(deterministic="yes"), "deterministic", "deterministic='yes'"),
        (dict(name="a/b"), "name", "name='a/b'"),
        (dict(steps_per_execution=0), "steps_per_execution", "'auto' or an integer >= 1. Received: "),
        (dict(steps_per_execution="fast"), "steps_per_execution", "steps_per_execution='fast'"),
        (dict(steps_per_execution=True), "steps_per_execution", "steps_per_execution=True"),
        (dict(steps_per_execution=2.0), "steps_per_execution", "steps_per_execution=2.0"),
        (
            dict(lora_rank=0),
            "lora_rank",
            "an integer from 1 to 4,096 (the LoRA adapters' rank; 4, 8 or 16 are "
            "usual), or None to train every weight. Received: lora_rank=0.",
        ),
        (dict(lora_rank=-4), "lora_rank", "lora_rank=-4"),
        (dict(lora_rank=5000), "lora_rank", "lora_rank=5000"),
        (dict(lora_rank=4.0), "lora_rank", "lora_rank=4.0"),
        (dict(sequence_length=0), "sequence_length", "sequence_length=0"),
        (
            dict(lora_alpha=0),
            "lora_alpha",
            "a positive number (the adapters' update is scaled by alpha / rank; "
            "2 x rank is usual), or None for Keras' default, alpha = rank. "
            "Received: lora_alpha=0.",
        ),
        (dict(lora_alpha=True), "lora_alpha", "lora_alpha=True"),
        (dict(lora_targets=()), "lora_targets", "lora_targets=()"),
        (dict(lora_targets=("query", "")), "lora_targets", "such as ('query', 'value')"),
        (dict(remat="on"), "remat", "one of 'auto', True, False. Received: remat='on'."),
        (dict(remat=1), "remat", "remat=1"),
        (
            dict(gradient_accumulation=0),
            "gradient_accumulation",
            "'auto' or an integer from 1 to 1,024 (steps "
            "whose gradients one update applies). Received: "
            "gradient_accumulation=0.",
        ),
        (dict(gradient_accumulation=True), "gradient_accumulation", "gradient_accumulation=True"),
        (dict(gradient_accumulation=2.0), "gradient_accumulation", "gradient_accumulation=2.0"),
        (dict(gradient_accumulation=2000), "gradient_accumulation", "gradient_accumulation=2000"),
    ],
)
def test_bad_values_name_field_value_and_choices(changes, field, shown):
    with pytest.raises(ConfigError) as info:
        RunConfig(**changes)
    message = str(info.value)
    assert message.startswith(f"RunConfig.{field}:")
    assert shown in message
    assert "\n" not in message


def test_mixed_float16_on_tpu_suggests_bfloat16():
    with pytest.raises(ConfigError, match="use 'mixed_bfloat16'"):
        RunConfig(accelerator="tpu", precision="mixed_float16", batch_size=128)


def test_names_are_checked_for_form_only_without_importing_the_zoo():
    """RunConfig does not know what names mean (the zoo, the registry, import paths): train() resolves them."""
    config = RunConfig(model="mypackage.models:build", dataset="my-registered-set", metrics=["mae"])
    assert config.metrics == ("mae",)
    assert config.run_name == "build-my-registered-set"
    assert RunConfig.from_json(config.to_json()) == config
    assert RunConfig(validation_split=None).validation_split is None


def test_global_batch_size_is_per_replica_times_replicas():
    assert RunConfig(batch_size=32, replicas=8).global_batch_size == 256
    assert RunConfig(batch_size=32).global_batch_size == 32


def test_padding_advice_is_a_warning_with_waste_percent():
    # A TPU pads the batch side of [batch, features] to 8 rows (the features to 128 lanes); a GPU pads nothing, but
    # its Tensor Core kernels run fastest on multiples of 8, and the advice claims no waste there.
    with pytest.warns(PaddingWarning, match=r"not a multiple of 8 on TPU .*: padded to 104, 3.8% .* try 96 or 104"):
        RunConfig(accelerator="tpu", batch_size=100)
    with pytest.warns(
        PaddingWarning,
        match=r"multiple of 8 on GPU \(cuBLAS and cuDNN run any size and pad nothing, "
        r"but .* fastest on multiples of 8\); try 48 or 56\.$",
    ) as said:
        RunConfig(accelerator="gpu", batch_size=50)
    assert "padded" not in str(said[0].message) and "%" not in str(said[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RunConfig(accelerator="gpu", batch_size=64)
        RunConfig(accelerator="tpu", batch_size=96)  # a multiple of 8: no row is padding
        RunConfig(accelerator="cpu", batch_size=50)
    assert padding_advice(256, "tpu") is None and padding_advice(5, "tpu").endswith("try 8.")
    assert padding_waste(129, 128) == pytest.approx(100 * 127 / 256)
    assert "multiple of 8" in RunConfig(batch_size=50).padding_advice("tpu")


def test_padding_advice_is_said_once_where_the_batch_is_chosen():
    with pytest.warns(PaddingWarning) as said:
        config = RunConfig(accelerator="gpu", batch_size=50)
    assert len(said) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config.replace(epochs=2, precision="float32")  # the batch did not change: nothing new to say
        config.replace(batch_size=50)
        RunConfig.from_dict({"accelerator": "gpu", "batch_size": 50}, advise=False)  # a view shows it itself
    with pytest.warns(PaddingWarning, match="batch_size=60"):
        config.replace(batch_size=60)
    with pytest.warns(PaddingWarning, match="on TPU"):
        RunConfig(batch_size=50).replace(accelerator="tpu")


def test_lora_rank_and_sequence_length_edges_and_json():
    config = RunConfig(lora_rank=None, sequence_length=512)
    assert RunConfig.from_json(config.to_json()) == config
    config = RunConfig(lora_alpha=8, lora_targets=["query", "value"])  # JSON's lists come back as the tuple
    assert config.lora_targets == ("query", "value") and RunConfig.from_json(config.to_json()) == config
    assert RunConfig(lora_targets="query").lora_targets == ("query",)
    assert RunConfig().lora_rank == 4 and RunConfig(lora_rank=1).lora_rank == 1 and RunConfig(lora_rank=4096)


def test_quantize_is_int8_or_int4_under_lora_or_nothing_and_says_so_in_one_line():
    assert RunConfig(quantize="int8").quantize == "int8" and RunConfig().quantize is None
    assert RunConfig.from_json(RunConfig(quantize="int4").to_json()).quantize == "int4"
    with pytest.raises(
        ConfigError, match=r"^RunConfig\.quantize: expected None or 'int8' or 'int4' .*Received: quantize='nf4'"
    ):
        RunConfig(quantize="nf4")
    with pytest.raises(ConfigError, match=r"a quantized weight cannot train; set lora_rank") as info:
        RunConfig(quantize="int8", lora_rank=None)
    assert "\n" not in str(info.value) and info.value.field == "quantize"


def test_a_preference_method_and_its_options_round_trip_and_the_defaults_are_the_papers():
    from tpukit.validation import preference_option

    config = RunConfig(method="dpo", preference=PreferenceOptions(beta=0.25))
    assert RunConfig.from_json(config.to_json()) == config and config.to_dict()["preference"] == {"beta": 0.25}
    assert RunConfig(method="dpo", preference={"beta": 0.25}) == config  # a dict, as JSON and the CLI give it
    assert preference_option(config, "beta") == 0.25 and preference_option(config, "reference") == "start"
    simpo = RunConfig(method="simpo")
    assert (preference_option(simpo, "beta"), preference_option(simpo, "gamma")) == (2.0, 1.0)
    assert preference_option(simpo, "reference") is None and RunConfig().method == "sft"
    assert RunConfig(method="dpo", preference={"reference": "base"}).preference.reference == "base"


@pytest.mark.parametrize(
    "changes, shown",
    [
        (dict(method="ppo"), r"^RunConfig\.method: expected one of 'sft', 'dpo', 'simpo'\. Received: method='ppo'\.$"),
        (
            dict(preference={"beta": 0.2}),
            r"^RunConfig\.preference: expected None for method='sft' \(these are a preference",
        ),
        (
            dict(method="dpo", preference={"beta": 0}),
            r"expected beta > 0 \(it scales the reward; dpo's default is 0\.1\)",
        ),
        (dict(method="dpo", preference={"beta": -1.0}), r"expected beta > 0"),
        (
            dict(method="simpo", preference={"reference": "start"}),
            r"no reference for method='simpo': it is reference-free",
        ),
        (dict(method="dpo", preference={"gamma": 0.5}), r"no gamma for method='dpo': gamma is SimPO's target margin"),
        (dict(method="simpo", preference={"gamma": -1}), r"expected gamma >= 0"),
        (dict(method="dpo", preference={"reference": "sft"}), r"^RunConfig\.preference\.reference: expected one of"),
        (dict(method="dpo", preference={"betta": 1}), r"expected options among beta, gamma and reference; no 'betta'"),
        (
            dict(method="dpo", lora_rank=None, preference={"reference": "base"}),
            r"expected reference='start' where every weight trains \(lora_rank=None\)",
        ),
        (dict(method="dpo", preference="beta=1"), r"expected None or PreferenceOptions\(beta=\.\.\., gamma"),
    ],
)
def test_a_preference_setting_the_method_cannot_use_is_one_line(changes, shown):
    with pytest.raises(ConfigError, match=shown) as info:
        RunConfig(**changes)
    assert "\n" not in str(info.value)


def test_remat_and_gradient_accumulation_round_trip_and_an_old_config_without_them_loads():
    config = RunConfig(remat=True, gradient_accumulation=4)
    assert RunConfig.from_json(config.to_json()) == config and config.accumulation_steps == 4
    old = RunConfig().to_dict()
    del old["remat"], old["gradient_accumulation"]  # a config.json written before these settings
    loaded = RunConfig.from_dict(old)
    assert (loaded.remat, loaded.gradient_accumulation, loaded.accumulation_steps) == ("auto", "auto", 1)


def test_a_preset_directory_or_url_names_a_run_by_its_last_part():
    assert (
        RunConfig(model="kaggle://keras/gemma3/keras/gemma3_instruct_1b", dataset="pydoc").run_name
        == "gemma3_instruct_1b-pydoc"
    )
    assert RunConfig(model="/tmp/presets/tiny_gemma/", dataset="pydoc").run_name == "tiny_gemma-pydoc"
    assert RunConfig(model="hf://google/gemma-3-1b-it").run_name == "gemma-3-1b-it-mnist5k"
    assert RunConfig(model="pkg.models:build_cnn", dataset="pkg.data").run_name == "build_cnn-data"
    assert RunConfig(model="./p", dataset="chat.jsonl").run_name == "p-chat.jsonl"  # a file, as in a directory


def test_json_round_trip_and_replace():
    config = RunConfig(profile=(2, 4), deterministic=True, precision="mixed_bfloat16", replicas=8, jit_compile=False)
    again = RunConfig.from_json(config.to_json())
    assert again == config and again.profile == (2, 4)
    assert json.loads(config.to_json())["profile"] == [2, 4]
    assert config.replace(batch_size=16).batch_size == 16
    with pytest.raises(ConfigError, match="batch_size=0"):
        config.replace(batch_size=0)
    with pytest.raises(ConfigError, match="no field 'batchsize'"):
        config.replace(batchsize=16)
    with pytest.raises(ConfigError, match="no field 'colour'"):
        RunConfig.from_dict({"colour": "red"})


def test_config_is_frozen():
    config = RunConfig()
    with pytest.raises(Exception):
        config.batch_size = 3


@pytest.mark.parametrize(
    "changes, shown",
    [
        (dict(seed=2**32), "seed=4294967296"),
        (dict(epochs=10**7), "epochs=10000000"),
        (dict(dataset_size=10**12), "dataset_size=1000000000000"),
        (dict(name="x" * 300), "at most 100 characters"),
        (dict(name="a:b"), "name='a:b'"),
        (dict(name="CON"), "Windows device name"),
        (dict(name="run."), "not ending in a dot"),
    ],
)
def test_values_that_can_never_train_are_refused_when_built(changes, shown):
    with pytest.raises(ConfigError, match=re.escape(shown)) as info:
        RunConfig(**changes)
    assert "\n" not in str(info.value)
    RunConfig(seed=2**32 - 1, name="my run-1")  # the edges that are fine


@pytest.mark.parametrize(
    "text, shown",
    [
        ("{", "not valid JSON (JSONDecodeError"),
        ("[1, 2]", "expected a JSON object"),
        ("[" * 100000 + "]" * 100000, "not valid JSON (RecursionError"),
        ('{"epochs": "x"}', "epochs='x'"),
    ],
)
def test_from_json_fails_in_one_line(text, shown):
    with pytest.raises(ConfigError, match=re.escape(shown)) as info:
        RunConfig.from_json(text)
    assert "\n" not in str(info.value)


def test_a_profile_window_beyond_a_known_run_length_is_refused_when_built():
    with pytest.raises(ConfigError, match=r"a window within the run's 20 steps \(2 epochs x steps_per_epoch=10\)"):
        RunConfig(epochs=2, steps_per_epoch=10, profile=(15, 21))
    assert RunConfig(epochs=2, steps_per_epoch=10, profile=(15, 20)).profile == (15, 20)


def test_steps_per_execution_defaults_to_auto_and_keeps_explicit_values():
    """ "auto" is resolved by train(), which records the value it chose; an explicit value is kept as given."""
    assert RunConfig().steps_per_execution == "auto"
    assert RunConfig.from_json(RunConfig().to_json()).steps_per_execution == "auto"
    assert RunConfig(steps_per_execution=16).replace(steps_per_execution="auto").steps_per_execution == "auto"
    assert RunConfig.from_dict({"steps_per_execution": 8}).steps_per_execution == 8


def test_compilation_cache_is_auto_a_directory_or_off():
    from pathlib import Path

    assert RunConfig().compilation_cache == "auto"
    assert RunConfig(compilation_cache=Path("/tmp/jax")).compilation_cache == "/tmp/jax"
    for off in (None, "off"):
        config = RunConfig(compilation_cache=off)
        assert config.compilation_cache is None and RunConfig.from_json(config.to_json()) == config
    for bad in ("", "  ", 3, "a\nb"):
        with pytest.raises(
            ConfigError,
            match=r"^RunConfig\.compilation_cache: expected 'auto', a directory for JAX's "
            r"compiled programs, or None or 'off'\. Received: compilation_cache=",
        ):
            RunConfig(compilation_cache=bad)
