"""PyTorch family (guide §3): TorchScript, Torch-MLIR's four exports, and the lowering of
linalg-on-tensors through Debian's LLVM/MLIR 22 tools down to LLVM IR, NVPTX, AMDGPU and SPIR-V.

Each IR type is one entry of `IR_TYPES`; one made from another by one tool invocation has a
`Lowering` as its generator. With several models (`__explore__`), each model's IR comes in order
under a comment line naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirai.explorer.irtypes.registry import Context, IRType, Sections
from mirai.explorer.irtypes.usercode import Explored, UserRun, find_models, run_user_code
from mirai.explorer.runner import run_tool
from mirai.explorer.tools import TOOLS

# linalg-on-tensors -> LLVM dialect with upstream mlir-opt passes (the torch-mlir-opt binary of the
# torch-mlir wheel is built without them).
LINALG_TO_LLVM = (
    "--pass-pipeline=builtin.module("
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-deallocation-pipeline,convert-linalg-to-loops,expand-strided-metadata,lower-affine,"
    "convert-scf-to-cf,func.func(math-expand-ops),convert-math-to-libm,finalize-memref-to-llvm,"
    "convert-math-to-llvm,convert-arith-to-llvm,"
    "convert-func-to-llvm,convert-cf-to-llvm,reconcile-unrealized-casts)",
)


def user_run(ctx: Context) -> UserRun:
    """The one run of the request's user code (memoised: every step of a request shares it)."""
    if "run" not in ctx.memo:
        ctx.memo["run"] = run_user_code(ctx.code, ctx.workdir)
    return ctx.memo["run"]


def models(ctx: Context) -> list[Explored]:
    """The request's models with their example inputs."""
    return find_models(user_run(ctx))


def _torchscript(ctx: Context) -> Sections:
    import torch

    sections = []
    for item in models(ctx):
        with torch.no_grad():
            traced = torch.jit.trace(item.model, item.inputs)
        sections.append((item.label, str(traced.inlined_graph)))
    return sections


def _torch_mlir(output_type: str):
    def sections(ctx: Context) -> Sections:
        from torch_mlir import fx

        result = []
        for item in models(ctx):
            module = fx.export_and_import(item.model, *item.inputs, output_type=output_type)
            result.append((item.label, str(module)))
        return result

    return sections


@dataclass(frozen=True)
class Lowering:
    """A generator: the `source` IR type's text run through `tool` with `args`, per model."""

    source: str
    tool: str
    args: tuple[str, ...]

    def __call__(self, ctx: Context) -> Sections:
        result = []
        for label, text in _BY_NAME[self.source].generate(ctx):
            command = TOOLS[self.tool].argv(self.args)
            stage = f"{self.tool} of {self.source}"
            out = run_tool(command, stage=stage, input_text=text, timeout_s=ctx.tool_timeout_s)
            result.append((label, out.stdout))
        return result


FAMILY = "pytorch"
LANGUAGES = ("pytorch",)

IR_TYPES = (
    IRType(
        "torch_script_graph_ir",
        FAMILY,
        "TorchScript graph",
        "torch.jit.trace(model, example_input), graph with calls inlined",
        _torchscript,
        syntax="mlir",
        languages=LANGUAGES,
        comment="#",
    ),
    IRType(
        "torch_mlir",
        FAMILY,
        "Torch MLIR",
        "Torch-MLIR FX export, torch dialect",
        _torch_mlir("torch"),
        syntax="mlir",
        languages=LANGUAGES,
        default_for=("pytorch",),
    ),
    IRType(
        "tosa_mlir",
        FAMILY,
        "TOSA MLIR",
        "Torch-MLIR -> TOSA",
        _torch_mlir("tosa"),
        syntax="mlir",
        languages=LANGUAGES,
    ),
    IRType(
        "linalg_on_tensors_mlir",
        FAMILY,
        "Linalg-on-tensors MLIR",
        "Torch-MLIR -> Linalg-on-Tensors",
        _torch_mlir("linalg-on-tensors"),
        syntax="mlir",
        languages=LANGUAGES,
    ),
    IRType(
        "stablehlo_mlir",
        FAMILY,
        "StableHLO MLIR",
        "Torch-MLIR -> StableHLO",
        _torch_mlir("stablehlo"),
        syntax="mlir",
        languages=LANGUAGES,
    ),
    IRType(
        "llvm_mlir",
        FAMILY,
        "LLVM dialect MLIR",
        "Linalg-on-Tensors -> LLVM dialect (mlir-opt)",
        Lowering("linalg_on_tensors_mlir", "mlir-opt", LINALG_TO_LLVM),
        syntax="mlir",
        languages=LANGUAGES,
    ),
    IRType(
        "llvm_ir",
        FAMILY,
        "LLVM IR",
        "LLVM dialect -> LLVM IR (mlir-translate --mlir-to-llvmir)",
        Lowering("llvm_mlir", "mlir-translate", ("--mlir-to-llvmir",)),
        syntax="llvm",
        languages=LANGUAGES,
        comment=";",
    ),
    IRType(
        "nvptx",
        FAMILY,
        "NVPTX",
        "LLVM IR -> PTX for sm_90 (llc)",
        Lowering("llvm_ir", "llc", ("-mtriple=nvptx64-nvidia-cuda", "-mcpu=sm_90")),
        syntax="ptx",
        languages=LANGUAGES,
    ),
    IRType(
        "amdgpu",
        FAMILY,
        "AMDGPU",
        "LLVM IR -> AMDGCN assembly for gfx942 (llc)",
        Lowering("llvm_ir", "llc", ("-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx942")),
        syntax="asm",
        languages=LANGUAGES,
        comment=";",
    ),
    IRType(
        "spirv",
        FAMILY,
        "SPIR-V",
        "LLVM IR -> SPIR-V assembly (llc)",
        Lowering("llvm_ir", "llc", ("-mtriple=spirv64-unknown-unknown",)),
        syntax="asm",
        languages=LANGUAGES,
        comment=";",
    ),
)

_BY_NAME = {ir_type.name: ir_type for ir_type in IR_TYPES}
