"""POST /generate_ir (guide §2.1): compile user code or raw IR into the requested IR."""

from __future__ import annotations

from fastapi import APIRouter, Response

from mirai.explorer.schemas import ErrorResponse, GenerateRequest, OkResponse
from mirai.explorer.routes.deps import ExplorerDep

router = APIRouter(tags=["generate"])

CACHE_HEADER = "X-Mirai-Cache"


@router.post("/generate_ir", response_model=OkResponse | ErrorResponse)
async def generate_ir(request: GenerateRequest, explorer: ExplorerDep, response: Response) -> dict:
    """{status: ok, output} or {status: error, message, detail}, always HTTP 200 (guide §2.1)."""
    result, cached = await explorer.generate(request)
    response.headers[CACHE_HEADER] = "hit" if cached else "miss"
    return result
