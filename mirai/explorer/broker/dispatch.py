"""The replica's side of the queue: `RemotePool` has the methods of the embedded `WorkerPool` that
the service uses (`run`, `stats`, `start`, `close`), but sends each request through Redis to
whichever `mirai worker` takes it, and waits for its answer there (blocked on a list the worker
pushes the answer to: no polling). A client that goes away aborts its job on whatever host runs it.

Workers announce themselves in `mirai:workers` (see `node`); /health adds them up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from arq.jobs import Job as ArqJob
from arq.jobs import JobStatus as ArqStatus
from arq.jobs import ResultNotFound

from mirai.explorer.broker.connection import QUEUE, async_client, key, loads
from mirai.explorer.broker.jobs import failure_response
from mirai.explorer.errors import ExplorerError
from mirai.explorer.pool import TIMEOUT_GRACE_S, PoolStats, ServerBusy
from mirai.explorer.settings import Settings

WORKERS = key("workers")
# A waiting replica blocks on its job's answer list (no polling); every WAIT_S it also asks arq
# whether the job ended without an answer (its tries spent on lost workers) or was dropped.
WAIT_S = 1.0
ANSWER_TTL_S = 60  # an answer nobody waits for (the client left) goes after this
HEARTBEAT_S = 2.0  # how often a worker announces itself
HEARTBEAT_STALE_S = 10.0  # a worker silent this long is gone (its entry is dropped)
# arq keeps a job "in progress" for its time limit plus this, then lets another worker retry it.
ARQ_IN_PROGRESS_EXTRA_S = 10.0


def answer_key(job_id: str) -> str:
    """The list a worker pushes a job's answer to (JSON), for the replica waiting on it."""
    return key("answer", job_id)


def job_timeout_s(settings: Settings) -> float:
    """arq's limit on one run of a job: the pool stops a request at its time limit and kills its
    worker a grace later; this is past both."""
    return settings.request_timeout_s + TIMEOUT_GRACE_S + 2.0


@dataclass(frozen=True)
class Heartbeat:
    """What a worker says of itself every HEARTBEAT_S: its pool's warm workers, the busy ones, when."""

    name: str
    ready: int
    busy: int
    size: int
    at: float

    def encode(self) -> str:
        return json.dumps(self.__dict__)

    @staticmethod
    def decode(text: bytes | str) -> "Heartbeat":
        return Heartbeat(**json.loads(text))


class RemotePool:
    """The pool of a replica in broker mode: every `mirai worker` on the same Redis."""

    caches_results = True  # the workers store what they compute, under their own versions

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.redis = async_client(settings.broker)

    def start(self) -> None:
        """Nothing to start here: the workers are other processes."""

    async def close(self) -> None:
        await self.redis.aclose()

    @staticmethod
    def new_job_id() -> str:
        return uuid.uuid4().hex

    def job_life_s(self) -> float:
        """How long a job may take, queued and run: arq drops a job not taken by `queue_wait_s`."""
        return self.settings.queue_wait_s + job_timeout_s(self.settings) + ARQ_IN_PROGRESS_EXTRA_S

    async def enqueue(self, request: dict, cache_key: str, job_id: str) -> ArqJob:
        """Put the request on the queue as job `job_id`; ServerBusy when the queue is full."""
        await self._check_room()
        job = await self.redis.enqueue_job(
            "explore",
            request,
            cache_key,
            _job_id=job_id,
            _queue_name=QUEUE,
            _expires=self.settings.queue_wait_s,
        )
        if job is None:
            raise ExplorerError(f"internal error: job {job_id} exists already")
        return job

    async def run(
        self, payload: dict, on_start: Callable[[], None] | None = None, client: str = ""
    ) -> dict:
        """The answer of whichever worker takes the request (the synchronous /generate_ir)."""
        job = await self.enqueue(payload["request"], payload["cache_key"], self.new_job_id())
        try:
            return await self._answer(job)
        except asyncio.CancelledError:  # the client went away: stop the job wherever it runs
            await self.abort(job.job_id)
            raise

    async def _answer(self, job: ArqJob) -> dict:
        """The answer the worker pushes to `answer_key`, or the error arq recorded for the job."""
        deadline = time.monotonic() + self.job_life_s()
        while time.monotonic() < deadline:
            popped = await self.redis.blpop([answer_key(job.job_id)], timeout=WAIT_S)
            if popped is not None:
                return json.loads(popped[1])
            info = await job.result_info()
            if info is not None and info.success and isinstance(info.result, dict):
                return info.result
            if info is not None:  # arq ended it: its tries spent on lost workers
                return failure_response(info.result, self.settings.max_tries)
            if await job.status() == ArqStatus.not_found:  # dropped: not taken by --queue-wait
                break
        raise ExplorerError(
            "no worker answered the request",
            f"no `mirai worker` finished it within {self.job_life_s():g} s",
        )

    async def abort(self, job_id: str) -> None:
        """Tell the worker running `job_id` (or the one that would take it) to stop it."""
        job = ArqJob(job_id, self.redis, _queue_name=QUEUE, _deserializer=loads)
        with contextlib.suppress(asyncio.TimeoutError, ResultNotFound):
            await job.abort(timeout=0, poll_delay=0.01)

    async def heartbeats(self) -> list[Heartbeat]:
        """The workers alive now (stale entries are dropped)."""
        now = time.time()
        beats = [Heartbeat.decode(v) for v in (await self.redis.hgetall(WORKERS)).values()]
        stale = [b.name for b in beats if now - b.at > HEARTBEAT_STALE_S]
        if stale:
            await self.redis.hdel(WORKERS, *stale)
        return [b for b in beats if b.name not in stale]

    async def stats(self) -> PoolStats:
        beats = await self.heartbeats()
        busy = sum(b.busy for b in beats)
        in_queue = await self.redis.zcard(QUEUE)  # waiting, and running (arq keeps those there)
        return PoolStats(
            ready=sum(b.ready for b in beats), busy=busy, queued=max(0, in_queue - busy)
        )

    async def _check_room(self) -> None:
        """ServerBusy when `queue_size` jobs already wait (all workers of the cluster together)."""
        stats = await self.stats()
        if stats.queued < self.settings.queue_size:
            return
        retry = math.ceil(self.settings.request_timeout_s)
        raise ServerBusy(
            "server busy: every worker is in use and the queue is full, try again later",
            f"{stats.ready} workers, {self.settings.queue_size} queued requests;"
            f" retry in {retry} s (Retry-After)",
            retry,
        )
