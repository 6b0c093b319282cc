"""The registry's one-line answers for names it does not know: the nearest known name, and what else it takes."""

import pytest

from tpukit import registry


@pytest.mark.parametrize(
    "kind, typed, meant",
    [
        ("model", "cnnn", "cnn"),
        ("model", "resnt", "resnet"),
        ("dataset", "digts", "digits"),
        ("dataset", "mnist5", "mnist5k"),
    ],
)
def test_a_name_close_to_a_known_one_is_named(kind, typed, meant):
    with pytest.raises(registry.RegistryError) as info:
        registry.entry(kind, typed)
    message = str(info.value)
    assert message.startswith(f"unknown {kind} {typed!r}: did you mean {meant!r}? Else register it"), message
    assert "\n" not in message and message.endswith(f"Received: {kind}={typed!r}.")


def test_a_name_close_to_none_lists_the_known_ones():
    with pytest.raises(
        registry.RegistryError,
        match=r"^unknown model 'transformer': register it .* Known models: "
        r"mlp, cnn, resnet\.",
    ):
        registry.entry("model", "transformer")


def test_providers_register_themselves_and_a_fresh_registry_keeps_them():
    """The zoo and the bundled datasets registered themselves at import; a fresh registry (registered names
    gone) loads them again on the first lookup."""
    from tpukit import global_state

    registry.register_model("mine", lambda: None)
    with global_state.fresh("registry"):
        assert registry.names("model") == ("mlp", "cnn", "resnet")
        assert "digits" in registry.names("dataset")
    assert "mine" in registry.names("model")
    registry.unregister("model", "mine")
