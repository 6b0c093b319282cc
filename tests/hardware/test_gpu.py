"""TensorFlow on GPUs: one GPU under the default strategy (Keras decides XLA as for plain fit), two or more under
MirroredStrategy. This machine has no GPU, so the tests that need one fake
TensorFlow's device lists (and say so in their names)."""

import pytest

from tpukit.hardware import gpu, mirrored, runtime as rt
from tpukit.hardware.runtime import Request

tf = pytest.importorskip("tensorflow")


def _fake_gpus(monkeypatch, count):
    """TensorFlow reports `count` GPUs (T4s). Their logical devices are the first `count` logical CPUs, so a
    MirroredStrategy over them can be made and run here."""
    real_physical = tf.config.list_physical_devices
    real_logical = tf.config.list_logical_devices
    fakes = [tf.config.PhysicalDevice(name=f"/physical_device:GPU:{i}", device_type="GPU") for i in range(count)]

    def physical(device_type=None):
        if device_type == "GPU":
            return list(fakes)
        return real_physical(device_type) + (fakes if device_type is None else [])

    def logical(device_type=None):
        if device_type == "GPU":
            return real_logical("CPU")[:count]
        return real_logical(device_type)

    monkeypatch.setattr(tf.config, "list_physical_devices", physical)
    monkeypatch.setattr(tf.config, "list_logical_devices", logical)
    monkeypatch.setattr(
        tf.config.experimental,
        "get_device_details",
        lambda device: {"device_name": "Tesla T4", "compute_capability": (7, 5)},
    )
    monkeypatch.setattr(gpu, "_nvidia_memory", lambda: {i: 15360 for i in range(count)})


def _keras_auto_jit(runtime):
    """(Keras' jit decision for a zoo model built in `runtime.strategy.scope()` and compiled as tpukit compiles it,
    the same for plain fit's model: built and compiled outside any strategy, jit_compile="auto")."""
    import keras

    from tpukit.config import RunConfig
    from tpukit.models import modeling, zoo

    config = RunConfig(model="mlp", dataset="digits", precision="float32")
    with runtime.strategy.scope():
        model = zoo.build("mlp", input_shape=(8, 8, 1), num_classes=10)
        jit, why = runtime.jit_compile(config.jit_compile, "float32", model)
        assert (jit, why) == ("auto", None)  # tpukit leaves the decision to Keras on a GPU
        modeling.compile(model, config.replace(jit_compile=jit))
    plain = zoo.build("mlp", input_shape=(8, 8, 1), num_classes=10)
    plain.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", jit_compile="auto")
    return model.jit_compile, plain.jit_compile, model._resolve_auto_jit_compile()


def test_one_gpu_trains_under_the_default_strategy_and_keras_decides_xla_fake_gpus(monkeypatch):
    from tensorflow.python.framework.config import is_op_determinism_enabled

    _fake_gpus(monkeypatch, 1)
    runtime = gpu.connect(Request("gpu"))
    assert runtime.kind == "gpu" and runtime.replicas == 1 and len(runtime.devices) == 1
    assert runtime.strategy is tf.distribute.get_strategy()
    assert not isinstance(runtime.strategy, tf.distribute.MirroredStrategy)
    assert "default strategy on one GPU" in runtime.strategy_reason
    assert "Strategy: TensorFlow's default strategy on one GPU" in runtime.describe()
    assert runtime.to_dict()["strategy_reason"] == runtime.strategy_reason
    assert runtime.multi_step_refusal() is None  # several steps per execution, as on one CPU
    ours, plain, resolved = _keras_auto_jit(runtime)
    assert ours == plain == resolved  # Keras' own "auto", as plain fit has it
    # XLA on, as plain fit on a GPU; Keras keeps it off only under TensorFlow's op determinism (a deterministic
    # run earlier in this test process leaves it on).
    assert ours is (not is_op_determinism_enabled())


def test_replicas_one_of_two_gpus_is_the_default_strategy_fake_gpus(monkeypatch):
    _fake_gpus(monkeypatch, 2)
    runtime = gpu.connect(Request("gpu", replicas=1))
    assert runtime.replicas == 1 and runtime.strategy is tf.distribute.get_strategy()


def test_two_gpus_train_under_mirrored_strategy_fake_gpus(monkeypatch):
    _fake_gpus(monkeypatch, 2)
    runtime = gpu.connect(Request("gpu"))
    assert isinstance(runtime.strategy, tf.distribute.MirroredStrategy)
    assert runtime.replicas == runtime.strategy.num_replicas_in_sync == 2
    assert runtime.strategy is mirrored.strategy(runtime.devices)  # the one strategy of this device set
    assert "MirroredStrategy over 2 GPUs" in runtime.describe()
    assert "MirroredStrategy" in runtime.multi_step_refusal()
    ours, _, resolved = _keras_auto_jit(runtime)
    assert ours is resolved is False  # Keras' "auto" under a tf.distribute strategy: no XLA


def test_a_runtime_without_a_strategy_choice_describes_no_strategy_line():
    runtime = rt.Runtime(backend="tensorflow", kind="cpu", devices=("/device:CPU:0",), replicas=1, strategy=None)
    assert "Strategy:" not in runtime.describe()


def test_a_one_gpu_run_says_its_strategy_in_its_notes_fake_gpus(monkeypatch, tmp_path):
    """The run's notes carry the strategy choice (fake: the 'GPU' is a logical CPU device under a T4's name)."""
    import tpukit

    _fake_gpus(monkeypatch, 1)
    runtime = gpu.connect(Request("gpu"))
    config = tpukit.RunConfig(
        dataset="digits",
        model="mlp",
        epochs=1,
        batch_size=32,
        precision="float32",
        steps_per_epoch=2,
        logdir=str(tmp_path),
    )
    result = tpukit.train(config, runtime)
    assert result.status == "completed", result.message
    assert [n for n in result.notes if n.startswith("strategy: ")] == [f"strategy: {runtime.strategy_reason}"]
