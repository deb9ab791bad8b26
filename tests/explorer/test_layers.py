"""The explorer's layers: FastAPI stays in the web layer (app.py and routes/); the domain modules
(service, jobs, settings, pool, workers, IR types, tools) can be used and tested without it."""

from __future__ import annotations

import ast
from pathlib import Path

EXPLORER = Path(__file__).resolve().parents[2] / "mirai" / "explorer"
WEB_LAYER = {EXPLORER / "app.py", *(EXPLORER / "routes").glob("*.py")}


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_only_the_web_layer_imports_fastapi():
    domain = [p for p in EXPLORER.rglob("*.py") if p not in WEB_LAYER]
    assert len(domain) > 20
    offenders = [str(p.relative_to(EXPLORER)) for p in domain if "fastapi" in imported_modules(p)]
    assert offenders == []
    assert all("fastapi" in imported_modules(p) for p in (EXPLORER / "app.py",))
