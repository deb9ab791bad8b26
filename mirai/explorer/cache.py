"""The server's result cache: answers of successful requests, keyed by a hash of the whole request,
forgotten per code string by /free_ir_cache.

`ResultCache` is the embedded one (in the server's memory); `mirai.explorer.broker.results` keeps the
same map in Redis for every replica. Both have the same async methods (`get`, `put`, `drop_code`,
`count`), so the service uses either without knowing which.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class ResultCache:
    """Least-recently-used map from request hash to response; errors are never stored.

    >>> import asyncio
    >>> from concurrent.futures import ThreadPoolExecutor  # a loop of its own, whoever calls
    >>> def run(coroutine):
    ...     return ThreadPoolExecutor(1).submit(asyncio.run, coroutine).result()
    >>> cache = ResultCache(max_entries=1)
    >>> run(cache.put("k", {"status": "ok", "output": "x"}, code="c"))
    >>> run(cache.get("k"))["output"]
    'x'
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[str, dict]] = OrderedDict()

    async def get(self, key: str) -> dict | None:
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key][1]

    async def put(self, key: str, response: dict, *, code: str) -> None:
        if self.max_entries <= 0 or response.get("status") != "ok":
            return
        self._entries[key] = (code_hash(code), response)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    async def drop_code(self, code: str) -> int:
        """Forget every result of requests with this code; how many there were."""
        digest = code_hash(code)
        stale = [key for key, (owner, _) in self._entries.items() if owner == digest]
        for key in stale:
            del self._entries[key]
        return len(stale)

    async def count(self) -> int:
        """Results held."""
        return len(self._entries)
