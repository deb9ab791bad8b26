"""GPU targets mirai can build for: the device properties GPU-less capture pretends to have.

A new target is one entry in TARGETS. The properties are those a real device reports through
`torch.cuda.get_device_properties`; Inductor's heuristics (block sizes, persistent reductions, grid
limits) read them, so they must match the GPU the op will run on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mirai.errors import MiraiError


@dataclass(frozen=True)
class Target:
    name: str  # "sm_90"
    device_name: str
    major: int
    minor: int
    multi_processor_count: int
    shared_memory_per_block_optin: int
    l2_cache_size: int
    total_memory: int
    regs_per_multiprocessor: int = 65536
    max_threads_per_multi_processor: int = 2048
    max_threads_per_block: int = 1024
    warp_size: int = 32

    @property
    def cc(self) -> int:
        return self.major * 10 + self.minor

    def triton(self):
        """The target as Triton's compiler names it (a triton.backends.compiler.GPUTarget)."""
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.cc, self.warp_size)


GiB = 1 << 30
MiB = 1 << 20

TARGETS = {
    t.name: t
    for t in (
        Target("sm_80", "NVIDIA A100-SXM4-80GB", 8, 0, 108, 166912, 40 * MiB, 80 * GiB),
        Target(
            "sm_86",
            "NVIDIA A10",
            8,
            6,
            72,
            101376,
            6 * MiB,
            24 * GiB,
            max_threads_per_multi_processor=1536,
        ),
        Target(
            "sm_89",
            "NVIDIA L4",
            8,
            9,
            58,
            101376,
            48 * MiB,
            24 * GiB,
            max_threads_per_multi_processor=1536,
        ),
        Target("sm_90", "NVIDIA H100 80GB HBM3", 9, 0, 132, 232448, 50 * MiB, 80 * GiB),
    )
}


def get_target(name: str) -> Target:
    """Look up a target by its arch name.

    >>> get_target("sm_90").multi_processor_count
    132
    """
    try:
        return TARGETS[name]
    except KeyError:
        raise MiraiError(
            f"unknown target {name!r}; known targets: {', '.join(sorted(TARGETS))}"
        ) from None


def parse_targets(spec) -> tuple[Target, ...]:
    """The targets of a build, lowest compute capability first, without repeats.

    `spec` is one name ("sm_90"), a comma-separated list ("sm_80,sm_90"), a list of names, or
    Targets.

    >>> [t.name for t in parse_targets("sm_90, sm_80,sm_90")]
    ['sm_80', 'sm_90']
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    found = {}
    for item in items:
        target = item if isinstance(item, Target) else get_target(str(item).strip())
        found[target.name] = target
    if not found:
        raise MiraiError(f"no target named in {spec!r}; e.g. 'sm_90' or 'sm_80,sm_90'")
    return tuple(sorted(found.values(), key=lambda t: t.cc))


def capture_target(targets: tuple[Target, ...]) -> Target:
    """The device a build for several targets is captured for: the lowest architecture, with the
    smallest shared memory of them all, so that every kernel configuration Inductor picks fits each
    target. Kernels are then compiled for every target from that one capture.

    >>> t = capture_target(parse_targets("sm_80,sm_89"))
    >>> (t.name, t.shared_memory_per_block_optin)
    ('sm_80', 101376)
    """
    lowest = targets[0]
    shared = min(t.shared_memory_per_block_optin for t in targets)
    return replace(lowest, shared_memory_per_block_optin=shared)
