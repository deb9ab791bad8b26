"""raw_ir (guide §3): with selected_language raw_ir the code is the IR itself; with pytorch or triton
the code runs (Triton launches compile GPU-less) and what it prints is the IR. The pipeline applies
afterwards in every case.
"""

from __future__ import annotations

from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes.registry import Context, IRType, Sections
from mirai.explorer.irtypes.triton import ANY_TARGET, compile_kernels
from mirai.explorer.irtypes.usercode import run_user_code


def _echo(ctx: Context) -> str:
    return ctx.code


def _printed_by_pytorch(ctx: Context) -> str:
    return run_user_code(ctx.code, ctx.workdir).stdout


def _printed_by_triton(ctx: Context) -> str:
    spec = ANY_TARGET.spec(ctx.request)
    return compile_kernels(ctx, spec, lenient=False)[1]


# selected_language -> how the raw IR is obtained
SOURCES = {"raw_ir": _echo, "pytorch": _printed_by_pytorch, "triton": _printed_by_triton}


def raw_ir(ctx: Context) -> Sections:
    language = ctx.request.get("selected_language") or "pytorch"
    if language not in SOURCES:
        raise ExplorerError(
            f"selected_language {language!r} not supported", f"use one of {', '.join(SOURCES)}"
        )
    return [("raw_ir", SOURCES[language](ctx))]


IR_TYPES = (
    IRType(
        "raw_ir",
        "raw",
        "Raw IR",
        "the code itself, or what the code prints (selected_language pytorch/triton)",
        raw_ir,
        languages=tuple(SOURCES),
        default_for=("raw_ir",),
    ),
)
