"""POST /generate_ir (guide §2.1): compile user code or raw IR into the requested IR."""

from __future__ import annotations

import asyncio
from typing import Awaitable, TypeVar

from fastapi import APIRouter, Request, Response

from mirai.explorer.errors import error_response
from mirai.explorer.schemas import ErrorResponse, GenerateRequest, OkResponse
from mirai.explorer.routes.deps import ClientDep, ExplorerDep

router = APIRouter(tags=["generate"])

CACHE_HEADER = "X-Mirai-Cache"

T = TypeVar("T")


class ClientGone(Exception):
    pass


@router.post("/generate_ir", response_model=OkResponse | ErrorResponse)
async def generate_ir(
    request: GenerateRequest,
    explorer: ExplorerDep,
    client: ClientDep,
    response: Response,
    http: Request,
) -> dict:
    """{status: ok, output} or {status: error, message, detail}, always HTTP 200 (guide §2.1)."""
    try:
        result, cached = await until_disconnect(http, explorer.generate(request, client=client))
    except ClientGone:  # nobody reads this answer
        return error_response("cancelled: the client closed the connection")
    response.headers[CACHE_HEADER] = "hit" if cached else "miss"
    return result


async def until_disconnect(http: Request, work: Awaitable[T]) -> T:
    """`work`'s result; when the client closes the connection first, `work` is cancelled (a request
    waiting for a worker leaves the queue, a running one stops its worker) and ClientGone raised."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while (await http.receive())["type"] != "http.disconnect":
            pass
        task.cancel()

    watcher = asyncio.create_task(watch())
    try:
        return await task
    except asyncio.CancelledError:
        if watcher.done() and not watcher.cancelled():
            raise ClientGone from None
        raise
    finally:
        watcher.cancel()
