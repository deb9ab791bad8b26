"""Permalink routes of the explorer page: POST /permalinks saves a page state, GET /permalinks/<id>
gives it back. Bad input is answered in the integration guide's error shape.

    POST /permalinks        {"state": {...}}   -> {"status": "ok", "id": "3xK9..."}
    GET  /permalinks/3xK9..                    -> {"status": "ok", "id": "3xK9...", "state": {...}}
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from mirai.explorer.errors import error_response
from mirai.explorer.permalinks_store import MAX_STATE_BYTES, StateTooLarge, is_valid_id
from mirai.explorer.routes.deps import StoreDep

router = APIRouter(tags=["permalinks"])


def _error(http_status: int, message: str, detail: str = "") -> JSONResponse:
    return JSONResponse(error_response(message, detail), status_code=http_status)


@router.post("/permalinks", summary="Save a page state under a short id")
async def create_permalink(request: Request, store: StoreDep) -> JSONResponse:
    """Body `{"state": <object>}`; answers `{"status": "ok", "id": <id>}`."""
    raw = await request.body()
    if len(raw) > MAX_STATE_BYTES + 1024:
        return _error(413, "page state too large", f"{len(raw)} bytes, limit {MAX_STATE_BYTES}")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return _error(400, "malformed JSON", str(err))
    except RecursionError:
        return _error(400, "malformed JSON: nested too deep", "deeper than the parser allows")
    if not isinstance(body, dict) or not isinstance(body.get("state"), dict):
        return _error(400, "expected a JSON object with a 'state' object", "")
    try:
        # In a thread: the store may wait on its database (SQLite's lock, a Redis reconnecting).
        pid = await run_in_threadpool(store.save, body["state"])
    except StateTooLarge as err:
        return _error(413, "page state too large", str(err))
    return JSONResponse({"status": "ok", "id": pid})


@router.get("/permalinks/{pid}", summary="The page state saved under an id")
def read_permalink(pid: str, store: StoreDep) -> JSONResponse:
    """Answers `{"status": "ok", "id": <id>, "state": <object>}`."""
    if not is_valid_id(pid):
        return _error(400, "malformed permalink id", f"{pid!r} is not a permalink id")
    state = store.load(pid)
    if state is None:
        return _error(404, "permalink not found", f"no page state is saved under {pid!r}")
    return JSONResponse({"status": "ok", "id": pid, "state": state})
