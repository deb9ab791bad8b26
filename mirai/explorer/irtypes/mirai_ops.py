"""What the export face needs from a request: `@mirai.op` functions with sample inputs. Ops the code
defines are used as they are; otherwise each model becomes an op named after its class.
"""

from __future__ import annotations

import inspect
import re

from mirai.explorer.irtypes.pytorch import models, user_run
from mirai.explorer.irtypes.registry import Context, TargetChoice
from mirai.explorer.irtypes.usercode import INPUT_NAMES, Explored

# The target of the IR types made by the export face: CUDA only (its GPU-less capture needs the
# device properties of a registered CUDA target).
CUDA_TARGET = TargetChoice("cuda_target", "sm_90", ("cuda",))


def op_name(label: str) -> str:
    """A TensorFlow op name (CamelCase, starts with a capital) from a model's label.

    >>> op_name("my_model #1")
    'MyModel'
    """
    words = re.findall(r"[A-Za-z0-9]+", label.split("#")[0])
    name = "".join(word[:1].upper() + word[1:] for word in words) or "Model"
    return name if name[0].isalpha() else f"Op{name}"


def as_op(item: Explored) -> tuple[object, list]:
    """`item.model` as a mirai Op and its sample inputs.

    The export face exports functions of tensors, so a module's parameters and buffers become inputs
    after the example inputs (`torch.func.functional_call`); buffers get no gradient.
    """
    import torch
    from mirai.export.decorator import Op, op

    if isinstance(item.model, Op):
        return item.model, list(item.inputs)
    model = item.model
    n_inputs = len(item.inputs)
    state = {}
    if isinstance(model, torch.nn.Module):
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    state_names = list(state)
    buffer_names = set(dict(model.named_buffers())) if state else set()

    def forward(*args):
        if not state_names:
            return model(*args)
        tensors = dict(zip(state_names, args[n_inputs:]))
        return torch.func.functional_call(model, tensors, tuple(args[:n_inputs]))

    params = [f"x{i}" for i in range(n_inputs)] + [_identifier(n) for n in state_names]
    forward.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]
    )
    no_grad = [_identifier(n) for n in state_names if n in buffer_names]
    samples = list(item.inputs) + [t.detach() for t in state.values()]
    return op(forward, name=op_name(item.label), no_grad=no_grad), samples


def _identifier(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)


def ops_of(ctx: Context) -> list[tuple[object, list]]:
    """(op, sample inputs) for each thing to export, in order."""
    from mirai.export.decorator import Op

    run = user_run(ctx)
    if not run.explored:
        defined = [v for k, v in run.namespace.items() if isinstance(v, Op) and k[:2] != "__"]
        if defined:
            namespace = run.namespace
            inputs = next((namespace[k] for k in INPUT_NAMES if k in namespace), None)
            if inputs is not None:
                inputs = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
                return [(defined[-1], inputs)]
    return [as_op(item) for item in models(ctx)]
