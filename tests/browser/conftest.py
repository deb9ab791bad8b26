"""Fixtures of the browser tests: the built page, a live `mirai serve`, Debian's chromium driven by
Playwright, and a page per test whose screenshot lands in test-artifacts/.

MIRAI_TEST_SERVER_URL runs the tests against a server that is already up instead of starting one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
STATIC_INDEX = ROOT / "mirai" / "explorer" / "static" / "index.html"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = os.environ.get("MIRAI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 120


def pytest_collection_modifyitems(items):
    """Every test here that takes a `page` needs chromium and Playwright; `make test` installs both,
    so where one is missing those tests fail saying what to install (never a silent skip)."""
    for item in items:
        if {"page", "new_page", "browser"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.usefixtures("browser_tools"))


@pytest.fixture(scope="session")
def browser_tools() -> None:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install -e '.[dev]')")
    if missing:
        pytest.fail("the browser tests need " + " and ".join(missing), pytrace=False)


@pytest.fixture(scope="session")
def built_page() -> Path:
    """The page built into the package (`make web` does this; built here when it is missing)."""
    if not STATIC_INDEX.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("the page is not built and npm is missing: run `make web`")
        if not (WEB / "node_modules").exists():
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=WEB, check=True)
        subprocess.run([npm, "run", "build"], cwd=WEB, check=True)
    return STATIC_INDEX


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(url: str, proc: subprocess.Popen | None, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"mirai serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url + "/version", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"mirai serve did not answer /version within {SERVER_START_TIMEOUT_S} s")


@pytest.fixture(scope="session")
def server_url(built_page, tmp_path_factory) -> str:
    """A live `mirai serve` on a free port, with its own permalink database."""
    existing = os.environ.get("MIRAI_TEST_SERVER_URL")
    if existing:
        _wait_until_up(existing.rstrip("/"), None, Path(os.devnull))
        yield existing.rstrip("/")
        return
    tmp = tmp_path_factory.mktemp("explorer")
    port = _free_port()
    log = tmp / "serve.log"
    env = {**os.environ, "MIRAI_EXPLORER_PERMALINKS_DB": str(tmp / "permalinks.sqlite3")}
    mirai = Path(sys.executable).parent / "mirai"
    command = [str(mirai), "serve", "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture()
def new_page(browser, server_url, request):
    """Opens a fresh page (own storage) at 1280x800 or a given size; screenshots each at the end."""
    ARTIFACTS.mkdir(exist_ok=True)
    opened = []

    def open_page(path: str = "/", width: int = 1280, height: int = 800, before=None):
        """`before(page)` runs before the page loads (e.g. to route a request)."""
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        if before is not None:
            before(page)
        page.set_default_timeout(30_000)
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.js_errors = errors
        page.goto(server_url + path)
        page.wait_for_selector(".pane")
        opened.append((context, page))
        return page

    yield open_page
    for i, (context, page) in enumerate(opened):
        suffix = "" if i == 0 else f"-{i + 1}"
        try:
            page.screenshot(
                path=str(ARTIFACTS / f"{request.node.name}{suffix}.png"), full_page=True
            )
        finally:
            context.close()


@pytest.fixture()
def page(new_page):
    """The page at `/`, 1280x800."""
    return new_page()
