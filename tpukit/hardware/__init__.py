"""What accelerator is here and how to drive it: the Keras backend, TPU/GPU/CPU discovery, `connect`.

Lowest engine layer after `tpukit.config`: it imports nothing else of tpukit. Inside, each module imports
only those listed before it: specs (the `Runtime` value, errors, peaks), tpu, backend, cpu_probe, gpu,
cpu, tf_multiworker, jax_devices, and runtime (`connect`), which nothing here imports.
"""
