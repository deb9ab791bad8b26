"""What the routes get from the app, as typed dependencies: the only place the web layer reaches
into app state. Domain modules (service, jobs, settings, the permalink store) know nothing of FastAPI.

    async def health(explorer: ExplorerDep) -> dict: ...
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from mirai.explorer.jobs import Jobs
from mirai.explorer.permalinks_store import Permalinks
from mirai.explorer.service import Explorer


def get_explorer(request: Request) -> Explorer:
    """The app's Explorer (worker pool, cache), made by `create_app`."""
    return request.app.state.explorer


def get_jobs(request: Request) -> Jobs:
    """The app's background jobs."""
    return request.app.state.jobs


def get_client(request: Request) -> str:
    """Who sent the request (its address): the worker queue serves clients in turn."""
    return request.client.host if request.client else ""


def get_permalink_store(request: Request) -> Permalinks:
    """The app's permalink store: SQLite at Settings.permalinks_db, or Redis in broker mode (tests
    override this)."""
    return request.app.state.permalinks


ExplorerDep = Annotated[Explorer, Depends(get_explorer)]
JobsDep = Annotated[Jobs, Depends(get_jobs)]
ClientDep = Annotated[str, Depends(get_client)]
StoreDep = Annotated[Permalinks, Depends(get_permalink_store)]
