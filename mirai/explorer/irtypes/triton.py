"""Triton family (guide §3): the user's kernels compiled GPU-less, one stage of Triton's compiler each.

The code launches its kernels as usual (`kernel[grid](...)`); launches compile for the request's
`triton_target` (default sm_90, gfx942 for triton_amdgpu) and nothing runs. The Triton cache
directory is the one of the code string (see `mirai.explorer.cache`), so /free_ir_cache can remove it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes.registry import Context, IRType, Sections, TargetChoice
from mirai.explorer.irtypes.triton_gpuless import gpuless_triton, parse_target
from mirai.explorer.irtypes.usercode import run_user_code

NO_KERNEL_HELP = (
    "Launch each kernel once with example arguments, e.g. `add_kernel[(n // 256,)](x, y, out, n, "
    "BLOCK=256)` with tensors on 'cuda' (they are made on the CPU; nothing runs)."
)


@dataclass(frozen=True)
class TritonStage:
    """A generator: the `asm_key` stage of every kernel the code launches, compiled for `target`."""

    asm_key: str  # key of CompiledKernel.asm
    target: TargetChoice

    def __call__(self, ctx: Context) -> Sections:
        spec = self.target.spec(ctx.request)
        backend = parse_target(spec).backend
        if backend not in self.target.backends:
            wanted = " or ".join(self.target.backends)
            raise ExplorerError(
                f"{ctx.request.get('ir_type')} needs a {wanted} triton_target, not {spec!r}",
                f"e.g. {self.target.default}",
            )
        kernels, _ = compile_kernels(ctx, spec)
        if not kernels:
            raise ExplorerError("no Triton kernel was launched by the code", NO_KERNEL_HELP)
        return [(kernel.name, kernel.asm[self.asm_key]) for kernel in kernels]


# Triton compiles for either backend; PTX and AMDGCN come from one backend each.
ANY_TARGET = TargetChoice("triton_target", "sm_90", ("cuda", "hip"))
CUDA_TARGET = TargetChoice("triton_target", "sm_90", ("cuda",))
HIP_TARGET = TargetChoice("triton_target", "gfx942", ("hip",))


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


FAMILY = "triton"
LANGUAGES = ("triton",)

IR_TYPES = (
    IRType(
        "triton_ir",
        FAMILY,
        "Triton IR (ttir)",
        "Triton IR (*.ttir)",
        TritonStage("ttir", ANY_TARGET),
        syntax="mlir",
        languages=LANGUAGES,
        target=ANY_TARGET,
        default_for=("triton",),
    ),
    IRType(
        "triton_gpu_ir",
        FAMILY,
        "TritonGPU IR (ttgir)",
        "TritonGPU IR (*.ttgir)",
        TritonStage("ttgir", ANY_TARGET),
        syntax="mlir",
        languages=LANGUAGES,
        target=ANY_TARGET,
    ),
    IRType(
        "triton_llvm_ir",
        FAMILY,
        "Triton LLVM IR (llir)",
        "LLVM IR of the kernel (*.llir)",
        TritonStage("llir", ANY_TARGET),
        syntax="llvm",
        languages=LANGUAGES,
        target=ANY_TARGET,
        comment=";",
    ),
    IRType(
        "triton_nvptx",
        FAMILY,
        "Triton PTX",
        "PTX (*.ptx), sm_90 by default",
        TritonStage("ptx", CUDA_TARGET),
        syntax="ptx",
        languages=LANGUAGES,
        target=CUDA_TARGET,
    ),
    IRType(
        "triton_amdgpu",
        FAMILY,
        "Triton AMDGPU",
        "AMDGCN assembly of the *.hsaco (gfx942)",
        TritonStage("amdgcn", HIP_TARGET),
        syntax="asm",
        languages=LANGUAGES,
        target=HIP_TARGET,
        comment=";",
    ),
)
