"""mirai_tf_op: the C++ TensorFlow custom ops the export face generates for the model (forward op,
then backward op), GPU-less for a CUDA target.

The export itself is `mirai.build`; this module adapts the request's models to it: a model that is not
already an `@mirai.op` is wrapped in one named after its class.
"""

from __future__ import annotations

import re
import traceback

from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes.pytorch import models
from mirai.explorer.irtypes.registry import Context, Sections, register

DEFAULT_TARGET = "sm_90"


def op_name(label: str) -> str:
    """A TensorFlow op name (CamelCase, starts with a capital) from a model's label.

    >>> op_name("my_model #1")
    'MyModel'
    """
    words = re.findall(r"[A-Za-z0-9]+", label.split("#")[0])
    name = "".join(word[:1].upper() + word[1:] for word in words) or "Model"
    return name if name[0].isalpha() else f"Op{name}"


def _as_op(item):
    import mirai

    if getattr(item.model, "__mirai_op__", None) is not None:
        return item.model
    model = item.model
    return mirai.op(name=op_name(item.label))(lambda *args: model(*args))


@register(
    "mirai_tf_op", "pytorch", "mirai's generated TensorFlow custom ops (C++), forward then backward"
)
def mirai_tf_op(ctx: Context) -> Sections:
    try:
        import mirai

        build = mirai.build
    except (ImportError, AttributeError) as err:
        raise ExplorerError(
            "mirai_tf_op is not available in this build of mirai", f"mirai.build: {err}"
        ) from None
    target = ctx.request.get("cuda_target") or DEFAULT_TARGET
    sections = []
    for index, item in enumerate(models(ctx)):
        out_dir = ctx.workdir / f"mirai_op_{index}"
        try:
            build(_as_op(item), sample_inputs=list(item.inputs), output_dir=out_dir, target=target)
        except Exception as err:
            detail = "".join(traceback.format_exception(type(err), err, err.__traceback__))
            raise ExplorerError(
                f"mirai build failed: {type(err).__name__}: {err}", detail
            ) from None
        sources = sorted(out_dir.glob("*Fwd.cc")) + sorted(out_dir.glob("*Bwd.cc"))
        if not sources:
            raise ExplorerError("mirai build wrote no op sources", f"in {out_dir}")
        sections += [(path.name, path.read_text()) for path in sources]
    return sections
