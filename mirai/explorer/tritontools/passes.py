"""The passes `triton-opt` knows, by their MLIR names, mapped to Triton's Python bindings.

Passes whose binding takes only the pass manager are discovered: each is added to a scratch pass
manager and `get_pipeline_str()` tells its MLIR name. Passes with options are listed in OPTION_PASSES
(binding, then its options in argument order with defaults). Written for triton 3.6 / 3.7.
"""

from __future__ import annotations

import re
import types
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Option:
    name: str
    kind: type
    default: Any


@dataclass(frozen=True)
class PassSpec:
    name: str
    add: Callable
    options: tuple[Option, ...] = ()

    def add_to(self, pm, values: dict[str, str]) -> None:
        unknown = set(values) - {option.name for option in self.options}
        if unknown:
            known = ", ".join(o.name for o in self.options) or "none"
            raise ValueError(f"--{self.name}: unknown option(s) {sorted(unknown)}; known: {known}")
        args = [_convert(o, values.get(o.name)) for o in self.options]
        self.add(pm, *args)


def _convert(option: Option, raw: str | None):
    if raw is None:
        return option.default
    if option.kind is bool:
        return raw.lower() in ("1", "true", "yes", "on", "")
    return option.kind(raw)


def _option_passes(lib) -> list[PassSpec]:
    ttir, ttgpuir = lib.passes.ttir, lib.passes.ttgpuir
    nv, amd = lib.nvidia.passes, lib.amd.passes
    return [
        PassSpec(
            "convert-triton-to-tritongpu",
            ttir.add_convert_to_ttgpuir,
            (
                Option("target", str, "cuda:90"),
                Option("num-warps", int, 4),
                Option("threads-per-warp", int, 32),
                Option("num-ctas", int, 1),
            ),
        ),
        PassSpec(
            "tritongpu-pipeline",
            ttgpuir.add_pipeline,
            (Option("num-stages", int, 3), Option("dump-intermediate-steps", bool, False)),
        ),
        PassSpec(
            "tritongpu-assign-latencies",
            ttgpuir.add_assign_latencies,
            (Option("num-stages", int, 3),),
        ),
        PassSpec(
            "tritongpu-automatic-warp-specialization",
            ttgpuir.add_warp_specialize,
            (Option("num-stages", int, 3),),
        ),
        PassSpec("tritongpu-F32DotTC", ttgpuir.add_f32_dot_tc, (Option("emu-tf32", bool, False),)),
        PassSpec(
            "tritongpu-optimize-dot-operands",
            ttgpuir.add_optimize_dot_operands,
            (Option("hoist-layout-conversion", bool, True),),
        ),
        PassSpec(
            "tritongpu-hoist-tmem-alloc",
            ttgpuir.add_hoist_tmem_alloc,
            (Option("hoist-out-of-if", bool, False),),
        ),
        PassSpec(
            "allocate-shared-memory-nv",
            nv.ttgpuir.add_allocate_shared_memory_nv,
            (Option("compute-capability", int, 90), Option("ptx-version", int, 87)),
        ),
        PassSpec(
            "convert-triton-gpu-to-llvm",
            nv.ttgpuir.add_to_llvmir,
            (Option("compute-capability", int, 90), Option("ptx-version", int, 87)),
        ),
        PassSpec(
            "triton-nvidia-gpu-fence-insertion",
            nv.ttnvgpuir.add_fence_insertion,
            (Option("compute-capability", int, 90),),
        ),
        PassSpec(
            "triton-nvidia-gpu-proxy-fence-insertion",
            nv.ttnvgpuir.add_proxy_fence_insertion,
            (Option("compute-capability", int, 90),),
        ),
        PassSpec(
            "convert-triton-amdgpu-to-llvm",
            amd.ttgpuir.add_to_llvmir,
            (Option("arch", str, "gfx942"), Option("ftz", bool, False)),
        ),
    ]


_NAME = re.compile(r"^(?:(?:any|builtin\.module|func\.func|tt\.func)\()*([A-Za-z0-9_.\-]+)")


def _discover(lib, ctx) -> dict[str, PassSpec]:
    found: dict[str, PassSpec] = {}

    def walk(module) -> None:
        for attr in dir(module):
            value = getattr(module, attr)
            if isinstance(value, types.ModuleType):
                walk(value)
            elif attr.startswith("add_") and callable(value):
                pm = lib.ir.pass_manager(ctx)
                try:
                    value(pm)
                except TypeError:  # takes options: see OPTION_PASSES
                    continue
                match = _NAME.match(pm.get_pipeline_str())
                if match and match.group(1) not in found:
                    found[match.group(1)] = PassSpec(match.group(1), value)

    walk(lib.passes)
    walk(lib.nvidia.passes)
    walk(lib.amd.passes)
    return found


def load_passes(ctx) -> dict[str, PassSpec]:
    """MLIR pass name -> PassSpec, for the installed Triton."""
    from triton._C import libtriton as lib

    table = _discover(lib, ctx)
    for spec in _option_passes(lib):
        table[spec.name] = spec
    return table
