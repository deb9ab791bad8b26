"""Running a coroutine from a test, whatever event loop the test process already runs."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor


def run_coroutine(coroutine):
    """asyncio.run in a thread of its own: the test process may already run an event loop in this
    thread (the browser tests' Playwright does), where asyncio.run refuses."""
    with ThreadPoolExecutor(1) as executor:
        return executor.submit(asyncio.run, coroutine).result()
