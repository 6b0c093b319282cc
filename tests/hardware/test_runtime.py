"""connect(): what it finds on this CPU machine, simulated replicas, and the reasons it skips TPU and GPU."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

import tpukit
from tpukit import global_state
from tpukit.hardware import connect as hw, gpu, mirrored, runtime as rt, specs, tf_multiworker, tpu
from conftest import REPLICAS, REPO, run_cli, unset_env


def test_auto_falls_back_to_cpu_and_says_why_it_skipped_the_rest():
    runtime = tpukit.connect()
    assert runtime.kind == "cpu" and runtime.backend == "tensorflow" and runtime.replicas == 1
    reasons = runtime.skipped_reasons
    assert set(reasons) == {"tpu", "gpu"}
    assert "no TPU found" in reasons["tpu"]
    assert "no GPU visible" in reasons["gpu"]
    text = runtime.describe()
    assert "Skipped TPU: no TPU found" in text and "Skipped GPU" in text and "Precision:" in text


_ALLOCATOR = """
import os, tpukit, tensorflow as tf
tpukit.connect("cpu", backend="tensorflow")
tf.matmul(tf.ones((256, 256)), tf.ones((256, 256)))
print(os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"))
"""


@pytest.mark.parametrize("user, expected", [(None, "true"), ("false", "false")])
def test_a_tensorflow_cpu_process_pools_its_memory_unless_the_user_says_not(user, expected):
    """What tpukit sets for TensorFlow (which reads it at its first allocation): its CPU pool unless the user chose.
    Not TensorFlow's memory statistics, which some CPUs' builds keep under malloc too."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "KERAS_BACKEND": "",
            **({"TF_CPU_ALLOCATOR_USE_BFC": user} if user else {}),
        }
    )
    done = subprocess.run([sys.executable, "-c", _ALLOCATOR], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == expected


@pytest.fixture
def measuring(monkeypatch):
    """Measure this CPU for real in this test, whatever probe the suite was told to use: the probe's figures and the
    connection start fresh, and come back after."""
    from tpukit import global_state
    from tpukit.hardware import cpu_probe as probe

    unset_env(monkeypatch, probe.FORCE)
    with global_state.fresh("cpu_probe", "connection"):
        yield probe


def test_cpu_precision_recommendation_is_measured(measuring):
    runtime = tpukit.connect("cpu")
    assert runtime.precision in ("float32", "mixed_bfloat16")
    assert "measured here" in runtime.precision_reason
    assert runtime.peak_flops("float32") > 1e9 and runtime.peak_flops("mixed_bfloat16") > 1e9
    gain = runtime.device_facts[0]["xla_gain"]  # what XLA's 16-bit math ran at against TensorFlow's kernels
    assert {k: set(v) for k, v in gain.items()} == {"bf16": {"matmul", "conv"}, "fp16": {"matmul", "conv"}}
    assert all(0 < x < 1000 for v in gain.values() for x in v.values())


@pytest.mark.parametrize("name, precision", [("bf16_faster", "mixed_bfloat16"), ("bf16_slower", "float32")])
def test_the_recommendation_follows_the_probe_and_says_where_its_figures_come_from(cpu_probe_says, name, precision):
    cpu_probe_says(name)
    runtime = tpukit.connect("cpu")
    assert runtime.precision == precision
    assert runtime.precision_reason.startswith("as ") and "(TPUKIT_CPU_PROBE) says" in runtime.precision_reason


@pytest.mark.parametrize(
    "content, said",
    [
        ("{not json", "cannot read it as JSON"),
        ('{"fp32_flops": 1e11}', "bf16_flops, fp32_conv_flops, bf16_conv_flops"),
        (
            '{"fp32_flops": 1e11, "bf16_flops": -1, "fp32_conv_flops": 1, "bf16_conv_flops": 1}',
            ": bf16_flops, fp16_flops",
        ),
    ],
)
def test_a_bad_probe_file_is_one_line_naming_it_and_the_figures(tmp_path, monkeypatch, content, said):
    from tpukit.hardware import cpu_probe as probe

    path = tmp_path / "figures.json"
    path.write_text(content)
    monkeypatch.setenv(probe.FORCE, str(path))
    with global_state.fresh("cpu_probe"), pytest.raises(rt.ConnectError) as e:
        probe.cpu_probe()
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"TPUKIT_CPU_PROBE={str(path)!r}") and said in message
    assert "unset it to measure this CPU" in message


