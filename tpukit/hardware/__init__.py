"""What accelerator is here and how to drive it: TPU, GPU and CPU discovery behind one interface, and `connect`.

Above `tpukit.backend` (which Keras framework) and `tpukit.config`; nothing else of tpukit. Inside, from the
bottom: specs (device kinds, peaks), runtime (`Request`, `Runtime`, errors), mirrored (the MirroredStrategy per
device set) and cpu_probe, then the kinds tpu, gpu and cpu, then jax_devices and tf_multiworker, and connect,
which nothing here imports. tpu, gpu and cpu each import none of the others; tests/test_layers.py holds the contract.
"""
