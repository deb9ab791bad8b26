"""Limits of the worker pool, on a server of one worker: crash, time-out, memory, busy (the server's
own limits, on bodies and the queue, are in test_server_limits.py)."""

from __future__ import annotations

import threading
import time

import pytest

from explorer_samples import GUIDE_MODEL
from test_server_limits import worker_pids


@pytest.fixture(scope="module")
def tight(make_server):
    server = make_server(
        "--workers", "1", "--queue-size", "0", "--timeout", "8", "--memory-limit-mb", "1024"
    )
    server.wait_ready()
    return server


def test_worker_crash_is_reported_and_replaced(tight):
    result = tight.generate(code="import os\nos.abort()\n", ir_type="torch_mlir")
    assert result["status"] == "error"
    assert result["message"] == "the worker running the request crashed"
    assert "SIGABRT" in result["detail"]
    tight.wait_ready()
    assert "torch.aten.relu" in tight.ok(code=GUIDE_MODEL, ir_type="torch_mlir")


def test_time_limit(tight):
    started = time.monotonic()
    result = tight.generate(code="while True:\n    pass\n", ir_type="torch_mlir")
    assert 8 <= time.monotonic() - started < 8 + 5 + 5  # the limit, a grace, some slack
    assert result["status"] == "error"
    assert result["message"] == "time limit exceeded: the request ran longer than 8 s"
    tight.wait_ready()
    assert (
        tight.ok(code="print('alive')", ir_type="raw_ir", selected_language="pytorch") == "alive\n"
    )


def test_memory_limit(tight):
    code = "import torch\nx = torch.ones(4 * 1024**3, dtype=torch.uint8)\n"
    result = tight.generate(code=code, ir_type="torch_mlir")
    assert result["status"] == "error"
    assert "memory" in (result["message"] + result["detail"]).lower()
    tight.wait_ready()
    assert tight.ok(code="print('ok')", ir_type="raw_ir", selected_language="pytorch") == "ok\n"


def test_busy(tight):
    tight.wait_ready()
    slow = {}

    def run_slow():
        slow["result"] = tight.generate(
            code="import time\ntime.sleep(3)\nprint('slow')", ir_type="raw_ir"
        )

    thread = threading.Thread(target=run_slow)
    thread.start()
    deadline = time.monotonic() + 10
    while tight.get("/health").json()["workers_busy"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    result = tight.generate(code="print('other')", ir_type="raw_ir")
    thread.join()
    assert result["status"] == "error" and result["message"].startswith("server busy")
    assert "retry in 8 s" in result["detail"]
    assert slow["result"] == {"status": "ok", "output": "slow\n"}


def test_workers_are_recycled(make_server):
    # Told apart by their processes on the host (inside a sandbox every worker sees the same pids).
    server = make_server("--workers", "1", "--max-worker-requests", "1")
    pids = []
    for n in range(2):
        server.wait_ready()
        pids.append(worker_pids(server))
        code = f"print('request {n}')"
        assert (
            server.ok(code=code, ir_type="raw_ir", selected_language="pytorch") == f"request {n}\n"
        )
    assert len(pids[0]) == 1 and pids[0] != pids[1]
