"""PyTorch family (guide §3): TorchScript, Torch-MLIR's four exports, and the lowering of
linalg-on-tensors through Debian's LLVM/MLIR 22 tools down to LLVM IR, NVPTX, AMDGPU and SPIR-V.

The lowerings are data (`LOWERINGS`): an IR type made from another one by one tool invocation.
With several models (`__explore__`), each model's IR comes in order under a comment line naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirai.explorer.irtypes.registry import Context, Sections, register
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


# ir_type -> (function giving one (label, text) per model, description)
SOURCES = {
    "torch_script_graph_ir": (
        _torchscript,
        "torch.jit.trace(model, example_input), graph with calls inlined",
    ),
    "torch_mlir": (_torch_mlir("torch"), "Torch-MLIR FX export, torch dialect"),
    "tosa_mlir": (_torch_mlir("tosa"), "Torch-MLIR -> TOSA"),
    "linalg_on_tensors_mlir": (_torch_mlir("linalg-on-tensors"), "Torch-MLIR -> Linalg-on-Tensors"),
    "stablehlo_mlir": (_torch_mlir("stablehlo"), "Torch-MLIR -> StableHLO"),
}


@dataclass(frozen=True)
class Lowering:
    """`ir_type` is `source` run through `tool` with `args` (per model)."""

    ir_type: str
    source: str
    tool: str
    args: tuple[str, ...]
    description: str


LOWERINGS = [
    Lowering(
        "llvm_mlir",
        "linalg_on_tensors_mlir",
        "mlir-opt",
        LINALG_TO_LLVM,
        "Linalg-on-Tensors -> LLVM dialect (mlir-opt)",
    ),
    Lowering(
        "llvm_ir",
        "llvm_mlir",
        "mlir-translate",
        ("--mlir-to-llvmir",),
        "LLVM dialect -> LLVM IR (mlir-translate --mlir-to-llvmir)",
    ),
    Lowering(
        "nvptx",
        "llvm_ir",
        "llc",
        ("-mtriple=nvptx64-nvidia-cuda", "-mcpu=sm_90"),
        "LLVM IR -> PTX for sm_90 (llc)",
    ),
    Lowering(
        "amdgpu",
        "llvm_ir",
        "llc",
        ("-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx942"),
        "LLVM IR -> AMDGCN assembly for gfx942 (llc)",
    ),
    Lowering(
        "spirv",
        "llvm_ir",
        "llc",
        ("-mtriple=spirv64-unknown-unknown",),
        "LLVM IR -> SPIR-V assembly (llc)",
    ),
]

# Comment syntax of each IR type's text, for the line that names a model's section.
COMMENTS = {"torch_script_graph_ir": "#", "llvm_ir": ";", "amdgpu": ";", "spirv": ";"}


def sections_of(ir_type: str, ctx: Context) -> Sections:
    """One (label, text) per model for a PyTorch-family IR type."""
    if ir_type in SOURCES:
        return SOURCES[ir_type][0](ctx)
    lowering = _LOWERING_BY_TYPE[ir_type]
    result = []
    for label, text in sections_of(lowering.source, ctx):
        command = TOOLS[lowering.tool].argv(lowering.args)
        stage = f"{ir_type}: {lowering.tool}"
        out = run_tool(command, stage=stage, input_text=text, timeout_s=ctx.tool_timeout_s)
        result.append((label, out.stdout))
    return result


_LOWERING_BY_TYPE = {lowering.ir_type: lowering for lowering in LOWERINGS}


def _register(ir_type: str, description: str) -> None:
    def generate(ctx: Context) -> Sections:
        return sections_of(ir_type, ctx)

    register(ir_type, "pytorch", description, COMMENTS.get(ir_type, "//"))(generate)


for _name, (_, _description) in SOURCES.items():
    _register(_name, _description)
for _lowering in LOWERINGS:
    _register(_lowering.ir_type, _lowering.description)