def test_auto_precision_needs_both_bf16_matmuls_and_conv_gradients_to_gain():
    from tpukit.hardware.cpu import precision_from

    fast = {"fp32_flops": 1e11, "bf16_flops": 2e11, "fp32_conv_flops": 7e10, "bf16_conv_flops": 1.5e11}
    assert precision_from(fast)[0] == "mixed_bfloat16"
    # This AMD EPYC under TensorFlow 2.21: bf16 matmuls 1.3x, bf16 conv gradients 0.1x; the CNN ran 10x slower.
    epyc = {**fast, "bf16_flops": 1.3e11, "bf16_conv_flops": 7e9}
    precision, reason = precision_from(epyc)
    assert precision == "float32" and "matmuls at 1.3x and conv gradients at 0.1x" in reason


def test_a_probe_cached_without_the_conv_is_measured_again(tmp_path, measuring):
    probe = measuring
    first = probe.cpu_probe(str(tmp_path))
    fields = probe._FIELDS + probe.XLA_FIELDS
    assert set(fields) <= set(first) and min(first[f] for f in fields) > 1e8
    path = tmp_path / "cpu_probe.json"
    old = {first["key"]: {"key": first["key"], "cpu": first["cpu"], "fp32_flops": 1.0, "bf16_flops": 2.0}}
    path.write_text(json.dumps(old))  # what the matmul-only probe wrote
    global_state.reset("cpu_probe")
    again = probe.cpu_probe(str(tmp_path))
    assert again["fp32_flops"] > 1e8 and set(fields) <= set(json.loads(path.read_text())[first["key"]])


