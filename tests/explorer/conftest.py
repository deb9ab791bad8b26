"""Fixtures of the explorer tests: real `mirai serve` processes (HTTP on 127.0.0.1, a free port),
talked to over HTTP with httpx. `server` is shared by the session; `make_server` starts one with
other settings (a tight pool for the limit tests) and stops it after the module.
"""

from __future__ import annotations

import pytest
from explorer_server import Server, start_server, stop_server


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Server:
    """The shared server: 2 workers, `cat` allowed as user_tool."""
    tmp = tmp_path_factory.mktemp("explorer")
    started = start_server(tmp, "--workers", "2", "--allow-user-tool", "cat")
    try:
        started.wait_ready(workers=2)
        yield started
    finally:
        stop_server(started)


@pytest.fixture(scope="module")
def make_server(tmp_path_factory):
    """Start servers with other flags; they stop when the module's tests are done."""
    servers = []

    def make(*args: str) -> Server:
        started = start_server(tmp_path_factory.mktemp("explorer-extra"), *args)
        servers.append(started)
        return started

    yield make
    for started in servers:
        stop_server(started)
