"""The result cache in Redis, shared by every replica and worker: the embedded cache's map (request
cache key -> successful response) with the same methods and the same least-recently-used bound
(`--cache-entries`, counted over the whole cluster).

A result is stored under the versions of the worker that made it (`connection.versions_tag`) and
looked up under the replica's: hosts with other torch/Triton/torch-mlir/mirai versions never hand
each other results.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis

from mirai.explorer.broker.connection import key, versions_tag
from mirai.explorer.cache import code_hash

INDEX = key("results")


class RedisResults:
    def __init__(self, redis: Redis, max_entries: int, versions: str | None = None) -> None:
        self.redis = redis
        self.max_entries = max_entries
        self.versions = versions or versions_tag()

    def _key(self, cache_key: str) -> str:
        return key("result", self.versions, cache_key)

    async def get(self, cache_key: str) -> dict | None:
        name = self._key(cache_key)
        text = await self.redis.get(name)
        if text is None:
            return None
        await self.redis.zadd(INDEX, {name: await self._now()}, xx=True)
        return json.loads(text)

    async def put(self, cache_key: str, response: dict, *, code: str) -> None:
        if self.max_entries <= 0 or response.get("status") != "ok":
            return
        name = self._key(cache_key)
        async with self.redis.pipeline(transaction=True) as tx:
            tx.set(name, json.dumps(response))
            tx.zadd(INDEX, {name: await self._now()})
            tx.sadd(key("results-of", code_hash(code)), name)
            await tx.execute()
        await self._trim()

    async def drop_code(self, code: str) -> int:
        """Forget every result of requests with this code (all versions); how many there were."""
        owner = key("results-of", code_hash(code))
        names = await self.redis.smembers(owner)
        if names:
            async with self.redis.pipeline(transaction=True) as tx:
                tx.delete(*names)
                tx.zrem(INDEX, *names)
                tx.delete(owner)
                await tx.execute()
        return len(names)

    async def count(self) -> int:
        return await self.redis.zcard(INDEX)

    async def _trim(self) -> None:
        """Drop the least recently used results past `max_entries`."""
        extra = await self.redis.zcard(INDEX) - self.max_entries
        if extra > 0:
            oldest = [name for name, _ in await self.redis.zpopmin(INDEX, extra)]
            if oldest:
                await self.redis.delete(*oldest)

    async def _now(self) -> float:
        """Redis's clock (hosts' clocks may differ), in seconds."""
        seconds, micros = await self.redis.time()
        return seconds + micros / 1e6
