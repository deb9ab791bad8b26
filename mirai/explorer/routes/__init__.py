"""HTTP routes, one router per resource. `ROUTERS` is what `create_app` includes, in order.

To add a resource: write `routes/<name>.py` with a module-level `router = APIRouter(...)` and add its
module name to ROUTER_MODULES below (one line). Static files are mounted after all routers.
"""

from __future__ import annotations

import importlib

from fastapi import APIRouter

ROUTER_MODULES = [
    "mirai.explorer.routes.generate",
    "mirai.explorer.routes.cache",
    "mirai.explorer.routes.meta",
    "mirai.explorer.routes.jobs",
    "mirai.explorer.routes.permalinks",
    # Add new routers here, e.g. "mirai.explorer.routes.permalinks",
]


def routers() -> list[APIRouter]:
    """The router of every module in ROUTER_MODULES."""
    return [importlib.import_module(name).router for name in ROUTER_MODULES]
