"""What accelerator is here and how to drive it: the Keras backend, TPU/GPU/CPU discovery, `connect`.

Lowest engine layer after `tpukit.config`: it imports nothing else of tpukit.
"""