def test_simulated_replicas_give_per_replica_values():
    import tensorflow as tf

    runtime = tpukit.connect("cpu", replicas=REPLICAS)
    assert runtime.replicas == REPLICAS and runtime.simulated
    assert len(runtime.devices) == REPLICAS
    strategy = runtime.strategy
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    values = strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)
    assert sorted(int(v) for v in strategy.experimental_local_results(values)) == list(range(REPLICAS))
    ds = strategy.experimental_distribute_dataset(tf.data.Dataset.range(64).batch(32))
    first = next(iter(ds))
    shapes = [int(t.shape[0]) for t in strategy.experimental_local_results(first)]
    assert shapes == [32 // REPLICAS] * REPLICAS  # global batch split over replicas


def test_connecting_again_with_same_replicas_does_nothing_new():
    a = tpukit.connect("cpu", replicas=REPLICAS)
    assert tpukit.connect("cpu", replicas=REPLICAS) is a
    assert tpukit.connect("cpu", replicas=4).replicas == 4  # fewer: a subset of the logical devices


def test_more_replicas_than_configured_says_restart():
    with pytest.raises(rt.RestartRequired, match=r"replicas=64 .* Restart the runtime"):
        tpukit.connect("cpu", replicas=64)


def test_explicit_gpu_on_cpu_machine_is_a_clear_error():
    with pytest.raises(rt.ConnectError, match="no GPU visible"):
        tpukit.connect("gpu")


def test_bad_arguments():
    with pytest.raises(ValueError, match="Unknown accelerator 'npu'"):
        tpukit.connect("npu")
    with pytest.raises(ValueError, match="replicas=0"):
        tpukit.connect("cpu", replicas=0)


def test_tpu_address_from_environment(monkeypatch, tmp_path):
    unset_env(monkeypatch, "COLAB_TPU_ADDR", "TPU_NAME")
    monkeypatch.setattr(tpu, "tpu_vm_present", lambda: False)
    assert tpu.tpu_address() is None
    assert tpu.tpu_address("my-tpu") == "my-tpu"
    monkeypatch.setenv("TPU_NAME", "pod-1")
    assert tpu.tpu_address() == "pod-1"
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    assert tpu.tpu_address() == "grpc://10.0.0.2:8470"


def test_real_tpu_local_on_this_build_explains_no_tpu_support():
    """Real TensorFlow, no fake: tensorflow-cpu cannot initialize a TPU; the CLI says so in one line."""
    proc = run_cli(
        "train",
        "--backend",
        "tensorflow",
        "--accelerator",
        "tpu",
        "--tpu",
        "local",
        "--dataset",
        "digits",
        "--batch-size",
        "128",
    )
    assert proc.returncode == 1
    assert "this TensorFlow build has no TPU support" in proc.stderr
    assert "JAX backend" in proc.stderr
    assert "Traceback" not in proc.stderr
    # With backend auto, a TPU VM that this TensorFlow cannot drive goes to JAX, which finds no TPU here either.
    proc = run_cli("train", "--accelerator", "tpu", "--tpu", "local", "--dataset", "digits", "--batch-size", "128")
    assert proc.returncode == 1 and "JAX sees no TPU" in proc.stderr and "Traceback" not in proc.stderr


def test_auto_skips_a_tpu_vm_tensorflow_cannot_drive_fake_tpu(monkeypatch):
    """Fake TPU VM (a TPU cannot exist here): the resolver fails as TF does on Colab's TPU VMs."""

    def fake_resolver(address):
        assert address == "local"
        raise RuntimeError(
            "TPUs not found in the cluster. No OpKernel was registered to support Op 'ConfigureDistributedTPU'"
        )

    monkeypatch.setattr(tpu, "tpu_vm_present", lambda: True)
    unset_env(monkeypatch, "COLAB_TPU_ADDR", "TPU_NAME")
    runtime = hw.find(rt.Request("auto", tpu_resolver=fake_resolver))
    assert runtime.kind == "cpu"
    assert "no TPU support" in runtime.skipped_reasons["tpu"]
    with pytest.raises(rt.ConnectError, match="TPU 'local' could not be initialized"):
        hw.find(rt.Request("tpu", tpu_resolver=fake_resolver))


def test_a_refused_tpu_port_fails_at_once_in_one_line():
    """Nothing listens on the address: the probe fails before TensorFlow is asked (it would wait > 90 s)."""
    (port,) = _free_ports(1)
    address = f"grpc://127.0.0.1:{port}"
    started = time.monotonic()
    with pytest.raises(rt.ConnectError) as caught:
        tpukit.connect("tpu", tpu=address, timeout=2)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "\n" not in message and f"TPU '{address}'" in message and "refuses connections" in message
    assert not isinstance(caught.value, rt.RestartRequired)


def test_a_tpu_port_that_never_accepts_fails_after_the_timeout():
    """A full backlog drops the handshake, as a black-holed host does: the probe gives up after `timeout`."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        held = [socket.create_connection(("127.0.0.1", port), timeout=1)]  # fills the backlog
        try:
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=0.5))
                pytest.skip("this kernel accepts past a full backlog")
            except OSError:
                pass
            started = time.monotonic()
            with pytest.raises(rt.ConnectError, match=rf"did not answer within 1\.5 s .*TPUKIT_TPU_TIMEOUT"):
                hw.find(rt.Request("tpu", tpu=f"grpc://127.0.0.1:{port}", timeout=1.5))
            assert 1.4 < time.monotonic() - started < 5
        finally:
            for s in held:
                s.close()


def test_a_tpu_resolver_that_blocks_forever_times_out_fake_tpu():
    """Fake Cloud TPU name whose lookup never returns: connect gives up after `timeout`, naming the TPU."""
    release = threading.Event()

    def blocking_resolver(address):
        release.wait()
        raise RuntimeError("released")

    started = time.monotonic()
    try:
        with pytest.raises(rt.ConnectError) as caught:
            hw.find(rt.Request("tpu", tpu="my-tpu", tpu_resolver=blocking_resolver, timeout=2))
    finally:
        release.set()
    assert 1.9 < time.monotonic() - started < 5
    message = str(caught.value)
    assert "\n" not in message and "TPU 'my-tpu' could not be resolved within 2 s" in message
    assert "timeout=" in message and not isinstance(caught.value, rt.RestartRequired)


def test_a_listening_port_that_never_speaks_grpc_fails_within_the_timeout():
    """Real TensorFlow waits on it forever, so it runs in its own process (the CLI), which then exits."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"grpc://127.0.0.1:{server.getsockname()[1]}"
        proc = run_cli(
            "train",
            "--backend",
            "tensorflow",
            "--accelerator",
            "tpu",
            "--tpu",
            address,
            "--dataset",
            "digits",
            env={"TPUKIT_TPU_TIMEOUT": "2"},
            timeout=120,
        )
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if address in line]
    assert len(lines) == 1 and "did not answer within 2 s" in lines[0] and "restart the runtime" in lines[0]
    assert "Traceback" not in proc.stderr


