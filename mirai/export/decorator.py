"""`@mirai.op`: mark a PyTorch function for export and give its TensorFlow ops a name.

>>> import torch, mirai
>>> @mirai.op(name="Scale")
... def scale(x):
...     return x * 2
>>> scale.name, scale(torch.ones(2)).tolist()
('Scale', [2.0, 2.0])
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from mirai.errors import MiraiError

_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")


@dataclass
class Op:
    """A function marked for export. Calling it runs the plain PyTorch function."""

    fn: Callable
    name: str
    no_grad: tuple[str, ...] = ()

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    @property
    def param_names(self) -> list[str]:
        import inspect

        return list(inspect.signature(self.fn).parameters)

    def for_inference(self) -> "Op":
        """The same function exported for inference: no parameter gets a gradient, so the export
        has a forward op alone, `<name>InferenceFwd`, which writes its outputs and nothing for a
        backward op to read (a training forward also writes the residuals its backward reads).
        The name differs so that both builds can be loaded in one process."""
        return Op(fn=self.fn, name=f"{self.name}Inference", no_grad=tuple(self.param_names))


def op(fn: Callable | None = None, *, name: str | None = None, no_grad=()):
    """Mark `fn` for export as TensorFlow ops `<name>Fwd` and `<name>Bwd`.

    `name` must be CamelCase (TensorFlow op names are); it defaults to the function's name in
    CamelCase. `no_grad` names parameters that get no gradient (integer inputs never do).
    """

    def wrap(f: Callable) -> Op:
        op_name = name or "".join(part.capitalize() for part in f.__name__.split("_") if part)
        if not _NAME.match(op_name):
            raise MiraiError(
                f"op name {op_name!r} is not a valid TensorFlow op name: use CamelCase letters and "
                "digits, starting with a capital letter (e.g. name='Pffn')"
            )
        wrapped = Op(fn=f, name=op_name, no_grad=tuple(no_grad))
        functools.update_wrapper(wrapped, f, updated=())
        return wrapped

    if fn is not None:
        return wrap(fn)
    return wrap
