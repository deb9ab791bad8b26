"""POST /free_ir_cache (guide §2.2): forget what was cached for a code string."""

from __future__ import annotations

from fastapi import APIRouter

from mirai.explorer.schemas import FreeCacheRequest, StatusOk
from mirai.explorer.routes.deps import ExplorerDep

router = APIRouter(tags=["cache"])


@router.post("/free_ir_cache", response_model=StatusOk)
async def free_ir_cache(request: FreeCacheRequest, explorer: ExplorerDep) -> dict:
    """Forget the cached results of `code` (keyed by the raw code string). Its Triton cache lived in
    its request's own folder and was removed when the request ended."""
    await explorer.free(request.code)
    return {"status": "ok"}
