"""The server's own limits, on a live server of one worker: request body size (413), bodies nested too
deep, other HTTP errors in the guide's shape, the fair queue between clients, the full queue
(Retry-After), a waiting client that goes away, and /health while the worker dies and is replaced.

Clients are told apart by address: each test client connects from its own loopback address.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

MIB = 1 << 20
TIMEOUT_S = 10
BLOCK_S = 4  # how long the first request holds the one worker while the others queue


@pytest.fixture(scope="module")
def limited(make_server):
    server = make_server(
        "--workers", "1", "--queue-size", "4", "--timeout", str(TIMEOUT_S), "--max-body-mb", "1"
    )
    server.wait_ready()
    return server


def client_at(number: int) -> httpx.Client:
    """An HTTP client connecting from 127.0.0.<number>: a client of its own for the server."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=f"127.0.0.{number}"))


def peak_rss_mib(server) -> float:
    with open(f"/proc/{server.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def assert_error(response: httpx.Response, http_status: int) -> dict:
    assert response.status_code == http_status, response.text
    result = response.json()
    assert set(result) == {"status", "message", "detail"} and result["status"] == "error", result
    return result


def assert_serving(server) -> None:
    assert server.get("/health").json()["ready"]
    code = "print('still here')"
    assert server.ok(code=code, ir_type="raw_ir", selected_language="pytorch") == "still here\n"


def test_body_over_the_limit_by_content_length(limited):
    before = peak_rss_mib(limited)
    started = time.monotonic()
    response = limited.post("/generate_ir", b" " * (100 * MIB))
    result = assert_error(response, 413)
    assert result["message"] == "request body too large"
    assert "at most 1048576 bytes" in result["detail"] and "104857600 bytes" in result["detail"]
    assert time.monotonic() - started < 30
    assert peak_rss_mib(limited) - before < 50  # the body was never held in memory
    assert_serving(limited)


def test_streamed_body_over_the_limit(limited):
    sent = 0

    def chunks():
        nonlocal sent
        for _ in range(100 * 16):
            sent += 64 * 1024
            yield b" " * (64 * 1024)

    before = peak_rss_mib(limited)
    response = httpx.post(limited.url + "/generate_ir", content=chunks(), timeout=60)
    assert response.request.headers["transfer-encoding"] == "chunked"
    result = assert_error(response, 413)
    assert result["message"] == "request body too large"
    assert peak_rss_mib(limited) - before < 50
    for path in ("/jobs", "/free_ir_cache", "/permalinks"):
        response = httpx.post(limited.url + path, content=chunks(), timeout=60)
        assert assert_error(response, 413)["message"] == "request body too large"
    assert_serving(limited)


def test_body_under_the_limit_is_read(limited):
    response = limited.post("/free_ir_cache", {"code": "x" * (MIB - 100)})
    assert response.json() == {"status": "ok"}


DEEP = 100_000


@pytest.mark.parametrize(
    "body",
    [b"[" * DEEP + b"]" * DEEP, b'{"code": ' + b"[" * DEEP + b"]" * DEEP + b', "ir_type": "x"}'],
    ids=["array", "code"],
)
def test_body_nested_too_deep(limited, body):
    for path in ("/generate_ir", "/jobs", "/free_ir_cache"):
        result = assert_error(limited.post(path, body), 200)
        assert result["message"] == "malformed JSON in the request body: nested too deep", path
        assert result["detail"]
    result = assert_error(limited.post("/permalinks", body), 400)
    assert "nested too deep" in result["message"]
    assert_serving(limited)


def test_other_http_errors_are_in_the_guide_shape(limited):
    result = assert_error(httpx.get(limited.url + "/no_such_route"), 404)
    assert result["message"] == "Not Found: GET /no_such_route"
    result = assert_error(httpx.put(limited.url + "/version", content=b"{}"), 405)
    assert result["message"] == "Method Not Allowed: PUT /version"


def health(server) -> dict:
    return server.get("/health").json()


def wait_for(server, **expected) -> None:
    deadline = time.monotonic() + 20
    while any(health(server)[key] != value for key, value in expected.items()):
        assert time.monotonic() < deadline, (expected, health(server))
        time.sleep(0.02)


def test_clients_take_turns_and_a_full_queue_says_when_to_retry(limited):
    limited.wait_ready()
    finished: list[str] = []
    threads = []

    def send(name: str, address: int) -> None:
        code = f"import time\ntime.sleep({BLOCK_S if name == 'a1' else 0})\nprint('{name}')"
        with client_at(address) as client:
            response = client.post(
                limited.url + "/generate_ir", json={"code": code, "ir_type": "raw_ir"}, timeout=60
            )
        assert response.json() == {"status": "ok", "output": f"{name}\n"}
        finished.append(name)

    def queue(name: str, address: int, queued: int) -> None:
        threads.append(threading.Thread(target=send, args=(name, address)))
        threads[-1].start()
        wait_for(limited, workers_busy=1, queued=queued)

    def refused(code: str, address: int) -> dict:
        with client_at(address) as client:
            response = client.post(
                limited.url + "/generate_ir", json={"code": code, "ir_type": "raw_ir"}
            )
        result = assert_error(response, 200)
        assert response.headers["Retry-After"] == str(TIMEOUT_S)
        assert result["message"].startswith("server busy")
        assert f"retry in {TIMEOUT_S} s" in result["detail"]
        return result

    # Client a (127.0.0.2) runs one slow request and queues two more, then b queues one. With one
    # worker, requests finish in the order they got it.
    for queued, name in enumerate(["a1", "a2", "a3"]):
        queue(name, 2, queued)
    queue("b1", 3, 3)
    # a holds its half of the queue: its next request is refused, though the queue has room.
    assert refused("a4", 2)["message"].startswith("server busy: this client")
    queue("c1", 4, 4)
    # The queue is full: anyone's next request is refused.
    assert refused("d1", 5)["message"].startswith("server busy: every worker is in use")
    for thread in threads:
        thread.join()
    # The worker went to a, then b and c in turn, before a's last request (FIFO: a1 a2 a3 b1 c1).
    assert finished == ["a1", "a2", "b1", "c1", "a3"]


def test_a_waiting_client_that_goes_away_leaves_the_queue(limited):
    limited.wait_ready()
    slow = threading.Thread(
        target=limited.ok,
        kwargs={"code": "import time\ntime.sleep(3)\nprint('slow')", "ir_type": "raw_ir"},
    )
    slow.start()
    wait_for(limited, workers_busy=1, queued=0)
    with client_at(3) as client, pytest.raises(httpx.ReadTimeout):
        client.post(
            limited.url + "/generate_ir",
            json={"code": "print('gone')", "ir_type": "raw_ir"},
            timeout=httpx.Timeout(10, read=0.5),
        )
    wait_for(limited, workers_busy=1, queued=0)
    assert slow.is_alive()  # it left the queue while the slow request still ran
    slow.join()
    assert_serving(limited)


def worker_pids(server) -> list[int]:
    """The server's child processes: its workers (each in a session of its own)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == server.proc.pid:
            pids.append(int(stat.parent.name))
    return pids


def test_health_counts_only_live_workers(limited):
    limited.wait_ready()
    [pid] = worker_pids(limited)
    os.killpg(pid, signal.SIGKILL)
    # Dead, then warming up in its replacement: not ready, though no request has come.
    wait_for(limited, ready=False, workers_ready=0)
    limited.wait_ready()
    assert worker_pids(limited) != [pid]
    assert_serving(limited)
