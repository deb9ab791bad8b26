"""Registry of IR-type generators keyed by `ir_type`. A new IR type is one function with `@register`
in a family module (listed in `mirai.explorer.irtypes.FAMILY_MODULES`).

Family modules import torch / torch_mlir / triton lazily, inside generators: the server process imports
the registry to list and check IR types; only worker processes run generators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mirai.explorer.errors import ExplorerError


@dataclass
class Context:
    """What a generator gets: the request, a fresh working directory, and limits."""

    request: dict
    workdir: Path
    tool_timeout_s: float = 60.0
    triton_cache_dir: Path | None = None
    memo: dict = field(default_factory=dict)  # results shared by the steps of one request

    @property
    def code(self) -> str:
        return self.request["code"]


# A generator returns one (label, text) section per model or kernel, in order; the pipeline runs on each
# section and a single section is answered as is (several are joined under comment lines).
Sections = list[tuple[str, str]]
Generator = Callable[[Context], Sections]


@dataclass(frozen=True)
class IRType:
    name: str
    family: str
    description: str
    generate: Generator
    comment: str = "//"  # line-comment syntax of the text, for the line naming each section


IR_TYPES: dict[str, IRType] = {}


def register(
    name: str, family: str, description: str, comment: str = "//"
) -> Callable[[Generator], Generator]:
    """Decorator: make `fn(ctx) -> Sections` the generator of `name`."""

    def decorate(fn: Generator) -> Generator:
        add(IRType(name, family, description, fn, comment))
        return fn

    return decorate


def add(ir_type: IRType) -> None:
    if ir_type.name in IR_TYPES:
        raise RuntimeError(f"IR type {ir_type.name!r} registered twice")
    IR_TYPES[ir_type.name] = ir_type


def lookup(name: str) -> IRType:
    """The IR type, or the guide's exact 'IR type not supported' error (§6)."""
    try:
        return IR_TYPES[name]
    except KeyError:
        raise ExplorerError("IR type not supported", "") from None


def join_sections(sections: list[tuple[str, str]], comment: str) -> str:
    """One text for several models/kernels: a comment line names each section. One section: as is."""
    if len(sections) == 1:
        return sections[0][1]
    parts = [f"{comment} ----- {label} -----\n{text.rstrip()}\n" for label, text in sections]
    return "\n".join(parts)
