"""HTTP routes, one router per resource. `ROUTERS` is what `create_app` includes, in order.

To add a resource: write `routes/<name>.py` with a module-level `router = APIRouter(...)`, import the
module here and add its router to ROUTERS. Static files are mounted after all routers.
"""

from __future__ import annotations

from mirai.explorer.routes import cache, generate, jobs, meta, permalinks

ROUTERS = (
    generate.router,
    cache.router,
    meta.router,
    jobs.router,
    permalinks.router,
)
