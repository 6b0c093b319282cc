"""Models: the teaching zoo (`zoo`), the seam where a user's model is built and checked (`modeling`), FLOPs.

`tpukit.models.build("cnn", ...)` is the zoo's builder, as in the notebooks.
"""

from tpukit.models.zoo import MODELS, build, describe, factory, flops_per_example  # noqa: F401
