"""Where the service's state lives, chosen once from the settings: embedded (this process's worker
pool, result cache and jobs, SQLite permalinks; the default, nothing else to run) or broker (Redis
through `--broker`, shared by every replica and `mirai worker`). `create_app` asks for one and
hands its parts to the routes.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirai.explorer.jobs import Jobs, JobStore
from mirai.explorer.permalinks_store import Permalinks, PermalinkStore
from mirai.explorer.service import Explorer
from mirai.explorer.settings import Settings


@dataclass(frozen=True)
class Backend:
    """The service, its jobs and its permalink store; `outages` are the exception types that mean
    the state's store is unreachable (answered as such, not as an internal error)."""

    name: str
    explorer: Explorer
    jobs: Jobs
    permalinks: Permalinks
    outages: tuple[type[BaseException], ...] = ()

    async def close(self) -> None:
        await self.jobs.close()
        await self.explorer.close()
        getattr(self.permalinks, "close", lambda: None)()


def embedded(settings: Settings) -> Backend:
    explorer = Explorer(settings)
    return Backend(
        "embedded", explorer, JobStore(explorer, settings), PermalinkStore(settings.permalinks_db)
    )


def broker(settings: Settings) -> Backend:
    from redis.exceptions import RedisError

    from mirai.explorer.broker.connection import check_url
    from mirai.explorer.broker.dispatch import RemotePool
    from mirai.explorer.broker.jobs import RedisJobStore
    from mirai.explorer.broker.permalinks import RedisPermalinkStore
    from mirai.explorer.broker.results import RedisResults

    check_url(settings.broker)
    pool = RemotePool(settings)
    explorer = Explorer(
        settings, pool=pool, results=RedisResults(pool.redis, settings.cache_entries)
    )
    return Backend(
        "broker",
        explorer,
        RedisJobStore(explorer, settings),
        RedisPermalinkStore(settings.broker),
        outages=(RedisError,),
    )


def make_backend(settings: Settings) -> Backend:
    """Broker mode when `settings.broker` names a Redis, else the embedded default."""
    return broker(settings) if settings.broker else embedded(settings)
