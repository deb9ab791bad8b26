"""The job API: POST /jobs (a /generate_ir request run in the background), GET /status/<job_id>,
DELETE /jobs/<job_id> (or POST /jobs/<job_id>/cancel) to cancel."""

from __future__ import annotations

from fastapi import APIRouter

from mirai.explorer.routes.deps import ClientDep, JobsDep
from mirai.explorer.schemas import GenerateRequest, JobCreated, JobStatus

router = APIRouter(tags=["jobs"])


@router.post("/jobs", response_model=JobCreated)
async def create_job(request: GenerateRequest, jobs: JobsDep, client: ClientDep) -> dict:
    """Start a job; poll GET /status/<job_id> for its result."""
    return {"status": "ok", "job_id": await jobs.submit(request, client)}


@router.get("/status/{job_id}", response_model=JobStatus)
async def job_status(job_id: str, jobs: JobsDep) -> JobStatus:
    """The job's state and, once finished, its /generate_ir response in `result`."""
    return await jobs.status(job_id)


@router.get("/jobs/{job_id}", response_model=JobStatus)
async def get_job(job_id: str, jobs: JobsDep) -> JobStatus:
    """Same as GET /status/<job_id>."""
    return await jobs.status(job_id)


@router.delete("/jobs/{job_id}", response_model=JobStatus)
async def cancel_job(job_id: str, jobs: JobsDep) -> JobStatus:
    """Cancel a queued or running job (its worker is stopped and replaced)."""
    return await jobs.cancel(job_id)


@router.post("/jobs/{job_id}/cancel", response_model=JobStatus)
async def cancel_job_post(job_id: str, jobs: JobsDep) -> JobStatus:
    """Same as DELETE /jobs/<job_id>."""
    return await jobs.cancel(job_id)
