"""Triton family (guide §3): the user's kernels compiled GPU-less, one stage of Triton's compiler each.

The code launches its kernels as usual (`kernel[grid](...)`); launches compile for the request's
`triton_target` (default cuda:90, hip:gfx942 for triton_amdgpu) and nothing runs. The Triton cache
directory is the one of the code string (see `mirai.explorer.cache`), so /free_ir_cache can remove it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes.registry import Context, Sections, register
from mirai.explorer.irtypes.triton_gpuless import gpuless_triton, parse_target
from mirai.explorer.irtypes.usercode import run_user_code

NO_KERNEL_HELP = (
    "Launch each kernel once with example arguments, e.g. `add_kernel[(n // 256,)](x, y, out, n, "
    "BLOCK=256)` with tensors on 'cuda' (they are made on the CPU; nothing runs)."
)


@dataclass(frozen=True)
class TritonStage:
    ir_type: str
    asm_key: str  # key of CompiledKernel.asm
    backend: str  # the backend whose compiler produces it ("" = any)
    default_target: str
    comment: str
    description: str


STAGES = [
    TritonStage("triton_ir", "ttir", "", "cuda:90", "//", "Triton IR (*.ttir)"),
    TritonStage("triton_gpu_ir", "ttgir", "", "cuda:90", "//", "TritonGPU IR (*.ttgir)"),
    TritonStage("triton_llvm_ir", "llir", "", "cuda:90", ";", "LLVM IR of the kernel (*.llir)"),
    TritonStage("triton_nvptx", "ptx", "cuda", "cuda:90", "//", "PTX (*.ptx), sm_90 by default"),
    TritonStage(
        "triton_amdgpu",
        "amdgcn",
        "hip",
        "hip:gfx942",
        ";",
        "AMDGCN assembly of the *.hsaco (gfx942)",
    ),
]


def compile_kernels(ctx: Context, target_spec: str, lenient: bool = True) -> tuple[list, str]:
    """Run the user code with launches turned into compilations; (compiled kernels, printed text).

    `lenient`: an error raised after a kernel compiled is ignored (code after a launch may check
    results that were never computed; the kernels are what the user asked for).
    """
    target = parse_target(target_spec)
    saved_cache_dir = os.environ.get("TRITON_CACHE_DIR")
    if ctx.triton_cache_dir is not None:
        os.environ["TRITON_CACHE_DIR"] = str(ctx.triton_cache_dir)
    try:
        with gpuless_triton(target) as kernels:
            try:
                printed = run_user_code(ctx.code, ctx.workdir).stdout
            except ExplorerError:
                if not (lenient and kernels):
                    raise
                printed = ""
    finally:
        if saved_cache_dir is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved_cache_dir
    return list(kernels), printed


def _register(stage: TritonStage) -> None:
    def generate(ctx: Context) -> Sections:
        spec = ctx.request.get("triton_target") or stage.default_target
        if stage.backend and parse_target(spec).backend != stage.backend:
            raise ExplorerError(
                f"{stage.ir_type} needs a {stage.backend} triton_target, not {spec!r}",
                f"e.g. {stage.default_target}",
            )
        kernels, _ = compile_kernels(ctx, spec)
        if not kernels:
            raise ExplorerError("no Triton kernel was launched by the code", NO_KERNEL_HELP)
        return [(kernel.name, kernel.asm[stage.asm_key]) for kernel in kernels]

    register(stage.ir_type, "triton", stage.description, stage.comment)(generate)


for _stage in STAGES:
    _register(_stage)
