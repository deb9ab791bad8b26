"""Compile: each captured Triton kernel -> PTX + cubin for every target, with its launch metadata.

The kernel is compiled exactly as Inductor would compile it for the chosen configuration (Inductor's
own compile metadata and options), but for explicit targets, so no GPU is needed. One capture serves
all targets of a build: the same kernel source and configuration is compiled once per architecture,
and each binary is checked against its target's shared memory. Triton appends two
hidden pointer parameters (global and profile scratch) after the kernel's own; their sizes are in the
metadata, and the launcher allocates them when they are not zero.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

from mirai.errors import CompileError
from mirai.export.graph import CompiledKernel, KernelBinaries, KernelSource
from mirai.gpu.targets import Target


@dataclass(frozen=True)
class CompileOptions:
    """What users of such tools expect to set: the ptxas to use, and the PTX ISA version to emit
    (older drivers JIT only older PTX; e.g. 80 for PTX ISA 8.0)."""

    ptxas: str | None = None
    ptx_version: int | None = None


@contextlib.contextmanager
def _ptxas(path: str | None):
    if path is None:
        yield
        return
    previous = os.environ.get("TRITON_PTXAS_PATH")
    os.environ["TRITON_PTXAS_PATH"] = os.path.abspath(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TRITON_PTXAS_PATH", None)
        else:
            os.environ["TRITON_PTXAS_PATH"] = previous


def compile_kernel(
    kernel: KernelSource, target: Target, options: CompileOptions = CompileOptions()
) -> CompiledKernel:
    """Compile one kernel for `target` (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mirai.gpu.kernels import load_kernel

    tuner = load_kernel(kernel.entry, kernel.source)
    cfg = triton.Config(
        dict(kernel.config["kwargs"]),
        num_warps=kernel.config["num_warps"],
        num_stages=kernel.config["num_stages"],
    )
    compile_meta = tuner._create_compile_meta(cfg)
    triton_options = tuner._create_compile_options(cfg, compile_meta)
    if options.ptx_version is not None:
        triton_options["ptx_version"] = int(options.ptx_version)
    source = ASTSource(
        tuner.fn, compile_meta["signature"], compile_meta["constants"], compile_meta["configs"][0]
    )
    try:
        with _ptxas(options.ptxas):
            binary = triton.compile(
                source,
                target=GPUTarget("cuda", target.cc, target.warp_size),
                options=triton_options,
            )
    except Exception as err:
        raise CompileError(
            f"Triton could not compile kernel {kernel.name} for {target.name}: {err}\n"
            f"--- kernel source ---\n{kernel.source}"
        ) from err
    md = binary.metadata
    ptx = binary.asm["ptx"]
    arch = re.search(r"^\.target\s+(sm_\w+)", ptx, re.MULTILINE)
    params = tuple(
        (name, ty) for name, ty in compile_meta["signature"].items() if ty != "constexpr"
    )
    cluster = tuple(getattr(md, "cluster_dims", (1, 1, 1)) or (1, 1, 1))
    return CompiledKernel(
        name=kernel.name,
        function=md.name,
        target=target.name,
        arch=arch.group(1) if arch else f"sm_{target.cc}",
        ptx=ptx,
        cubin=bytes(binary.asm["cubin"]),
        params=params,
        num_warps=int(md.num_warps),
        num_ctas=int(getattr(md, "num_ctas", 1)),
        shared=int(md.shared),
        global_scratch_size=int(getattr(md, "global_scratch_size", 0) or 0),
        global_scratch_align=int(getattr(md, "global_scratch_align", 1) or 1),
        profile_scratch_size=int(getattr(md, "profile_scratch_size", 0) or 0),
        profile_scratch_align=int(getattr(md, "profile_scratch_align", 1) or 1),
        cluster_dims=(tuple(int(c) for c in cluster) + (1, 1, 1))[:3],
        launch_cooperative_grid=bool(getattr(md, "launch_cooperative_grid", False)),
        launch_pdl=bool(getattr(md, "launch_pdl", False)),
        dots=dot_kinds(binary.asm["ttir"]),
    )


_DOT_OPERAND_TYPES = {"f16": "fp16", "bf16": "bf16", "f64": "fp64"}


def dot_kinds(ttir: str) -> tuple[str, ...]:
    """What the tt.dot ops of a kernel's TTIR compute. Inductor decides TF32 per GEMM by shape
    (torch 2.13 keeps IEEE fp32 unless min(N, K) >= 512), so only the compiled IR says which.
    TTIR prints `inputPrecision` except for its default, IEEE."""
    kinds = set()
    for line in ttir.splitlines():
        if not re.search(r"\btt\.dot\b", line):
            continue
        operand = re.search(r":\s*tensor<(?:\d+x)+(\w+)>", line)
        element = operand.group(1) if operand else "?"
        if element == "f32":
            precision = re.search(r"inputPrecision = (\w+)", line)
            kinds.add(precision.group(1) if precision else "ieee")
        else:
            kinds.add(_DOT_OPERAND_TYPES.get(element, element))
    return tuple(sorted(kinds))


def compile_all(
    kernels: dict, targets, progress=None, options: CompileOptions = CompileOptions()
) -> dict:
    """Compile every kernel of every graph for every target: {graph: {kernel: KernelBinaries}}.
    `progress`, if given, is called with a description of each compile as it starts."""
    from mirai.gpu import versions
    from mirai.gpu.offline import offline_triton
    from mirai.gpu.targets import parse_targets

    versions.check_triton()
    targets = parse_targets(targets)
    if options.ptxas is not None and not (
        os.path.isfile(options.ptxas) and os.access(options.ptxas, os.X_OK)
    ):
        raise CompileError(f"ptxas {options.ptxas!r} is not an executable file")
    out = {}
    for graph, graph_kernels in kernels.items():
        out[graph] = {}
        for name, kernel in graph_kernels.items():
            binaries = []
            for target in targets:
                if progress:
                    progress(f"{graph} {name} for {target.name}")
                with offline_triton(target.triton(), benchmark="refuse"):
                    binaries.append(_fits(compile_kernel(kernel, target, options), target))
            _same_interface(binaries)
            out[graph][name] = KernelBinaries(name=name, binaries=tuple(binaries))
    return out


def _fits(kernel: CompiledKernel, target: Target) -> CompiledKernel:
    if kernel.shared > target.shared_memory_per_block_optin:
        raise CompileError(
            f"kernel {kernel.name} needs {kernel.shared} bytes of shared memory on {target.name}, "
            f"which has {target.shared_memory_per_block_optin}: its configuration was chosen for "
            "another GPU. Capture GPU-less for these targets, or build for this target separately."
        )
    return kernel


def _same_interface(binaries: list[CompiledKernel]) -> None:
    first = binaries[0]
    for other in binaries[1:]:
        if (other.function, other.params) != (first.function, first.params):
            raise CompileError(
                f"kernel {first.name} compiled to different entry points for {first.target} "
                f"({first.function}{list(first.params)}) and {other.target} "
                f"({other.function}{list(other.params)})"
            )
