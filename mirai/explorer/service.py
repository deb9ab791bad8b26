"""The explorer service behind the routes: cache lookup, then a worker (in the client's turn); results
of successful requests are cached (and dropped on /free_ir_cache).

Triton's on-disk cache is not shared between requests: each request compiles in its own folder, which
is removed when it ends, so one request's files can never feed another's answer. The guide's
/free_ir_cache (keyed by the raw code string) then frees the code's cached results.

Where requests run and where results are kept is given to it: the embedded default is this
process's `WorkerPool` and `ResultCache`; broker mode (`mirai.explorer.broker`) hands it a pool that
sends requests through Redis to `mirai worker` hosts and a result cache in Redis, with the same
methods.

Routes get it as `ExplorerDep` (mirai.explorer.routes.deps).
"""

from __future__ import annotations

import shutil
from typing import Callable


from mirai.explorer import sandbox
from mirai.explorer.cache import ResultCache
from mirai.explorer.errors import ExplorerError
from mirai.explorer.irtypes import lookup
from mirai.explorer.pipeline import check_stages, stages_of
from mirai.explorer.pool import ServerBusy, WorkerPool
from mirai.explorer.schemas import GenerateRequest
from mirai.explorer.settings import Settings


class Explorer:
    """One per app: the worker pool and the result cache (this process's unless given others)."""

    def __init__(self, settings: Settings, pool=None, results=None) -> None:
        self.settings = settings
        self.pool = pool or WorkerPool(settings)
        self.sandbox_state = sandbox.describe(settings.sandbox)
        self.results = results or ResultCache(settings.cache_entries)

    def start(self) -> None:
        self.pool.start()

    async def close(self) -> None:
        """Stop the workers; remove what the server wrote under the cache dir (and the dir if empty)."""
        await self.pool.close()
        shutil.rmtree(self.settings.cache_dir / "logs", ignore_errors=True)
        shutil.rmtree(self.settings.cache_dir / "scratch", ignore_errors=True)
        try:
            self.settings.cache_dir.rmdir()
        except OSError:
            pass

    async def generate(
        self,
        request: GenerateRequest,
        on_start: Callable[[], None] | None = None,
        client: str = "",
    ) -> tuple[dict, bool]:
        """(response in the guide's shape, whether it came from the cache). `client` (the client's
        address) is whose turn the request waits for. Raises ServerBusy when the queue is full: the
        app answers it in the guide's shape with a Retry-After header."""
        ready, cached = await self.ready_answer(request)
        if ready is not None:
            return ready, cached
        key = request.cache_key()
        payload = {"request": request.model_dump(), "cache_key": key}
        try:
            response = await self.pool.run(payload, on_start, client)
        except ServerBusy:
            raise
        except ExplorerError as err:
            return err.as_response(), False
        if not self.pool.caches_results:
            await self.results.put(key, response, code=request.code)
        return response, False

    async def ready_answer(self, request: GenerateRequest) -> tuple[dict | None, bool]:
        """The answer that needs no worker, if there is one: a refusal (an unknown IR type, tool
        flags the policy refuses) or a cached result; and whether it came from the cache."""
        try:
            lookup(request.ir_type)
            # Refused tool flags are answered here, without a worker (the worker checks again).
            check_stages(stages_of(request.model_dump()), self.settings.user_tool_allowlist())
        except ExplorerError as err:
            return err.as_response(), False
        cached = await self.results.get(request.cache_key())
        return cached, cached is not None

    async def free(self, code: str) -> None:
        """Drop the code's cached results (/free_ir_cache); its Triton files went with its request."""
        await self.results.drop_code(code)

    async def health(self) -> dict:
        """GET /health: whether a worker is ready, how many are busy, queued requests, results."""
        stats = await self.pool.stats()
        return {
            "status": "ok",
            "ready": stats.ready > 0,
            "workers_ready": stats.ready,
            "workers_busy": stats.busy,
            "queued": stats.queued,
            "cached_results": await self.results.count(),
        }
