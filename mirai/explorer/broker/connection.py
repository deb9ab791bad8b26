"""The connection to the broker: clients for a redis:// URL that ride out a Redis restart, the
names of mirai's keys, the versions that tag cached results, and the error Redis trouble becomes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import metadata

from arq.connections import ArqRedis
from redis import Redis
from redis.asyncio import ConnectionPool as AsyncConnectionPool
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from mirai.explorer.errors import ExplorerError

QUEUE = "mirai:queue"
PREFIX = "mirai:"
# A command that finds Redis gone is retried with a growing pause (0.05 s to 1 s) for about 10 s,
# long enough for a restart; past that the caller gets BrokerUnavailable.
RETRIES = 14
SOCKET_TIMEOUT_S = 5.0
# Packages whose versions change what a request answers: a cached result is tagged with them.
VERSIONED = ("mirai-compiler", "torch", "triton", "torch-mlir")


class BrokerUnavailable(ExplorerError):
    """Redis could not be reached (answered in the guide's shape; HTTP 503 outside the guide's
    endpoints)."""

    def __init__(self, err: BaseException) -> None:
        super().__init__(
            "broker unavailable: the explorer's Redis could not be reached, try again later",
            f"{type(err).__name__}: {err}",
            headers={"Retry-After": "5"},
        )


REDIS_ERRORS = (RedisError, OSError)


def _client_options(retry_type: type = Retry) -> dict:
    """Options of either client; `retry_type` is redis-py's Retry of its kind (sync or asyncio)."""
    return {
        "retry": retry_type(ExponentialBackoff(cap=1.0, base=0.05), RETRIES),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError, ConnectionError, OSError],
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": SOCKET_TIMEOUT_S,
        "health_check_interval": 10,
    }


def async_client(url: str) -> ArqRedis:
    """An asyncio client (arq's, a redis.asyncio.Redis that also enqueues jobs) on mirai's queue.
    It connects on first use and reconnects after a Redis restart."""
    pool = AsyncConnectionPool.from_url(url, **_client_options(AsyncRetry))
    return ArqRedis(pool, job_serializer=dumps, job_deserializer=loads, default_queue_name=QUEUE)


class RemoteFailure(Exception):
    """An exception arq recorded for a job (on another host), as its type's name and message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def dumps(value) -> bytes:
    """arq's job and result serializer: JSON (never pickle: no host runs what Redis hands it); an
    exception arq records becomes {"__exception__": type name, "message": text}."""

    def encode(obj):
        if isinstance(obj, BaseException):
            return {"__exception__": getattr(obj, "kind", type(obj).__name__), "message": str(obj)}
        raise TypeError(f"{type(obj).__name__} is not JSON")

    return json.dumps(value, default=encode).encode()


def loads(data: bytes):
    def decode(obj: dict):
        if "__exception__" in obj and len(obj) == 2:
            return RemoteFailure(obj["__exception__"], obj["message"])
        return obj

    return json.loads(data, object_hook=decode)


def sync_client(url: str) -> Redis:
    """A blocking client, for the permalink store (its routes are plain functions)."""
    return Redis.from_url(url, **_client_options())


def check_url(url: str) -> str:
    """`url` if it is a redis:// (or rediss://, unix://) URL, else ExplorerError saying what is."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ExplorerError(
            f"--broker must be a redis:// URL, not {url!r}", "e.g. redis://127.0.0.1:6379/0"
        )
    return url


def key(*parts: str) -> str:
    """A key of mirai's: `mirai:` and the parts joined by ':'."""
    return PREFIX + ":".join(parts)


def versions_tag() -> str:
    """12 hex digits naming the versions of VERSIONED installed here (a result made with other
    versions is another result)."""
    found = []
    for name in VERSIONED:
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return hashlib.sha256(";".join(found).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Durability:
    """What Redis says of its persistence (CONFIG GET appendonly), or why it said nothing."""

    appendonly: bool | None  # None: unknown (`problem` says why)
    problem: str = ""

    def warning(self) -> str:
        if self.appendonly:
            return ""
        if self.appendonly is None:
            return (
                f"could not ask the broker's Redis whether it persists permalinks: {self.problem}"
            )
        return (
            "the broker's Redis runs with appendonly off: permalinks may not survive a restart"
            " (run it with appendonly yes)"
        )


def durability(client: Redis) -> Durability:
    try:
        value = client.config_get("appendonly").get("appendonly")
    except RedisError as err:  # unreachable now, or CONFIG disabled (managed services)
        return Durability(None, f"{type(err).__name__}: {err}")
    return Durability(value in ("yes", b"yes"))
