"""The launch configuration of a kernel captured without a GPU to time it on.

On a GPU, Inductor's autotuner runs each kernel's candidate configurations and capture records the
fastest. Without one, capture takes the configuration Inductor itself would run first when it does
not search: capture compiles with max-autotune on (for the GEMM templates), which hands every
pointwise and reduction kernel its whole search list, and the first entry of that list suits rows
reduced along contiguous memory only. With max-autotune off, Inductor's heuristics use the
reduction's layout hint (inner, outer, outer-tiny) to keep the one configuration made for it: an
outer reduction (a bias gradient summed over the batch, say) gets blocks that read along the
contiguous dimension. So the GPU-less pick reloads the kernel's module with max-autotune off in its
metadata and takes the first configuration that list gives.

    >>> _without_max_autotune("inductor_meta={'max_autotune': True, 'num_load': 2}")
    "inductor_meta={'max_autotune': False, 'num_load': 2}"
"""

from __future__ import annotations

import re

from mirai.gpu.kernels import load_kernel

_MAX_AUTOTUNE = re.compile(r"(['\"]max_autotune(?:_pointwise)?['\"]\s*:\s*)True")


def _without_max_autotune(source: str) -> str:
    return _MAX_AUTOTUNE.sub(r"\1False", source)


def gpuless_config(name: str, source: str, tuner):
    """(config, origin) for kernel `name` of module `source`, whose autotuner is `tuner`."""
    if len(tuner.configs) == 1:
        return tuner.configs[0], "the kernel's only configuration"
    plain = _without_max_autotune(source)
    if plain != source:
        try:
            configs = load_kernel(name, plain).configs
        except Exception:  # noqa: BLE001 - an Inductor whose heuristics differ: use the search list
            configs = []
        if configs:
            return configs[0], "Inductor's heuristic configuration (no GPU to tune on)"
    return tuner.configs[0], "Inductor's first heuristic configuration (no GPU to tune on)"
