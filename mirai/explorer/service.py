"""The explorer service behind the routes: cache lookup, then a worker (in the client's turn); results
of successful requests are cached (and dropped on /free_ir_cache).

Triton's on-disk cache is not shared between requests: each request compiles in its own folder, which
is removed when it ends, so one request's files can never feed another's answer. The guide's
/free_ir_cache (keyed by the raw code string) then frees the code's cached results.

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
    """One per app: the worker pool and the caches."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = WorkerPool(settings)
        self.sandbox_state = sandbox.describe(settings.sandbox)
        self.results = ResultCache(settings.cache_entries)

    def start(self) -> None:
        self.pool.start()

    async def close(self) -> None:
        """Stop the workers; remove what the server wrote under the cache dir (and the dir if empty)."""
        await self.pool.close()
        shutil.rmtree(self.pool.log_dir, ignore_errors=True)
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
        try:
            lookup(request.ir_type)
            # Refused tool flags are answered here, without a worker (the worker checks again).
            check_stages(stages_of(request.model_dump()), self.settings.user_tool_allowlist())
        except ExplorerError as err:
            return err.as_response(), False
        key = request.cache_key()
        cached = self.results.get(key)
        if cached is not None:
            return cached, True
        payload = {
            "request": request.model_dump(),
        }
        try:
            response = await self.pool.run(payload, on_start, client)
        except ServerBusy:
            raise
        except ExplorerError as err:
            return err.as_response(), False
        self.results.put(key, response, code=request.code)
        return response, False

    def free(self, code: str) -> None:
        """Drop the code's cached results (/free_ir_cache); its Triton files went with its request."""
        self.results.drop_code(code)
