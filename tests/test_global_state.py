"""tpukit's module state behind one reset (`tpukit.global_state`): tests and notebooks reset or hold it by name,
never through a module's private names."""

import pytest

import tpukit
from tpukit import global_state


def test_every_module_that_keeps_state_registers_it_when_imported():
    from tpukit.hardware import connect, cpu_probe  # noqa: F401
    from tpukit.training import compiles  # noqa: F401
    from tpukit.ui import state  # noqa: F401

    assert {"connection", "cpu_probe", "compiles", "registry", "kernel_runs", "dtype_policy"} <= set(
        global_state.names()
    )


def test_fresh_forgets_the_connection_inside_and_puts_it_back_after():
    first = tpukit.connect("cpu")
    assert tpukit.connect("cpu") is first  # kept: connecting again with the same arguments is free
    with global_state.fresh("connection"):
        inside = tpukit.connect("cpu")
        assert inside is not first
    assert tpukit.connect("cpu") is first
    global_state.reset("connection")
    assert tpukit.connect("cpu") is not first


def test_a_registered_name_is_forgotten_and_restored_with_the_rest(tmp_path):
    from tpukit import registry

    with global_state.fresh("registry"):
        tpukit.register_model("tiny-for-state-test", lambda: None)
        assert registry.lookup("model", "tiny-for-state-test") is not None
    assert registry.lookup("model", "tiny-for-state-test") is None
    assert registry.lookup("model", "mlp") is not None  # the zoo comes back on the first lookup


def test_the_dtype_policy_is_tpukit_state_too():
    import keras

    with global_state.fresh("dtype_policy"):
        keras.config.set_dtype_policy("mixed_bfloat16")
        global_state.reset("dtype_policy")
        assert keras.config.dtype_policy().name == "float32"
        keras.config.set_dtype_policy("mixed_bfloat16")
    assert keras.config.dtype_policy().name == "float32"


def test_an_unknown_name_is_one_line_with_the_choices():
    with pytest.raises(ValueError) as error:
        global_state.reset("connections")
    message = str(error.value)
    assert "\n" not in message and "'connections'" in message and "connection" in message.split("Choices:")[1]
