"""GET /version, GET /ir_types (what this server offers) and GET /health (is a worker ready)."""

from __future__ import annotations

from fastapi import APIRouter

from mirai.explorer.irtypes import IR_TYPES, IRType
from mirai.explorer.schemas import LANGUAGES, PIPELINE_FIELDS, Capabilities
from mirai.explorer.routes.deps import ExplorerDep
from mirai.explorer.tools import TOOLS
from mirai.gpu.targets import TARGETS

router = APIRouter(tags=["meta"])


def version_string() -> str:
    from mirai import __version__

    return f"mirai-explorer {__version__}"


@router.get("/version", response_model=str)
async def version(explorer: ExplorerDep) -> str:
    """A plain JSON string, like the guide's `"ir-backend 1.1.0-rust"`, followed by whether requests
    run in the sandbox: `"mirai-explorer 0.3.0 (sandbox bubblewrap 0.8.0)"` or `(sandbox off)`."""
    return f"{version_string()} ({explorer.sandbox_state})"


@router.get("/ir_types", response_model=Capabilities)
@router.get("/capabilities", response_model=Capabilities, include_in_schema=False)
async def ir_types() -> dict:
    """Every ir_type with what a client shows of it (label, highlighting, languages, GPU target),
    every pipeline tool with the command it resolves to (null when it is not installed), the
    languages, the fixed order of pipeline fields, and the registered GPU targets."""
    return {
        "status": "ok",
        "ir_types": [_ir_type_info(t) for t in IR_TYPES.values()],
        "tools": [
            {"alias": t.alias, "field": t.field, "command": t.resolve(), "note": t.note}
            for t in TOOLS.values()
        ],
        "languages": list(LANGUAGES),
        "pipeline_order": list(PIPELINE_FIELDS),
        "targets": [
            {
                "name": t.name,
                "backend": t.backend,
                "triton_target": f"{t.backend}:{t.arch}",
                "cuda_target": t.name if t.backend == "cuda" else None,
                "device": t.device_name,
            }
            for t in TARGETS.values()
        ],
    }


def _ir_type_info(ir_type: IRType) -> dict:
    target = ir_type.target
    return {
        "name": ir_type.name,
        "family": ir_type.family,
        "description": ir_type.description,
        "label": ir_type.label,
        "syntax": ir_type.syntax,
        "languages": list(ir_type.languages),
        "default_for": list(ir_type.default_for),
        "target": target
        and {"field": target.field, "default": target.default, "backends": list(target.backends)},
    }


@router.get("/health")
async def health(explorer: ExplorerDep) -> dict:
    """`ready` is true while at least one worker is warm and alive, idle or running a request (never
    one being started or replaced); `workers_ready - workers_busy` are idle."""
    return await explorer.health()
