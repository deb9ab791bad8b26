"""The launch configuration of a kernel captured without a GPU to time it on.

On a GPU, Inductor's autotuner runs each kernel's candidate configurations and capture records the
fastest. Without one, capture takes the configuration Inductor itself would run first when it does
not search: capture compiles with max-autotune on (for the GEMM templates), which hands every
pointwise and reduction kernel its whole search list, and the first entry of that list suits rows
reduced along contiguous memory only. With max-autotune off, Inductor's heuristics use the
reduction's layout hint (inner, outer, outer-tiny) to keep the one configuration made for it: an
outer reduction (a bias gradient summed over the batch, say) gets blocks that read along the
contiguous dimension. So the GPU-less pick reloads the kernel's module with max-autotune off in its
metadata and takes the configuration that list gives. Where the list still has several (Inductor
would time them), they are, for a persistent reduction over short rows, the same blocks with 1, 8,
32 or 128 rows per program: one row per program (the first) launches a tiny program per row, so the
pick is the most rows per program that still gives every SM of the target at least half a program
at the sample's size. Any other list: its first entry.

    >>> _without_max_autotune("inductor_meta={'max_autotune': True, 'num_load': 2}")
    "inductor_meta={'max_autotune': False, 'num_load': 2}"
"""

from __future__ import annotations

import re

from mirai.gpu.kernels import load_kernel

# the origin of a kernel with a single configuration: nothing to time, so nothing for a table to set
ONLY_CONFIG = "the kernel's only configuration"
_MAX_AUTOTUNE = re.compile(r"(['\"]max_autotune(?:_pointwise)?['\"]\s*:\s*)True")


def _without_max_autotune(source: str) -> str:
    return _MAX_AUTOTUNE.sub(r"\1False", source)


def gpuless_config(name: str, source: str, tuner, sms: int, why: str = "no GPU to tune on"):
    """(config, origin) for kernel `name` of module `source`, whose autotuner is `tuner`, on a
    device of `sms` streaming multiprocessors; `why` says in the origin why nothing was timed."""
    if len(tuner.configs) == 1:
        return tuner.configs[0], ONLY_CONFIG
    plain = _without_max_autotune(source)
    if plain != source:
        try:
            configs = load_kernel(name, plain).configs
        except Exception:  # noqa: BLE001 - an Inductor whose heuristics differ: use the search list
            configs = []
        if len(configs) == 1:
            return configs[0], f"Inductor's heuristic configuration ({why})"
        if configs:
            return _by_rows(configs, _rows_hint(tuner), sms), (
                f"Inductor's heuristic candidates, rows per program for the sample size ({why})"
            )
    return tuner.configs[0], f"Inductor's first heuristic configuration ({why})"


def _rows_hint(tuner) -> int | None:
    """The sample's row count (x numel) as Inductor hints it to the kernel's heuristics."""
    hints = getattr(tuner, "size_hints", None)
    rows = hints.get("x") if isinstance(hints, dict) else None
    return int(rows) if rows else None


def _by_rows(configs, rows: int | None, sms: int):
    """Of candidates that differ only in XBLOCK (rows per program), as Inductor offers a persistent
    reduction over short rows, the largest that still gives every SM at least half a program at the
    sample's row count; Inductor would time them, and its first (one row per program) leaves a
    reduction over rows of a few dozen elements launching one tiny program per row. Anything else:
    the first candidate, as Inductor lists them."""
    shapes = {tuple(sorted((k, v) for k, v in c.kwargs.items() if k != "XBLOCK")) for c in configs}
    if (
        rows is None
        or not sms
        or len(shapes) != 1
        or any("XBLOCK" not in c.kwargs for c in configs)
    ):
        return configs[0]
    fitting = [c for c in configs if 2 * -(-rows // c.kwargs["XBLOCK"]) >= sms]
    return max(fitting, key=lambda c: c.kwargs["XBLOCK"]) if fitting else configs[0]


def tuned_config(table, graph: str, name: str, tuner):
    """(config, origin) from a tuning table (mirai.export.tuning) for kernel `name` of `graph`, or
    None where the table has no entry for its key, or one whose block names are not this kernel's
    (another torch may have generated it as a different kind of reduction)."""
    if len(tuner.configs) == 1:
        return None  # nothing to choose: the kernel's own configuration
    hints = getattr(tuner, "size_hints", None)
    entry = table.kernel_entry(graph, name, hints) if isinstance(hints, dict) else None
    if entry is None or set(entry["kwargs"]) != set(tuner.configs[0].kwargs):
        return None
    from triton import Config

    config = Config(
        dict(entry["kwargs"]), num_warps=entry["num_warps"], num_stages=entry["num_stages"]
    )
    return config, table.origin
