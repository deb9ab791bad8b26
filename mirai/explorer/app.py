"""The app factory: assembles settings, the service, routers, CORS, error handlers and the web page.

from mirai.explorer.app import create_app
from mirai.explorer.settings import Settings
app = create_app(Settings(workers=1))     # then: uvicorn.run(app)
"""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from mirai.explorer.errors import ExplorerError, error_response
from mirai.explorer.jobs import JobStore
from mirai.explorer.permalinks_store import PermalinkStore
from mirai.explorer.routes import ROUTERS
from mirai.explorer.routes.meta import version_string
from mirai.explorer.service import Explorer
from mirai.explorer.settings import Settings

PLACEHOLDER_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mirai explorer</title></head>
<body><h1>mirai explorer</h1>
<p>The web page is not built. Build it with <code>make web</code>; the API works without it:
see <a href="/docs">/docs</a>.</p></body></html>
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.explorer.start()
        yield
        await app.state.jobs.close()
        await app.state.explorer.close()

    app = FastAPI(
        title="mirai explorer",
        version=version_string().split()[-1],
        description="PyTorch / Triton / raw IR -> any IR, with optional pass pipelines.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.explorer = Explorer(settings)
    app.state.jobs = JobStore(app.state.explorer, settings)
    app.state.permalinks = PermalinkStore(settings.permalinks_db)
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(
        CORSMiddleware, allow_origins=["*"], allow_methods=["*"], allow_headers=["*"]
    )
    _add_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    _add_page(app, settings)
    return app


class JsonBodyMiddleware:
    """Read a POST body as JSON whatever its Content-Type says: curl's default form type, or the
    text/plain that browser clients send to avoid a CORS preflight, still reach the JSON API."""

    LENIENT = (b"", b"text/plain", b"application/x-www-form-urlencoded")

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            kind = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip().lower()
            if kind in self.LENIENT:
                headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
                scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ExplorerError)
    async def explorer_error(request: Request, err: ExplorerError) -> JSONResponse:
        return JSONResponse(err.as_response(), status_code=err.http_status, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, err: RequestValidationError) -> JSONResponse:
        # Clients read `status`, never a 422: the guide answers every failure with 200.
        errors = err.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            message = "malformed JSON in the request body"
        else:
            fields = ", ".join(".".join(str(p) for p in e.get("loc", ())[1:]) for e in errors)
            message = f"invalid request: {fields or 'body'}"
        detail = "\n".join(
            f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in errors
        )
        return JSONResponse(error_response(message, detail), status_code=200)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, err: Exception) -> JSONResponse:
        message = f"internal error: {type(err).__name__}: {err}"
        return JSONResponse(error_response(message), status_code=500)


def _add_page(app: FastAPI, settings: Settings) -> None:
    """The built web page at / when it exists, else a page saying how to build it."""
    if (settings.static_dir / "index.html").is_file():
        app.mount("/", StaticFiles(directory=settings.static_dir, html=True), name="page")
        return

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def placeholder() -> str:
        return PLACEHOLDER_PAGE
