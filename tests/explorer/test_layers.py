"""The explorer's layers: FastAPI stays in the web layer (app.py and routes/); the domain modules
(service, jobs, settings, pool, workers, IR types, tools) can be used and tested without it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPLORER = ROOT / "mirai" / "explorer"
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


def test_the_embedded_default_needs_no_broker(tmp_path):
    """`mirai serve` without --broker imports neither arq nor redis (nor the broker package)."""
    code = (
        "import sys\n"
        "from mirai.explorer.app import create_app\n"
        "from mirai.explorer.settings import Settings\n"
        "create_app(Settings())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('arq', 'redis')"
        " or m.startswith('mirai.explorer.broker')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "MIRAI_EXPLORER_PERMALINKS_DB": str(tmp_path / "p.sqlite3")},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
