"""The worker's side of the queue (`mirai worker --broker ...`): the embedded, sandboxed
`WorkerPool` of this host, fed by arq from Redis. arq takes at most as many jobs as the pool has
workers, so the rest wait in Redis for whichever host frees up first. Each job's answer goes into
the shared result cache (under this host's versions) and, for a POST /jobs job, into its record.

Faults: a job whose host dies (killed, or gone with its machine) stays "in progress" in arq until
its time limit and arq's margin have passed, then another worker runs it again, up to `--max-tries`
runs, after which it fails with the guide's error. A stopped worker (SIGTERM, Ctrl-C) hands its
running jobs back at once. When Redis goes away the worker keeps retrying until it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import time

from arq import Worker, func

from mirai.explorer.broker.connection import QUEUE, REDIS_ERRORS, async_client, dumps, key, loads
from mirai.explorer.broker.dispatch import (
    ANSWER_TTL_S,
    HEARTBEAT_S,
    WORKERS,
    Heartbeat,
    answer_key,
    job_timeout_s,
)
from mirai.explorer.broker.jobs import JobRecords, final_state
from mirai.explorer.broker.results import RedisResults
from mirai.explorer.errors import ExplorerError, error_response
from mirai.explorer.pool import READY_TIMEOUT_S, WorkerPool
from mirai.explorer.settings import Settings

log = logging.getLogger("mirai.explorer")

RECONNECT_S = 1.0
# How often arq looks for jobs: a job waits about half this before a free worker takes it; an idle
# worker's polling costs about 5% of a core at 20 ms (9% at 10 ms) on these machines.
POLL_S = 0.02


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class WorkerNode:
    """This host's pool, and what it writes to Redis: heartbeats, results, job records."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.settings = settings
        self.name = name
        self.redis = async_client(settings.broker)
        self.pool = WorkerPool(settings)
        self.results = RedisResults(self.redis, settings.cache_entries)
        self.records = JobRecords(self.redis, settings.job_ttl_s)
        self._heartbeat: asyncio.Task | None = None

    async def start(self) -> None:
        """Start the pool and wait until all its workers are warm (no job is taken before)."""
        self.pool.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self.pool.ready_workers() < self.settings.workers:
            if self.pool.started_workers == 0 and self.pool.start_error and not self.pool.workers:
                raise ExplorerError("no worker could be started", self.pool.start_error)
            if time.monotonic() > deadline:
                raise ExplorerError("workers not warm", f"after {READY_TIMEOUT_S:g} s")
            await asyncio.sleep(0.2)
        self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def explore(self, job_id: str, request: dict, cache_key: str) -> dict:
        """Run one request on this host's pool; record and cache its answer."""
        if await self.records.state(job_id) == "cancelled":
            return error_response("cancelled")
        await self.records.start(job_id, self.name)
        try:
            response = await self.pool.run({"request": request}, client=job_id)
        except ExplorerError as err:
            response = err.as_response()
        await self.results.put(cache_key, response, code=request.get("code", ""))
        await self.records.finish(job_id, final_state(response), response)
        async with self.redis.pipeline(transaction=True) as tx:  # to the replica waiting, if any
            tx.rpush(answer_key(job_id), json.dumps(response))
            tx.expire(answer_key(job_id), ANSWER_TTL_S)
            await tx.execute()
        return response

    async def _beat(self) -> None:
        while True:
            stats = await self.pool.stats()
            beat = Heartbeat(self.name, stats.ready, stats.busy, self.settings.workers, time.time())
            try:
                await self.redis.hset(WORKERS, self.name, beat.encode())
            except REDIS_ERRORS as err:
                log.warning("heartbeat not sent: %s", err)
            await asyncio.sleep(HEARTBEAT_S)

    async def close(self) -> None:
        if self._heartbeat:
            self._heartbeat.cancel()
        try:
            await asyncio.wait_for(self.redis.hdel(WORKERS, self.name), 2)
        except (asyncio.TimeoutError, *REDIS_ERRORS):
            pass
        await self.pool.close()
        for worker in list(self.pool.workers):  # reaped before the loop closes
            if worker.proc is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(worker.proc.wait(), 5)
        shutil.rmtree(self.settings.cache_dir / "logs", ignore_errors=True)
        shutil.rmtree(self.settings.cache_dir / "scratch", ignore_errors=True)
        await self.redis.aclose()


async def explore(ctx: dict, request: dict, cache_key: str) -> dict:
    """The arq function every replica enqueues (by this name)."""
    return await ctx["node"].explore(ctx["job_id"], request, cache_key)


def make_worker(node: WorkerNode) -> Worker:
    settings = node.settings
    return Worker(
        functions=[func(explore, name="explore", max_tries=settings.max_tries)],
        redis_pool=node.redis,
        queue_name=QUEUE,
        max_jobs=settings.workers,
        job_timeout=job_timeout_s(settings),
        keep_result=settings.job_ttl_s,
        max_tries=settings.max_tries,
        allow_abort_jobs=True,
        handle_signals=False,
        poll_delay=POLL_S,
        health_check_key=key("arq-health", node.name),
        ctx={"node": node},
        job_serializer=dumps,
        job_deserializer=loads,
    )


async def serve(settings: Settings, name: str | None = None) -> None:
    """Run a worker node until SIGTERM or SIGINT; through Redis outages it reconnects."""
    node = WorkerNode(settings, name or default_name())
    worker: Worker | None = None
    stopping = False

    def stop(sig: signal.Signals) -> None:
        nonlocal stopping
        stopping = True
        worker.handle_sig(sig)  # arq's: cancels the jobs and this task

    try:
        await node.start()
        worker = make_worker(node)
        worker.main_task = asyncio.current_task()  # what arq's shutdown cancels
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop, sig)
        log.info("worker %s: %d warm workers, taking jobs", node.name, settings.workers)
        while True:
            try:
                await worker.main()
                return
            except REDIS_ERRORS as err:
                if stopping:
                    # Told to stop as the broker went away (make cluster stops both at once):
                    # the cancellation can surface as the broker's error, not as CancelledError.
                    log.info("worker %s stopped; the broker had gone (%s)", node.name, err)
                    return
                log.warning("worker %s lost the broker (%s); reconnecting", node.name, err)
                await asyncio.sleep(RECONNECT_S)
    except asyncio.CancelledError:
        # Stopped: arq hands the running jobs back to the queue (another worker takes them).
        tasks = [t for t in (worker.tasks if worker else {}).values() if not t.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=5)
    finally:
        await node.close()