def test_tpu_timeout_from_argument_or_environment(monkeypatch):
    monkeypatch.delenv("TPUKIT_TPU_TIMEOUT", raising=False)
    assert tpu.tpu_timeout() == tpu.TPU_TIMEOUT_S == 30.0
    assert tpu.tpu_timeout(5) == 5.0
    monkeypatch.setenv("TPUKIT_TPU_TIMEOUT", "7.5")
    assert tpu.tpu_timeout() == 7.5 and tpu.tpu_timeout(3) == 3.0
    monkeypatch.setenv("TPUKIT_TPU_TIMEOUT", "soon")
    with pytest.raises(
        ValueError,
        match="TPUKIT_TPU_TIMEOUT: expected a positive number of seconds. Received: TPUKIT_TPU_TIMEOUT='soon'",
    ):
        tpu.tpu_timeout()
    with pytest.raises(ValueError, match="Received: timeout=0"):
        tpukit.connect("cpu", timeout=0)


def test_tpu_type_from_accelerator_type_fake_tpu(monkeypatch):
    """Fake TPU VM environment variable: maps to the datasheet peak."""
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    assert tpu._tpu_type(None) == "TPU v5e"
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v2-8")
    assert tpu._tpu_type(None) == "TPU v2"
    assert specs.PEAK_FLOPS["TPU v2"]["bf16"] > 0


def test_gpu_precision_rule():
    assert gpu.precision([{"name": "Tesla T4", "compute_capability": [7, 5]}])[0] == "mixed_float16"
    precision, reason = gpu.precision([{"name": "Tesla P100", "compute_capability": [6, 0]}])
    assert precision == "float32" and "below 7.0" in reason
    assert "TF32" in gpu.precision([{"name": "NVIDIA A100", "compute_capability": [8, 0]}])[1]


def test_tf32_switch_toggles_and_returns_previous():
    previous = gpu.set_tf32(False)
    try:
        assert gpu.set_tf32(True) is False
    finally:
        gpu.set_tf32(previous)


def test_every_path_offers_one_interface_and_connect_walks_them_in_order():
    """tpu, gpu, cpu, jax_devices and tf_multiworker each offer KIND, available(request) and connect(request,
    skipped); the three kinds their precision. connect walks them: JAX first, then a TF_CONFIG cluster, then
    TPU, GPU, CPU."""
    from tpukit.hardware import cpu, jax_devices

    assert [p.__name__.rsplit(".", 1)[1] for p in hw.PATHS] == ["jax_devices", "tf_multiworker", "tpu", "gpu", "cpu"]
    assert [p.KIND for p in hw.PATHS] == [None, None, "tpu", "gpu", "cpu"]
    for path in hw.PATHS:
        assert callable(path.available) and callable(path.connect)
    assert tpu.precision()[0] == "mixed_bfloat16" and callable(gpu.precision) and callable(cpu.precision)
    tf_request = rt.Request("auto", backend="tensorflow")
    assert jax_devices.available(tf_request) == "the backend is tensorflow"
    assert cpu.available(tf_request) is None and gpu.available(tf_request).startswith("no GPU visible")
    assert tpukit.Runtime is rt.Runtime and tpukit.ConnectError is rt.ConnectError and tpukit.connect is hw.connect
    assert tpukit.set_tf32 is gpu.set_tf32 and specs.PEAK_FLOPS["Tesla T4"]["fp16"] == 65e12


def test_a_missing_private_tensorflow_api_is_refused_in_one_line(monkeypatch):
    """Fake future TensorFlow without the private attributes tpukit sets: each use says which one, in one line."""
    import tensorflow as tf
    from tensorflow.python.distribute import collective_all_reduce_strategy as impl

    monkeypatch.delattr(tf.distribute.MirroredStrategy, "_collective_key_base")
    with mirrored._group_keys_from(0):  # the first device set needs no group-key offset
        pass
    with pytest.raises(rt.ConnectError) as caught:
        with mirrored._group_keys_from(10_000):
            pass
    message = str(caught.value)
    assert (
        "\n" not in message
        and f"TensorFlow {tf.__version__} no longer has MirroredStrategy._collective_key_base" in message
    )

    monkeypatch.delattr(impl.CollectiveAllReduceExtended, "_initialize_local_devices")
    with pytest.raises(rt.ConnectError) as caught:
        tf_multiworker._multi_worker_strategy(2)
    message = str(caught.value)
    assert "\n" not in message and "no longer has CollectiveAllReduceExtended._initialize_local_devices" in message
    assert "replicas=1 per worker" in message


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


WORKER = """
import json, tpukit, tensorflow as tf
runtime = tpukit.connect()
strategy = runtime.strategy
total = strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)  # all-reduce across workers
result = tpukit.train(tpukit.RunConfig(dataset="digits", model="mlp", epochs=1, steps_per_epoch=5, logdir={logdir!r}),
                      runtime)
print(json.dumps({{"kind": runtime.kind, "workers": runtime.workers, "replicas": runtime.replicas,
                  "total": float(total), "strategy": isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy),
                  "status": result.status, "chief": runtime.process_index == 0}}))
"""


