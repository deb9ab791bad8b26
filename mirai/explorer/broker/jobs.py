"""Jobs in Redis: a POST /jobs job's record (`mirai:job:<id>`), written by the replica that took it
and by the worker that runs it, read and cancelled from any replica. A replica that dies takes
nothing with it: the worker writes the result into the record.

The record's state only moves forward (queued -> running -> done | failed | cancelled); the moves
are Lua scripts, so a cancel and a worker's answer that cross leave one of them, never a mix. A
record whose job arq finished without the worker writing it (its tries spent on lost workers) or
lost (never taken within `--queue-wait`) is settled when it is read, with an error in the guide's
shape.
"""

from __future__ import annotations

import json
import time

from arq.jobs import Job as ArqJob
from arq.jobs import JobStatus as ArqStatus
from redis.asyncio import Redis

from mirai.explorer.broker.connection import QUEUE, key, loads
from mirai.explorer.errors import ExplorerError, error_response
from mirai.explorer.jobs import FINISHED, unknown_job
from mirai.explorer.schemas import GenerateRequest, JobStatus
from mirai.explorer.service import Explorer
from mirai.explorer.settings import Settings

# A record younger than this may not have its arq job yet (POST /jobs writes the record first).
SETTLE_AFTER_S = 5.0
# KEYS[1] the record; ARGV: worker. Running, unless the job has finished (e.g. cancelled).
_START = """
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'queued' and state ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'running', 'worker', ARGV[1])
return 1
"""
# KEYS[1] the record; ARGV: state, finished_at, result (JSON or ''), ttl. Once only.
_FINISH = """
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'queued' and state ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'finished_at', ARGV[2], 'result', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


def record_key(job_id: str) -> str:
    return key("job", job_id)


def final_state(response: dict) -> str:
    return "done" if response.get("status") == "ok" else "failed"


def failure_response(err: BaseException, max_tries: int) -> dict:
    """The guide's error for a job that arq finished with an exception instead of an answer."""
    kind = getattr(err, "kind", type(err).__name__)
    if kind == "JobExecutionFailed" and "retries exceeded" in str(err):
        return error_response(
            "the worker running the request was lost",
            f"its worker stopped (killed, or its host went away) on each of the {max_tries} tries"
            f" a job may have (--max-tries); arq: {err}",
        )
    return error_response(f"internal error: {kind}: {err}")


class JobRecords:
    """The records' moves, for replicas and workers alike."""

    def __init__(self, redis: Redis, ttl_s: float) -> None:
        self.redis = redis
        self.ttl_s = int(ttl_s)
        self._start = redis.register_script(_START)
        self._finish = redis.register_script(_FINISH)

    async def create(self, job_id: str, ir_type: str, life_s: float) -> None:
        name = record_key(job_id)
        async with self.redis.pipeline(transaction=True) as tx:
            tx.hset(
                name, mapping={"ir_type": ir_type, "state": "queued", "created_at": time.time()}
            )
            tx.expire(name, int(life_s) + self.ttl_s)
            await tx.execute()

    async def start(self, job_id: str, worker: str) -> bool:
        return bool(await self._start(keys=[record_key(job_id)], args=[worker]))

    async def finish(self, job_id: str, state: str, result: dict | None) -> bool:
        text = json.dumps(result) if result is not None else ""
        args = [state, time.time(), text, self.ttl_s]
        return bool(await self._finish(keys=[record_key(job_id)], args=args))

    async def state(self, job_id: str) -> str | None:
        state = await self.redis.hget(record_key(job_id), "state")
        return state.decode() if isinstance(state, bytes) else state

    async def read(self, job_id: str) -> dict:
        fields = await self.redis.hgetall(record_key(job_id))
        if not fields:
            raise unknown_job(job_id)
        return {
            (name.decode() if isinstance(name, bytes) else name): (
                value.decode() if isinstance(value, bytes) else value
            )
            for name, value in fields.items()
        }


def to_status(job_id: str, fields: dict) -> JobStatus:
    return JobStatus(
        job_id=job_id,
        state=fields["state"],
        ir_type=fields.get("ir_type", ""),
        created_at=float(fields.get("created_at", 0)),
        finished_at=float(fields["finished_at"]) if fields.get("finished_at") else None,
        result=json.loads(fields["result"]) if fields.get("result") else None,
    )


class RedisJobStore:
    """The job API's store in broker mode: submit through the replica's `RemotePool`, read and
    cancel from any replica."""

    def __init__(self, explorer: Explorer, settings: Settings) -> None:
        self.explorer = explorer
        self.settings = settings
        self.pool = explorer.pool  # a RemotePool
        self.records = JobRecords(self.pool.redis, settings.job_ttl_s)

    async def submit(self, request: GenerateRequest, client: str = "") -> str:
        job_id = self.pool.new_job_id()
        await self.records.create(job_id, request.ir_type, self.pool.job_life_s())
        ready, _ = await self.explorer.ready_answer(request)
        if ready is None:
            try:
                await self.pool.enqueue(request.model_dump(), request.cache_key(), job_id)
                return job_id
            except ExplorerError as err:  # the queue is full
                ready = err.as_response()
        await self.records.finish(job_id, final_state(ready), ready)
        return job_id

    async def status(self, job_id: str) -> JobStatus:
        fields = await self.records.read(job_id)
        if fields["state"] not in FINISHED:
            await self._settle(job_id, float(fields.get("created_at", 0)))
            fields = await self.records.read(job_id)
        return to_status(job_id, fields)

    async def cancel(self, job_id: str) -> JobStatus:
        fields = await self.records.read(job_id)
        if fields["state"] not in FINISHED:
            await self.records.finish(job_id, "cancelled", None)
            await self.pool.abort(job_id)
        return await self.status(job_id)

    async def _settle(self, job_id: str, created_at: float) -> None:
        """Finish the record of a job arq has finished or lost without the worker's answer."""
        job = ArqJob(job_id, self.pool.redis, _queue_name=QUEUE, _deserializer=loads)
        info = await job.result_info()
        if info is not None:
            result = info.result
            if info.success and isinstance(result, dict):
                await self.records.finish(job_id, final_state(result), result)
            elif getattr(result, "kind", "") != "CancelledError":  # not aborted (cancelled)
                response = failure_response(result, self.settings.max_tries)
                await self.records.finish(job_id, "failed", response)
            return
        settled = time.time() - created_at > SETTLE_AFTER_S  # enqueued by now
        if settled and await job.status() == ArqStatus.not_found:
            response = error_response(
                "no worker took the job",
                f"no `mirai worker` took it within {self.settings.queue_wait_s:g} s (--queue-wait)",
            )
            await self.records.finish(job_id, "failed", response)

    async def close(self) -> None:
        pass
