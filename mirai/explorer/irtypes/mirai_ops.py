"""What the export face needs from a request: `@mirai.op` functions with sample inputs. Ops the code
defines are used as they are; otherwise each model becomes an op named after its class.
"""

from __future__ import annotations

import inspect
import re

from mirai.explorer.irtypes.pytorch import models, user_run
from mirai.explorer.irtypes.registry import Context
from mirai.explorer.irtypes.usercode import INPUT_NAMES, Explored


def op_name(label: str) -> str:
    """A TensorFlow op name (CamelCase, starts with a capital) from a model's label.

    >>> op_name("my_model #1")
    'MyModel'
    """
    words = re.findall(r"[A-Za-z0-9]+", label.split("#")[0])
    name = "".join(word[:1].upper() + word[1:] for word in words) or "Model"
    return name if name[0].isalpha() else f"Op{name}"


def as_op(item: Explored):
    """`item.model` as a mirai Op (a wrapper with one named parameter per example input)."""
    from mirai.decorator import Op, op

    if isinstance(item.model, Op):
        return item.model
    model = item.model

    def forward(*args):
        return model(*args)

    forward.__signature__ = inspect.Signature(
        [
            inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for i in range(len(item.inputs))
        ]
    )
    return op(forward, name=op_name(item.label))


def ops_of(ctx: Context) -> list[tuple[object, list]]:
    """(op, sample inputs) for each thing to export, in order."""
    from mirai.decorator import Op

    run = user_run(ctx)
    if not run.explored:
        defined = [v for k, v in run.namespace.items() if isinstance(v, Op) and k[:2] != "__"]
        if defined:
            namespace = run.namespace
            inputs = next((namespace[k] for k in INPUT_NAMES if k in namespace), None)
            if inputs is not None:
                inputs = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
                return [(defined[-1], inputs)]
    return [(as_op(item), list(item.inputs)) for item in models(ctx)]
