"""Models: what builds a run's model, one object per kind (`source`; a KerasHub preset: `pretrained`), the teaching
zoo (`zoo`), compiling and checking against the data (`modeling`), LoRA (`lora`), FLOPs and memory.

`tpukit.models.build("cnn", ...)` is the zoo's builder, as in the notebooks.
"""

from tpukit.models import pretrained  # noqa: F401  (registers the preset names with the registry)
from tpukit.models import preference  # noqa: F401  (adds the preference methods to source.TUNED)
from tpukit.models.zoo import MODELS, build, describe, factory, flops_per_example  # noqa: F401
