"""IR types the explorer can produce, one family module each; `IR_TYPES` is the registry.

from mirai.explorer.irtypes import IR_TYPES
sorted(IR_TYPES)   # ['amdgpu', 'inductor_output_code', ..., 'triton_nvptx']
"""

from __future__ import annotations

import importlib

from mirai.explorer.irtypes.registry import IR_TYPES, Context, IRType, Sections, lookup, register

# Each module registers its IR types on import; a new family is one more line here.
FAMILY_MODULES = [
    "mirai.explorer.irtypes.pytorch",
    "mirai.explorer.irtypes.triton",
    "mirai.explorer.irtypes.raw",
    "mirai.explorer.irtypes.inductor",
    "mirai.explorer.irtypes.mirai_op",
]

for _module in FAMILY_MODULES:
    importlib.import_module(_module)

__all__ = ["IR_TYPES", "Context", "IRType", "Sections", "lookup", "register"]
