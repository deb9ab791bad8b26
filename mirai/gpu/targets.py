"""GPU targets: one `Target` type, one registry, one parser of every spelling users type.

A registered target carries the device properties a real device reports through
`torch.cuda.get_device_properties`: Inductor's heuristics (block sizes, persistent reductions, grid
limits) read them while capturing GPU-less, so they must match the GPU the op will run on. Adding an
architecture is one entry in TARGETS.

Spellings (`parse_spelling`): "sm_90", "sm_90a", "90", "9.0", "cuda:90", "cuda:sm_90" for CUDA;
"gfx942", "hip:gfx942" for HIP; a third field sets the warp size ("hip:gfx942:32").

    >>> parse_target("cuda:9.0").name, parse_target("sm_90a").name
    ('sm_90', 'sm_90')
    >>> compile_target("hip:gfx942")
    GPUTarget(backend='hip', arch='gfx942', warp_size=64)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from mirai.errors import MiraiError

WARP_SIZE = {"cuda": 32, "hip": 64}


@dataclass(frozen=True)
class Target:
    name: str  # "sm_90", "gfx942"
    device_name: str
    major: int  # compute capability (HIP: 0)
    minor: int
    multi_processor_count: int
    shared_memory_per_block_optin: int
    l2_cache_size: int
    total_memory: int
    regs_per_multiprocessor: int = 65536
    max_threads_per_multi_processor: int = 2048
    max_threads_per_block: int = 1024
    warp_size: int = 32
    backend: str = "cuda"

    @property
    def cc(self) -> int:
        return self.major * 10 + self.minor

    @property
    def arch(self) -> int | str:
        """What Triton calls the architecture: 90 for CUDA, "gfx942" for HIP."""
        return self.cc if self.backend == "cuda" else self.name

    def triton(self):
        """The target as Triton's compiler names it (a triton.backends.compiler.GPUTarget)."""
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)


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
        Target(
            "gfx942",
            "AMD Instinct MI300X",
            0,
            0,
            304,
            65536,
            4 * MiB,
            192 * GiB,
            max_threads_per_multi_processor=2048,
            warp_size=64,
            backend="hip",
        ),
    )
}

_CUDA_ARCH = re.compile(r"^(?:sm_)?(\d+)(?:\.(\d))?a?$")


def parse_spelling(spec: str) -> tuple[str, int | str, int]:
    """(backend, arch, warp size) from any spelling: CUDA archs as compute capability (90).

    >>> parse_spelling("8.6"), parse_spelling("hip:gfx90a")
    (('cuda', 86, 32), ('hip', 'gfx90a', 64))
    """
    text = str(spec).strip().lower()
    parts = text.split(":")
    if parts[0] in WARP_SIZE:
        backend, rest = parts[0], parts[1:]
    else:
        backend, rest = ("hip" if text.startswith("gfx") else "cuda"), parts
    if not rest or len(rest) > 2 or not rest[0]:
        raise MiraiError(_bad(spec))
    arch: int | str = rest[0]
    if backend == "cuda":
        m = _CUDA_ARCH.match(rest[0])
        if m is None:
            raise MiraiError(_bad(spec))
        arch = int(m.group(1)) * 10 + int(m.group(2)) if m.group(2) else int(m.group(1))
    elif not re.match(r"^gfx[0-9a-f]+$", rest[0]):
        raise MiraiError(_bad(spec))
    try:
        warp = int(rest[1]) if len(rest) == 2 else WARP_SIZE[backend]
    except ValueError:
        raise MiraiError(_bad(spec)) from None
    return backend, arch, warp


def _bad(spec) -> str:
    return (
        f"not a GPU target: {spec!r}; write a CUDA architecture as sm_90, 90, 9.0 or cuda:90, "
        "or a HIP one as gfx942 or hip:gfx942"
    )


def _name(backend: str, arch: int | str) -> str:
    return f"sm_{arch}" if backend == "cuda" else str(arch)


def parse_target(spec) -> Target:
    """The registered Target that `spec` names, in any spelling.

    >>> parse_target("sm_90").multi_processor_count
    132
    """
    if isinstance(spec, Target):
        return spec
    backend, arch, _ = parse_spelling(spec)
    name = _name(backend, arch)
    if name not in TARGETS:
        raise MiraiError(
            f"unknown target {spec!r}; known targets: {', '.join(sorted(TARGETS))} "
            "(a new one is an entry in mirai.gpu.targets.TARGETS)"
        )
    return TARGETS[name]


get_target = parse_target


def compile_target(spec):
    """Triton's GPUTarget for `spec`: any architecture Triton compiles, registered or not (compiling
    a Triton kernel needs no device properties).

    >>> compile_target("cuda:75").arch
    75
    """
    from triton.backends.compiler import GPUTarget

    backend, arch, warp = parse_spelling(spec)
    return GPUTarget(backend, arch, warp)


def cuda_targets() -> list[Target]:
    return [t for t in TARGETS.values() if t.backend == "cuda"]


def parse_targets(spec) -> tuple[Target, ...]:
    """The CUDA targets of a build, lowest compute capability first, without repeats.

    `spec` is one spelling ("sm_90"), a comma-separated list ("sm_80,sm_90"), a list of spellings,
    or Targets.

    >>> [t.name for t in parse_targets("sm_90, sm_80,9.0")]
    ['sm_80', 'sm_90']
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    found = {}
    for item in items:
        target = parse_target(item if isinstance(item, Target) else str(item).strip())
        if target.backend != "cuda":
            raise MiraiError(
                f"mirai builds TensorFlow ops for CUDA GPUs; {target.name} is a {target.backend} "
                "target (the explorer compiles Triton kernels for it)"
            )
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
