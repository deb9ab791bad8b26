"""inductor_output_code: what torch.compile (Inductor) generates for a CUDA target, GPU-less: the
forward and backward wrapper modules with their Triton kernels, per model.

The capture itself belongs to the export face (`mirai.export.capture.inductor_output_code`); this
module only adapts the request's models to it.
"""

from __future__ import annotations

from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes.mirai_ops import CUDA_TARGET, ops_of
from mirai.explorer.irtypes.registry import Context, IRType, Sections

GRAPH_NAMES = ("forward", "backward")


def capture_function():
    """mirai's GPU-less Inductor capture, or a clear error when this build of mirai lacks it."""
    try:
        from mirai.export.capture import inductor_output_code
    except ImportError as err:
        raise ExplorerError(
            "inductor_output_code is not available in this build of mirai",
            f"mirai.export.capture.inductor_output_code could not be imported: {err}",
        ) from None
    return inductor_output_code


def inductor_output_code(ctx: Context) -> Sections:
    capture = capture_function()
    target = CUDA_TARGET.spec(ctx.request)
    sections = []
    for op, inputs in ops_of(ctx):
        try:
            codes = capture(op, inputs, target=target)
        except ExplorerError:
            raise
        except Exception as err:
            raise ExplorerError(
                f"Inductor capture failed: {type(err).__name__}: {err}", _traceback(err)
            ) from None
        for name, code in zip(GRAPH_NAMES, codes):
            sections.append((f"{op.name} {name}", code))
    return sections


def _traceback(err: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(err), err, err.__traceback__))


IR_TYPES = (
    IRType(
        "inductor_output_code",
        "pytorch",
        "Inductor output code",
        "torch.compile's generated code (Inductor wrapper + Triton kernels) for a CUDA target, "
        "GPU-less",
        inductor_output_code,
        syntax="python",
        languages=("pytorch",),
        target=CUDA_TARGET,
        comment="#",
    ),
)
