"""The server's result cache: answers of successful requests, keyed by a hash of the whole request,
forgotten per code string by /free_ir_cache.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class ResultCache:
    """Least-recently-used map from request hash to response; errors are never stored.

    >>> cache = ResultCache(max_entries=1)
    >>> cache.put("k", {"status": "ok", "output": "x"}, code="c"); cache.get("k")["output"]
    'x'
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[str, dict]] = OrderedDict()

    def get(self, key: str) -> dict | None:
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key][1]

    def put(self, key: str, response: dict, *, code: str) -> None:
        if self.max_entries <= 0 or response.get("status") != "ok":
            return
        self._entries[key] = (code_hash(code), response)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def drop_code(self, code: str) -> int:
        """Forget every result of requests with this code; how many there were."""
        digest = code_hash(code)
        stale = [key for key, (owner, _) in self._entries.items() if owner == digest]
        for key in stale:
            del self._entries[key]
        return len(stale)

    def __len__(self) -> int:
        return len(self._entries)
