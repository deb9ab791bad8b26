"""Jobs: /generate_ir requests run in the background, for long compilations (guide §6 allows a
/status/<jobid> endpoint beside the synchronous /generate_ir, which keeps its behaviour).

States: queued (waiting for a worker) -> running -> done | failed; or cancelled at any point.

`JobStore` keeps the jobs of this process (the embedded default); `mirai.explorer.broker.jobs` keeps
them in Redis, visible from every replica, with the same async methods (`submit`, `status`,
`cancel`, `close`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from mirai.explorer.errors import ExplorerError
from mirai.explorer.schemas import GenerateRequest, JobStatus
from mirai.explorer.service import Explorer
from mirai.explorer.settings import Settings

FINISHED = ("done", "failed", "cancelled")


@dataclass
class Job:
    id: str
    ir_type: str
    state: str = "queued"
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    result: dict | None = None
    task: asyncio.Task | None = None

    def status(self) -> JobStatus:
        return JobStatus(
            job_id=self.id,
            state=self.state,
            ir_type=self.ir_type,
            created_at=self.created_at,
            finished_at=self.finished_at,
            result=self.result,
        )


class Jobs(Protocol):
    """What the job routes use: this module's `JobStore`, or broker mode's `RedisJobStore`."""

    async def submit(self, request: GenerateRequest, client: str = "") -> str: ...

    async def status(self, job_id: str) -> JobStatus: ...

    async def cancel(self, job_id: str) -> JobStatus: ...

    async def close(self) -> None: ...


def unknown_job(job_id: str) -> ExplorerError:
    """The answer to an id no job has (HTTP 404 in the guide's shape)."""
    return ExplorerError(f"no job {job_id!r}", "it never existed or has expired", http_status=404)


class JobStore:
    """Jobs by id; finished ones are forgotten after `job_ttl_s` or when more than `max_jobs`."""

    def __init__(self, explorer: Explorer, settings: Settings) -> None:
        self.explorer = explorer
        self.settings = settings
        self.jobs: dict[str, Job] = {}

    async def submit(self, request: GenerateRequest, client: str = "") -> str:
        """Run `request` in the background (it waits for a worker in `client`'s turn); its id."""
        self._prune()
        if len(self.jobs) >= self.settings.max_jobs:
            raise ExplorerError(
                "too many jobs", f"at most {self.settings.max_jobs} at once", http_status=429
            )
        job = Job(uuid.uuid4().hex, request.ir_type)
        self.jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, request, client))
        return job.id

    async def status(self, job_id: str) -> JobStatus:
        return self._get(job_id).status()

    def _get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise unknown_job(job_id)
        return job

    async def cancel(self, job_id: str) -> JobStatus:
        job = self._get(job_id)
        if job.state not in FINISHED:
            job.task.cancel()
            self._finish(job, "cancelled", None)
        return job.status()

    async def _run(self, job: Job, request: GenerateRequest, client: str) -> None:
        def started() -> None:
            if job.state == "queued":
                job.state = "running"

        try:
            result, _ = await self.explorer.generate(request, on_start=started, client=client)
        except asyncio.CancelledError:
            self._finish(job, "cancelled", None)
            return
        except ExplorerError as err:  # the server is busy
            result = err.as_response()
        self._finish(job, "done" if result.get("status") == "ok" else "failed", result)

    @staticmethod
    def _finish(job: Job, state: str, result: dict | None) -> None:
        if job.state in FINISHED:
            return
        job.state = state
        job.result = result
        job.finished_at = time.time()

    def _prune(self) -> None:
        now = time.time()
        finished = sorted(
            (job for job in self.jobs.values() if job.state in FINISHED),
            key=lambda job: job.finished_at or 0,
        )
        for job in finished:
            expired = now - (job.finished_at or now) > self.settings.job_ttl_s
            if expired or len(self.jobs) >= self.settings.max_jobs:
                del self.jobs[job.id]

    async def close(self) -> None:
        for job in self.jobs.values():
            if job.task and not job.task.done():
                job.task.cancel()
