"""Permalinks in Redis (broker mode): the SQLite store's ids and texts (`canonical_text`,
`candidate_ids`), one key `mirai:permalink:<id>` each, never expiring. They are as durable as the
Redis they live in: run it with `appendonly yes` (`mirai serve` warns when it is off); `make
cluster` and the tests do.
"""

from __future__ import annotations

import json

from mirai.explorer.broker.connection import key, sync_client
from mirai.explorer.permalinks_store import candidate_ids, canonical_text


class RedisPermalinkStore:
    """Saves and loads page states, like `PermalinkStore`, in the broker's Redis."""

    def __init__(self, url: str) -> None:
        self.redis = sync_client(url)

    def save(self, state: dict) -> str:
        text = canonical_text(state)
        for pid in candidate_ids(text):
            # SET NX: the first state under an id keeps it; the same state again finds itself.
            if self.redis.set(key("permalink", pid), text, nx=True):
                return pid
            held = self.redis.get(key("permalink", pid))
            if held is not None and held.decode() == text:
                return pid
        raise RuntimeError("no free permalink id")  # unreachable in practice

    def load(self, pid: str) -> dict | None:
        text = self.redis.get(key("permalink", pid))
        return None if text is None else json.loads(text)

    def close(self) -> None:
        self.redis.close()