@pytest.mark.slow
def test_multi_worker_mirrored_two_local_workers(tmp_path):
    """Two worker processes on 127.0.0.1 join one MultiWorkerMirroredStrategy from TF_CONFIG and all-reduce."""
    workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        env = {**os.environ, "TF_CONFIG": tf_config, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
        code = WORKER.format(logdir=str(tmp_path / f"w{index}"))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for o in outs:
        assert o["strategy"] is True and o["workers"] == 2 and o["replicas"] == 2
        assert o["total"] == 2.0  # one from each worker: the collective ran across both processes
        assert o["status"] == "completed"  # tpukit's own loop (Keras 3's fit cannot run under MWMS)
    assert [o["chief"] for o in outs] == [True, False]


def test_one_mirrored_strategy_per_device_set_across_reconnects():
    """A second MirroredStrategy over the same devices would reuse collective keys the first left pending."""
    import tpukit
    from conftest import REPLICAS

    first = tpukit.connect(replicas=REPLICAS).strategy
    tpukit.connect(replicas=1)
    assert tpukit.connect(replicas=REPLICAS).strategy is first


def test_fewer_replicas_after_more_in_one_process_trains(tmp_path):
    """replicas=8 then 4 then 2 in one kernel: each strategy numbers its all-reduce groups apart from the others.

    Without that TensorFlow refuses the second ("joining a group with size 4, but that group has size 8").
    """
    import tpukit

    for n in (REPLICAS, REPLICAS // 2, 2):
        config = tpukit.RunConfig(
            model="mlp", dataset="digits", replicas=n, epochs=1, steps_per_epoch=3, logdir=str(tmp_path)
        )
        result = tpukit.train(config)
        assert result.status == "completed" and result.config["replicas"] == n, result.summary()


@pytest.mark.parametrize(
    "probe, precision, deterministic, slow",
    [
        ("bf16_slower", "mixed_float16", True, True),  # TF's fp16 convs 0.1x, XLA off under op determinism
        ("bf16_slower", "mixed_bfloat16", False, False),  # XLA runs it, 10x faster than TF's kernels
        ("bf16_faster", "mixed_bfloat16", True, False),  # TF's own bf16 kernels gain
        ("bf16_slower", "float32", True, False),
    ],
)
def test_a_precision_measured_slower_than_float32_is_advised_against_before_a_run(
    cpu_probe_says, probe, precision, deterministic, slow
):
    cpu_probe_says(probe)
    advice = tpukit.connect("cpu").precision_advice(precision, deterministic)
    assert (advice is not None) == slow
    if slow:
        assert "\n" not in advice and "float32 is likely faster" in advice and "TPUKIT_CPU_PROBE" in advice


def test_mfu_says_what_peak_it_is_a_share_of_fake_tpu():
    """A CPU's peak is tpukit's own measurement, an accelerator's the published figure for all its chips (fake
    facts: no TPU here); the run's summary carries the words."""
    from tpukit.runs import records

    cpu = rt.TensorFlowRuntime(
        "tensorflow", "cpu", ("CPU:0",), 1, None, device_facts=({"peak_flops": {"fp32": 141.2e9}},)
    )
    assert cpu.peak_basis("float32") == "this CPU's float32 matmul peak as tpukit's probe measured it (141.2 GFLOP/s)"
    assert cpu.peak_basis("mixed_bfloat16") == ""  # not measured: no basis, and no MFU
    chips = ({"name": "TPU v5e", "peak_flops": {"bf16": 197e12}},) * 4
    tpu_runtime = rt.TensorFlowRuntime("tensorflow", "tpu", ("TPU:0",) * 4, 4, None, device_facts=chips)
    assert tpu_runtime.peak_basis("mixed_bfloat16") == "the published bfloat16 peak of 4 × TPU v5e (788.0 TFLOP/s)"
    result = records.RunResult(
        run_dir="r",
        status="completed",
        epochs_done=1,
        examples_per_sec=100.0,
        step_time_ms=5.0,
        mfu=0.167,
        mfu_basis=cpu.peak_basis("float32"),
        config={"model": "mlp", "dataset": "digits", "epochs": 1},
    )
    assert (
        "MFU: the model's counted FLOPs at this rate, as a share of this CPU's float32 matmul peak as tpukit's "
        "probe measured it (141.2 GFLOP/s)"
    ) in result.summary().splitlines()
