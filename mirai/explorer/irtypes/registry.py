"""The parts of the IR-type registry: what a generator gets (`Context`) and returns (`Sections`), what a
family module declares (`IRType`, `TargetChoice`), and `build_registry`, which checks every declaration
once at start-up and keys them by name.

A new IR type is one `IRType(...)` entry in the `IR_TYPES` tuple of a family module; a new family is
one module with such a tuple, imported in `mirai/explorer/irtypes/__init__.py` and added to its
`FAMILY_MODULES`. The entry is the one place that says everything about the type: its generator, its
label and highlighting for the page, the input languages it serves and the GPU target it takes.

Family modules import torch / torch_mlir / triton lazily, inside generators: the server process imports
the registry to list and check IR types; only worker processes run generators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterable

from mirai.explorer.schemas import LANGUAGES

# The guide's groups of IR types (§3).
FAMILIES = ("pytorch", "triton", "raw")
# How the page highlights an IR type's text.
SYNTAXES = ("mlir", "llvm", "ptx", "asm", "python", "cpp", "text")
# Request fields naming a GPU target for one kind of IR type; `target` fills whichever applies.
TARGET_FIELDS = ("triton_target", "cuda_target")


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
class TargetChoice:
    """The GPU target an IR type compiles for: the request field that names it (`target` fills it
    when the field is not given), the default (a name of mirai.gpu.targets), the backends it fits.

    >>> TargetChoice("cuda_target", "sm_90", ("cuda",)).spec({"cuda_target": "sm_80"})
    'sm_80'
    """

    field: str
    default: str
    backends: tuple[str, ...] = ("cuda", "hip")

    def spec(self, request: dict) -> str:
        """The request's target in the spelling the user gave, else the default."""
        return request.get(self.field) or self.default


@dataclass(frozen=True)
class IRType:
    """One `ir_type` and everything about it; GET /ir_types serves all but the generator."""

    name: str
    family: str  # one of FAMILIES
    label: str  # short name for a menu
    description: str
    generate: Generator
    syntax: str = "text"  # one of SYNTAXES
    languages: tuple[str, ...] = ()  # the selected_language values it serves
    target: TargetChoice | None = None
    default_for: tuple[str, ...] = ()  # languages for which a new pane shows this type
    comment: str = "//"  # line-comment syntax of the text, for the line naming each section


class RegistryError(RuntimeError):
    """Some IR type declarations are wrong; the message lists every problem."""


def build_registry(modules: Iterable[ModuleType]) -> dict[str, IRType]:
    """The IR types the modules declare (each module's `IR_TYPES` tuple), keyed by name, in order.

    Every problem (a module without IR_TYPES, a nameless or duplicate type, an unknown family,
    syntax, language or target, a language with no default type or several) is collected and
    reported in one RegistryError, as the server starts.

    >>> import types
    >>> one = types.ModuleType("one")
    >>> one.IR_TYPES = (IRType("x", "raw", "X", "", lambda ctx: [], languages=LANGUAGES,
    ...                        default_for=LANGUAGES),)
    >>> list(build_registry([one]))
    ['x']
    """
    registry: dict[str, IRType] = {}
    origin: dict[str, str] = {}
    problems: list[str] = []
    for module in modules:
        declared = getattr(module, "IR_TYPES", None)
        if not isinstance(declared, tuple):
            problems.append(f"{module.__name__} declares no IR_TYPES tuple")
            continue
        for ir_type in declared:
            where = module.__name__
            if not isinstance(ir_type, IRType) or not ir_type.name:
                problems.append(f"{where}: an IR type without a name: {ir_type!r}")
                continue
            if ir_type.name in registry:
                problems.append(
                    f"{where}: IR type {ir_type.name!r} is declared again "
                    f"(first in {origin[ir_type.name]})"
                )
                continue
            problems += [f"{where}: {ir_type.name}: {p}" for p in _check(ir_type)]
            registry[ir_type.name] = ir_type
            origin[ir_type.name] = where
    for language in LANGUAGES:
        defaults = [t.name for t in registry.values() if language in t.default_for]
        if len(defaults) != 1:
            problems.append(
                f"language {language!r} needs one default IR type, has {defaults or 'none'}"
            )
    if problems:
        raise RegistryError(
            "IR type registration failed:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    return registry


def _check(ir_type: IRType) -> list[str]:
    from mirai.gpu.targets import TARGETS

    problems = []
    if ir_type.family not in FAMILIES:
        problems.append(f"family {ir_type.family!r} is not one of {FAMILIES}")
    if ir_type.syntax not in SYNTAXES:
        problems.append(f"syntax {ir_type.syntax!r} is not one of {SYNTAXES}")
    if not ir_type.label:
        problems.append("no label")
    if not ir_type.languages:
        problems.append("serves no language")
    unknown = set(ir_type.languages) | set(ir_type.default_for)
    unknown -= set(LANGUAGES)
    if unknown:
        problems.append(f"languages {sorted(unknown)} are not among {LANGUAGES}")
    if not set(ir_type.default_for) <= set(ir_type.languages):
        problems.append("is a default for a language it does not serve")
    target = ir_type.target
    if target is not None:
        if target.field not in TARGET_FIELDS:
            problems.append(f"target field {target.field!r} is not one of {TARGET_FIELDS}")
        default = TARGETS.get(target.default)
        if default is None or default.backend not in target.backends:
            problems.append(
                f"default target {target.default!r} is not a registered target of "
                f"backend {' or '.join(target.backends)}"
            )
    return problems


def join_sections(sections: list[tuple[str, str]], comment: str) -> str:
    """One text for several models/kernels: a comment line names each section. One section: as is."""
    if len(sections) == 1:
        return sections[0][1]
    parts = [f"{comment} ----- {label} -----\n{text.rstrip()}\n" for label, text in sections]
    return "\n".join(parts)
