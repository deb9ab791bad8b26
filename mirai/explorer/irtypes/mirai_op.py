"""mirai_tf_op: the C++ TensorFlow custom ops the export face generates for the model (forward op,
then backward op), GPU-less for a CUDA target.

The export itself is `mirai.build`; `mirai_ops` adapts the request's models to it.
"""

from __future__ import annotations

import traceback

from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes.mirai_ops import CUDA_TARGET, ops_of
from mirai.explorer.irtypes.registry import Context, IRType, Sections

# The generated C++ shown, per op (forward, then backward): the TF op, then the launch code it adapts.
SOURCE_PATTERNS = ("*{phase}.cc", "*{phase}_launch.h")


def mirai_tf_op(ctx: Context) -> Sections:
    try:
        import mirai

        build = mirai.build
    except (ImportError, AttributeError) as err:
        raise ExplorerError(
            "mirai_tf_op is not available in this build of mirai", f"mirai.build: {err}"
        ) from None
    target = CUDA_TARGET.spec(ctx.request)
    sections = []
    for index, (op, inputs) in enumerate(ops_of(ctx)):
        out_dir = ctx.workdir / f"mirai_op_{index}"
        try:
            build(op, sample_inputs=inputs, output_dir=out_dir, target=target)
        except Exception as err:
            detail = "".join(traceback.format_exception(type(err), err, err.__traceback__))
            raise ExplorerError(
                f"mirai build failed: {type(err).__name__}: {err}", detail
            ) from None
        sources = [
            path
            for phase in ("Fwd", "Bwd")
            for pattern in SOURCE_PATTERNS
            for path in sorted(out_dir.glob(pattern.format(phase=phase)))
        ]
        if not sources:
            raise ExplorerError("mirai build wrote no op sources", f"in {out_dir}")
        sections += [(path.name, path.read_text()) for path in sources]
    return sections


IR_TYPES = (
    IRType(
        "mirai_tf_op",
        "pytorch",
        "mirai TF op (C++)",
        "mirai's generated TensorFlow custom ops (C++: op and launch code), forward then backward",
        mirai_tf_op,
        syntax="cpp",
        languages=("pytorch",),
        target=CUDA_TARGET,
    ),
)
