"""The app factory: assembles settings, the service, routers, CORS, the body size limit, error
handlers (every failure in the guide's shape) and the web page.

from mirai.explorer.app import create_app
from mirai.explorer.settings import Settings
app = create_app(Settings(workers=1))     # then: uvicorn.run(app)
"""

from __future__ import annotations

import re
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from mirai.explorer.backend import make_backend
from mirai.explorer.errors import ExplorerError, error_response
from mirai.explorer.routes import ROUTERS
from mirai.explorer.routes.meta import version_string
from mirai.explorer.settings import Settings

PLACEHOLDER_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>mirai explorer</title></head>
<body><h1>mirai explorer</h1>
<p>The web page is not built. Build it with <code>make web</code>; the API works without it:
see <a href="/docs">/docs</a>.</p></body></html>
"""


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    backend = make_backend(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        backend.explorer.start()
        yield
        await backend.close()

    app = FastAPI(
        title="mirai explorer",
        version=version_string().split()[-1],
        description="PyTorch / Triton / raw IR -> any IR, with optional pass pipelines.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.explorer = backend.explorer
    app.state.jobs = backend.jobs
    app.state.permalinks = backend.permalinks
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_bytes=int(settings.max_body_mb * 1024 * 1024))
    # The guide's CORS is `*`: the sandbox confines whatever any page sends. Without it, loopback
    # pages only (and LocalOnlyMiddleware refuses the rest before anything runs).
    cors = {"allow_origins": ["*"]} if settings.sandbox else {"allow_origin_regex": LOCAL_ORIGIN}
    app.add_middleware(CORSMiddleware, allow_methods=["*"], allow_headers=["*"], **cors)
    if not settings.sandbox:
        app.add_middleware(LocalOnlyMiddleware)  # added last: the outermost
    _add_error_handlers(app)
    _add_outage_handler(app, backend.outages)
    for router in ROUTERS:
        app.include_router(router)
    _add_page(app, settings)
    return app


# An origin or Host on this machine's loopback: localhost, 127.0.0.0/8 or [::1], any port.
LOCAL_HOST = r"(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d{1,5})?"
LOCAL_ORIGIN = rf"https?://{LOCAL_HOST}"


class LocalOnlyMiddleware:
    """With the sandbox off (--no-sandbox) user code runs unconfined, and the guide's CORS `*` would
    let any web page the user visits POST code to this server. So answer only requests that come
    from this machine's loopback: a Host header that names it (a DNS-rebinding page reaches
    127.0.0.1 under its own domain name) and no Origin but a loopback one (a page's cross-origin
    text/plain POST runs even when CORS hides the answer). Others get 403 in the guide's shape."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin", b"").decode("latin-1")
        why = ""
        if not re.fullmatch(LOCAL_HOST, host):
            why = f"Host {host!r} is not this machine's loopback"
        elif origin and not re.fullmatch(LOCAL_ORIGIN, origin):
            why = f"Origin {origin!r} is not a page on this machine's loopback"
        if not why:
            await self.app(scope, receive, send)
            return
        body = error_response(
            "refused: the sandbox is off (--no-sandbox), so this server answers requests from "
            "this machine's loopback only",
            why,
        )
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await JSONResponse(body, status_code=403)(scope, receive, send)


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


class BodyTooLarge(HTTPException):
    """A request body past the limit (raised while it is read; answered 413 in the guide's shape)."""

    def __init__(self, max_bytes: int, content_length: int | None = None) -> None:
        got = f"{content_length} bytes" if content_length is not None else "a longer stream"
        super().__init__(
            413, f"the server accepts at most {max_bytes} bytes (--max-body-mb); got {got}"
        )


class BodyLimitMiddleware:
    """Answer 413 to a request whose body is larger than `max_bytes`: at once when its Content-Length
    says so (the body is never read), or as soon as a streamed (chunked) body grows past it. What the
    client still sends is dropped by the server as it arrives, never held in memory."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            too_large = BodyTooLarge(self.max_bytes, int(length))
            await _body_too_large(too_large)(scope, receive, send)
            return
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched_send(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge as too_large:  # the app's handler answers it; this is for reads outside
            if started:
                raise
            await _body_too_large(too_large)(scope, receive, send)


def _body_too_large(err: BodyTooLarge) -> JSONResponse:
    return JSONResponse(error_response("request body too large", err.detail), status_code=413)


def _body_error(cause: BaseException) -> dict:
    """The answer to a body that FastAPI could not parse as JSON (it raises HTTP 400 with no word on
    why): a body nested deeper than the parser goes, or one that is not text."""
    if isinstance(cause, RecursionError):
        return error_response(
            "malformed JSON in the request body: nested too deep",
            "arrays or objects nest deeper than the JSON parser allows (about 1000 levels)",
        )
    return error_response("malformed JSON in the request body", f"{type(cause).__name__}: {cause}")


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ExplorerError)
    async def explorer_error(request: Request, err: ExplorerError) -> JSONResponse:
        return JSONResponse(err.as_response(), status_code=err.http_status, headers=err.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> JSONResponse:
        if isinstance(err, BodyTooLarge):
            return _body_too_large(err)
        if err.status_code == 400 and err.__cause__ is not None:  # "error parsing the body"
            # Clients read `status`, like for the other malformed bodies (invalid_request below).
            return JSONResponse(_body_error(err.__cause__), status_code=200)
        message = f"{err.detail}: {request.method} {request.url.path}"
        return JSONResponse(
            error_response(message), status_code=err.status_code, headers=err.headers
        )

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


# The guide answers its endpoints' failures with HTTP 200; elsewhere an outage is a 503.
GUIDE_PATHS = ("/generate_ir", "/free_ir_cache", "/jobs")


def _add_outage_handler(app: FastAPI, outages: tuple[type[BaseException], ...]) -> None:
    """Broker mode: Redis out of reach is answered "broker unavailable", with Retry-After."""
    if not outages:
        return
    from mirai.explorer.broker.connection import BrokerUnavailable  # only broker mode has outages

    async def unavailable(request: Request, err: Exception) -> JSONResponse:
        answer = BrokerUnavailable(err)
        guide = request.method == "POST" and request.url.path in GUIDE_PATHS
        return JSONResponse(
            answer.as_response(), status_code=200 if guide else 503, headers=answer.headers
        )

    for outage in outages:
        app.add_exception_handler(outage, unavailable)


def _add_page(app: FastAPI, settings: Settings) -> None:
    """The built web page at / when it exists, else a page saying how to build it."""
    if (settings.static_dir / "index.html").is_file():
        app.mount("/", StaticFiles(directory=settings.static_dir, html=True), name="page")
        return

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def placeholder() -> str:
        return PLACEHOLDER_PAGE
