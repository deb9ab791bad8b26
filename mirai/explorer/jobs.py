"""Jobs: /generate_ir requests run in the background, for long compilations (guide §6 allows a
/status/<jobid> endpoint beside the synchronous /generate_ir, which keeps its behaviour).

States: queued (waiting for a worker) -> running -> done | failed; or cancelled at any point.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

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


class JobStore:
    """Jobs by id; finished ones are forgotten after `job_ttl_s` or when more than `max_jobs`."""

    def __init__(self, explorer: Explorer, settings: Settings) -> None:
        self.explorer = explorer
        self.settings = settings
        self.jobs: dict[str, Job] = {}

    def submit(self, request: GenerateRequest, client: str = "") -> Job:
        """Run `request` in the background; it waits for a worker in `client`'s turn."""
        self._prune()
        if len(self.jobs) >= self.settings.max_jobs:
            raise ExplorerError(
                "too many jobs", f"at most {self.settings.max_jobs} at once", http_status=429
            )
        job = Job(uuid.uuid4().hex, request.ir_type)
        self.jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, request, client))
        return job

    def get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise ExplorerError(
                f"no job {job_id!r}", "it never existed or has expired", http_status=404
            )
        return job

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        if job.state not in FINISHED:
            job.task.cancel()
            self._finish(job, "cancelled", None)
        return job

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
