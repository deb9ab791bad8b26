"""The page's TypeScript unit tests (vitest: pipeline model, stage splitting, diff, state, catalog),
run through npm so that `make test` covers them. Needs `npm ci` in web/ (`make web` does it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[2] / "web"


def test_web_unit_tests_pass():
    npm = shutil.which("npm")
    if npm is None or not (WEB / "node_modules").exists():
        pytest.fail("needs npm and web/node_modules (run `make web`)", pytrace=False)
    done = subprocess.run(
        [npm, "test", "--silent"], cwd=WEB, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
