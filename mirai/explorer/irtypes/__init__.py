"""IR types the explorer can produce, one family module each; `IR_TYPES` is the registry.

Each family module declares its IR types as data (a module-level `IR_TYPES` tuple of `IRType`);
importing one registers nothing. The registry is built here, once, from the modules listed in
FAMILY_MODULES, and a wrong declaration stops the server at start-up with every problem listed
(see `registry.build_registry`). A new family is one import and one entry in FAMILY_MODULES.

    from mirai.explorer.irtypes import IR_TYPES, lookup
    sorted(IR_TYPES)   # ['amdgpu', 'inductor_output_code', ..., 'triton_nvptx']
    lookup("torch_mlir").label   # 'Torch MLIR'
"""

from __future__ import annotations

from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes import inductor, mirai_op, pytorch, raw, triton
from mirai.explorer.irtypes.registry import (
    Context,
    IRType,
    RegistryError,
    Sections,
    TargetChoice,
    build_registry,
)

# In the order GET /ir_types lists them.
FAMILY_MODULES = (pytorch, triton, raw, inductor, mirai_op)

IR_TYPES: dict[str, IRType] = build_registry(FAMILY_MODULES)


def lookup(name: str) -> IRType:
    """The IR type, or the guide's exact 'IR type not supported' error (§6)."""
    try:
        return IR_TYPES[name]
    except KeyError:
        raise ExplorerError("IR type not supported", "") from None


__all__ = [
    "FAMILY_MODULES",
    "IR_TYPES",
    "Context",
    "IRType",
    "RegistryError",
    "Sections",
    "TargetChoice",
    "build_registry",
    "lookup",
]
