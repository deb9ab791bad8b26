"""Broker mode past one machine: a real redis-server (127.0.0.1, a free port, its own folder, append-
only), two API replicas (`mirai serve --broker`) and three `mirai worker` processes standing for
hosts, talked to over HTTP. Jobs and cached results cross replicas; a killed worker's job is run
again elsewhere; cancel reaches the worker running the job; a Redis restart is ridden out; a killed
replica's jobs are still answered by the other. Nothing of Redis or arq is mocked.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from event_loop import run_coroutine
from explorer_server import ROOT, Server, free_port, free_port_pair, start_server, stop_server

from mirai.cli.serve import broker_ready
from mirai.explorer.broker.connection import async_client
from mirai.explorer.broker.jobs import JobRecords
from mirai.explorer.schemas import GenerateRequest
from mirai.explorer.settings import Settings

TIMEOUT_S = 5  # --timeout of replicas and workers: a lost worker's job is retried ~22 s later
SLOW_S = 3  # how long the slow requests sleep (less than TIMEOUT_S)
WORKERS = ("host-a", "host-b", "host-c")


class RedisServer:
    """redis-server on 127.0.0.1 with append-only persistence in its own folder; restartable."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed (make installs Debian's redis-server)"
        command = [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.folder),
        ]
        command += ["--appendonly", "yes", "--save", "", "--protected-mode", "yes"]
        log = open(self.folder / "redis.log", "ab")
        self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if self.client().ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        raise AssertionError((self.folder / "redis.log").read_text()[-2000:])

    def stop(self) -> None:
        """SIGTERM: Redis writes its append-only file and exits."""
        self.proc.terminate()
        self.proc.wait(20)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen
    log: Path

    def kill(self) -> None:
        """As a host going away: the worker and everything it started, at once."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)


def start_worker(tmp: Path, url: str, name: str) -> Worker:
    folder = tmp / name
    folder.mkdir()
    command = [sys.executable, "-m", "mirai.cli", "worker", "--broker", url, "--name", name]
    command += ["--workers", "1", "--timeout", str(TIMEOUT_S), "--cache-dir", str(folder / "cache")]
    log = folder / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Worker(name, proc, log)


@dataclass
class Cluster:
    redis: RedisServer
    a: Server
    b: Server
    workers: dict[str, Worker]

    def live_workers(self) -> list[str]:
        beats = self.redis.client().hgetall("mirai:workers")
        return sorted(json.loads(v)["name"] for v in beats.values())

    def running_workers(self) -> int:
        return sum(1 for worker in self.workers.values() if worker.proc.poll() is None)

    def record(self, job_id: str) -> dict:
        fields = self.redis.client().hgetall(f"mirai:job:{job_id}")
        return {k.decode(): v.decode() for k, v in fields.items()}

    def logs(self) -> str:
        parts = [f"== {w.name}\n{w.log.read_text()[-3000:]}" for w in self.workers.values()]
        return "\n".join([*parts, self.a.log.read_text()[-2000:], self.b.log.read_text()[-2000:]])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Cluster:
    tmp = tmp_path_factory.mktemp("cluster")
    (tmp / "redis").mkdir()
    store = RedisServer(tmp / "redis")
    store.start()
    flags = ("--broker", store.url, "--timeout", str(TIMEOUT_S))
    workers = {name: start_worker(tmp, store.url, name) for name in WORKERS}
    replicas = []
    try:
        for name in ("replica-a", "replica-b"):
            (tmp / name).mkdir()
            replicas.append(start_server(tmp / name, *flags))
        started = Cluster(store, replicas[0], replicas[1], workers)
        deadline = time.monotonic() + 240
        while started.a.get("/health").json()["workers_ready"] < len(WORKERS):
            assert time.monotonic() < deadline, started.logs()
            time.sleep(0.5)
        yield started
    finally:
        for replica in replicas:
            if replica.proc.poll() is None:
                stop_server(replica)
        for worker in workers.values():
            if worker.proc.poll() is None:
                worker.proc.terminate()
        for worker in workers.values():
            try:
                worker.proc.wait(20)
            except subprocess.TimeoutExpired:
                worker.kill()
        if store.proc.poll() is None:
            store.stop()


def slow(marker: str) -> dict:
    """A request that runs user code (in a worker's sandbox) for SLOW_S seconds."""
    code = f"import time\ntime.sleep({SLOW_S})\nprint({marker!r})\n"
    return {"code": code, "ir_type": "raw_ir", "selected_language": "pytorch"}


def quick(marker: str) -> dict:
    return {"code": f"print({marker!r})", "ir_type": "raw_ir", "selected_language": "pytorch"}


def submit(server: Server, body: dict) -> str:
    answer = server.post("/jobs", body).json()
    assert answer["status"] == "ok", answer
    return answer["job_id"]


def wait_state(server: Server, job_id: str, states: tuple[str, ...], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = server.get(f"/status/{job_id}").json()
        if status["state"] in states:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


def test_the_local_cluster_of_make_cluster_starts_and_stops_whole(tmp_path):
    """`make cluster`'s launcher: Redis, two replicas, the workers; SIGINT (Ctrl-C) stops all."""
    port = free_port_pair()  # the launcher serves on port and port + 1
    redis_port = next(p for p in iter(free_port, None) if p not in (port, port + 1))
    command = [sys.executable, "-m", "mirai.explorer.broker.local", "--workers", "1"]
    command += ["--port", str(port), "--redis-port", str(redis_port), "--dir", str(tmp_path)]
    log = tmp_path / "cluster.log"
    with open(log, "wb") as out:
        launcher = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        for replica_port in (port, port + 1):
            url = f"http://127.0.0.1:{replica_port}"
            while True:
                assert launcher.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                try:
                    if httpx.get(url + "/health", timeout=5).json().get("workers_ready") == 1:
                        break
                except (httpx.HTTPError, ValueError):
                    pass
                time.sleep(0.5)
        marker = uuid.uuid4().hex
        answer = httpx.post(f"http://127.0.0.1:{port + 1}/generate_ir", json=quick(marker))
        assert answer.json() == {"status": "ok", "output": marker + "\n"}
        children = child_pids(launcher.pid)
        assert len(children) == 4  # redis-server, two replicas, one worker
    finally:
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(60) == 0
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]
    assert (tmp_path / "appendonlydir").is_dir()  # Redis kept its data append-only


def test_a_worker_stopped_as_its_broker_goes_down_exits(tmp_path):
    """`make cluster`'s Ctrl-C stops the workers and Redis together: a worker so stopped exits
    (code 0) and does not try to reconnect. Whether its shutdown then meets the broker's error is
    a race; the next test gives serve that error for certain."""
    store = RedisServer(tmp_path)
    store.start()
    worker = start_worker(tmp_path, store.url, "stopping")
    try:
        deadline = time.monotonic() + 120
        while "taking jobs" not in worker.log.read_text():
            assert worker.proc.poll() is None, worker.log.read_text()[-3000:]
            assert time.monotonic() < deadline, worker.log.read_text()[-3000:]
            time.sleep(0.2)
        worker.proc.send_signal(signal.SIGTERM)
        store.stop()
        assert worker.proc.wait(60) == 0, worker.log.read_text()[-3000:]
        assert "reconnecting" not in worker.log.read_text(), worker.log.read_text()[-3000:]
    finally:
        if worker.proc.poll() is None:
            worker.kill()


STOP_AS_BROKER_GOES = r"""
import asyncio, json, signal
import redis.exceptions
from mirai.explorer.broker import node as node_module
from mirai.explorer.settings import Settings

calls = []

class Node:
    name = "stand-in"
    async def start(self): pass
    async def close(self): calls.append("close")

class StandIn:  # arq's Worker as serve uses it
    tasks, main_task = {}, None
    def handle_sig(self, sig):  # the cancellation it makes is lost, as a broker's error replaced it
        calls.append("handle_sig " + signal.Signals(sig).name)
    async def main(self):
        calls.append("main")
        if calls.count("main") == 1:
            raise redis.exceptions.ConnectionError("an outage")  # ridden out: main again
        signal.raise_signal(signal.SIGTERM)
        await asyncio.sleep(0.2)
        raise redis.exceptions.ConnectionError("the broker stopped too")

node_module.WorkerNode = lambda settings, name: Node()
node_module.make_worker = lambda node: StandIn()
node_module.RECONNECT_S = 0.01
asyncio.run(asyncio.wait_for(node_module.serve(Settings(), "stand-in"), 20))
print(json.dumps(calls))
"""


def test_a_worker_told_to_stop_takes_the_brokers_error_as_the_end():
    """serve's own handling (stand-ins for the node and arq's worker, in a child process for its
    signal handler): a broker's error is an outage to ride out, unless a stop signal came first;
    then the worker closes and returns rather than reconnecting."""
    child = subprocess.run(
        [sys.executable, "-c", STOP_AS_BROKER_GOES], cwd=ROOT, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    calls = json.loads(child.stdout.strip().splitlines()[-1])
    assert calls == ["main", "main", "handle_sig SIGTERM", "close"], (calls, child.stderr[-2000:])


def child_pids(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


def test_workers_of_every_host_are_counted(cluster):
    assert cluster.live_workers() == sorted(WORKERS)
    for replica in (cluster.a, cluster.b):
        health = replica.get("/health").json()
        assert health["ready"] and health["workers_ready"] == len(WORKERS)
        assert replica.get("/version").json().startswith("mirai-explorer ")


def test_a_job_submitted_on_one_replica_is_answered_on_the_other(cluster):
    marker = uuid.uuid4().hex
    job_id = submit(cluster.a, quick(marker))
    status = wait_state(cluster.b, job_id, ("done", "failed"), 60)
    assert status["state"] == "done", status
    assert status["result"] == {"status": "ok", "output": marker + "\n"}
    assert cluster.a.get(f"/jobs/{job_id}").json() == status
    assert cluster.record(job_id)["worker"] in WORKERS


def test_synchronous_requests_and_errors_keep_the_guides_shapes(cluster):
    marker = uuid.uuid4().hex
    assert cluster.b.ok(**quick(marker)) == marker + "\n"
    unknown = cluster.a.generate(code="x", ir_type="no_such_ir")
    assert unknown == {"status": "error", "message": "IR type not supported", "detail": ""}
    failing = cluster.b.generate(code="1/0", ir_type="raw_ir", selected_language="pytorch")
    assert failing["status"] == "error" and "ZeroDivisionError" in failing["message"]
    missing = cluster.a.get("/status/0123456789abcdef")
    assert missing.status_code == 404 and missing.json()["status"] == "error"


def test_a_result_cached_on_one_replica_is_a_hit_on_the_other(cluster):
    body = quick(uuid.uuid4().hex)
    first = cluster.a.post("/generate_ir", body)
    assert first.headers["X-Mirai-Cache"] == "miss"
    second = cluster.b.post("/generate_ir", body)
    assert second.headers["X-Mirai-Cache"] == "hit"
    assert second.json() == first.json() and first.json()["status"] == "ok"
    assert cluster.b.post("/free_ir_cache", {"code": body["code"]}).json() == {"status": "ok"}
    assert cluster.a.post("/generate_ir", body).headers["X-Mirai-Cache"] == "miss"


def test_a_permalink_saved_on_one_replica_loads_on_the_other(cluster):
    state = {"code": uuid.uuid4().hex, "panes": [{"ir_type": "torch_mlir"}]}
    saved = cluster.a.post("/permalinks", {"state": state}).json()
    assert saved["status"] == "ok"
    assert cluster.b.get(f"/permalinks/{saved['id']}").json()["state"] == state
    assert cluster.b.post("/permalinks", {"state": state}).json()["id"] == saved["id"]
    missing = cluster.a.get("/permalinks/ZZZZZZZZZZ")
    assert missing.status_code == 404 and missing.json()["message"] == "permalink not found"
    too_large = cluster.b.post("/permalinks", {"state": {"code": "x" * (1 << 20)}})
    assert too_large.status_code == 413 and too_large.json()["status"] == "error"


def test_a_replica_warns_when_redis_would_lose_permalinks(cluster, capsys):
    settings = Settings(broker=cluster.redis.url)
    assert broker_ready(settings)
    assert "WARNING" not in capsys.readouterr().err  # appendonly yes
    cluster.redis.client().config_set("appendonly", "no")
    try:
        assert broker_ready(settings)
        assert "appendonly off" in capsys.readouterr().err
    finally:
        cluster.redis.client().config_set("appendonly", "yes")


def test_cancel_on_one_replica_stops_the_job_on_its_worker(cluster):
    job_id = submit(cluster.a, slow(uuid.uuid4().hex))
    wait_state(cluster.b, job_id, ("running",), 30)
    cancelled = httpx.delete(f"{cluster.b.url}/jobs/{job_id}", timeout=30).json()
    assert cancelled["state"] == "cancelled"
    # The worker running it was told: arq records the job as aborted (cancelled), not finished.
    deadline = time.monotonic() + 15
    while (raw := cluster.redis.client().get(f"arq:result:{job_id}")) is None:
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.1)
    result = json.loads(raw)
    assert result["s"] is False and result["r"]["__exception__"] == "CancelledError"
    time.sleep(SLOW_S)  # past the time the request would have taken: it stays cancelled
    assert cluster.a.get(f"/status/{job_id}").json()["state"] == "cancelled"
    marker = uuid.uuid4().hex  # the worker is replaced and the cluster serves on
    assert cluster.a.ok(**quick(marker)) == marker + "\n"


def test_a_stopped_worker_hands_its_job_back_and_a_new_host_joins(cluster, tmp_path):
    marker = uuid.uuid4().hex
    job_id = submit(cluster.a, slow(marker))
    wait_state(cluster.b, job_id, ("running",), 30)
    first = cluster.record(job_id)["worker"]
    stopped = cluster.workers[first]
    stopped.proc.send_signal(signal.SIGTERM)  # as Ctrl-C or a service manager stopping it
    assert stopped.proc.wait(30) == 0, stopped.log.read_text()[-3000:]
    # Handed back at once: run again well before a lost worker's claim would expire (~22 s).
    status = wait_state(cluster.b, job_id, ("done", "failed"), 15)
    assert status["state"] == "done" and status["result"]["output"] == marker + "\n", status
    assert cluster.record(job_id)["worker"] != first
    assert first not in cluster.live_workers()  # it said goodbye
    join(cluster, start_worker(tmp_path, cluster.redis.url, "host-d"))
    assert cluster.a.get("/health").json()["workers_ready"] == len(WORKERS)


def test_requests_whose_workers_are_killed_run_again_elsewhere(cluster, tmp_path):
    """A job (POST /jobs) and a synchronous /generate_ir whose hosts die mid-request are both
    answered, by the one worker left, after the lost ones' claims expire (~22 s here)."""
    marker, waited = uuid.uuid4().hex, uuid.uuid4().hex
    job_id = submit(cluster.a, slow(marker))
    wait_state(cluster.b, job_id, ("running",), 30)
    first = cluster.record(job_id)["worker"]
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(cluster.b.generate, **slow(waited))
        second = busy_worker(cluster, other_than=first)
        cluster.workers[first].kill()
        cluster.workers[second].kill()
        status = wait_state(cluster.b, job_id, ("done", "failed"), 90)
        assert status["state"] == "done", (status, cluster.logs())
        assert status["result"]["output"] == marker + "\n"
        assert answer.result(timeout=90) == {"status": "ok", "output": waited + "\n"}
    assert cluster.record(job_id)["worker"] not in (first, second)
    deadline = time.monotonic() + 20
    while {first, second} & set(cluster.live_workers()):  # the lost hosts drop out of /health
        assert time.monotonic() < deadline
        time.sleep(0.5)
        cluster.a.get("/health")
    assert cluster.a.get("/health").json()["workers_ready"] == cluster.running_workers() == 1
    join(cluster, start_worker(tmp_path, cluster.redis.url, "host-e"))


def busy_worker(cluster: Cluster, other_than: str, timeout: float = 30) -> str:
    """The name of a worker whose heartbeat says it runs a request (not `other_than`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for text in cluster.redis.client().hgetall("mirai:workers").values():
            beat = json.loads(text)
            if beat["busy"] and beat["name"] != other_than:
                return beat["name"]
        time.sleep(0.2)
    raise AssertionError(cluster.logs())


def join(cluster: Cluster, worker: Worker) -> None:
    """Add a worker host to the cluster; until it announces itself."""
    cluster.workers[worker.name] = worker
    deadline = time.monotonic() + 120
    while worker.name not in cluster.live_workers():
        assert worker.proc.poll() is None and time.monotonic() < deadline, cluster.logs()
        time.sleep(0.5)


def test_a_job_whose_worker_is_lost_on_its_last_try_fails_clearly(cluster):
    """A job enqueued as a replica does, but already on its last try (--max-tries 2): losing its
    worker once more ends it with the guide's error, not a hang."""
    job_id, marker = uuid.uuid4().hex, uuid.uuid4().hex
    request = GenerateRequest(**slow(marker))

    async def enqueue_on_last_try() -> None:
        client = async_client(cluster.redis.url)
        await JobRecords(client, 3600).create(job_id, request.ir_type, 600)
        await client.enqueue_job(
            "explore", request.model_dump(), request.cache_key(), _job_id=job_id, _job_try=2
        )
        await client.aclose()

    run_coroutine(enqueue_on_last_try())
    wait_state(cluster.a, job_id, ("running",), 30)
    cluster.workers[cluster.record(job_id)["worker"]].kill()
    status = wait_state(cluster.b, job_id, ("done", "failed"), 90)
    assert status["state"] == "failed", status
    result = status["result"]
    assert result["status"] == "error", result
    assert result["message"] == "the worker running the request was lost", result
    assert "2 tries" in result["detail"] and "retries exceeded" in result["detail"]


def test_a_redis_restart_is_ridden_out(cluster):
    state = {"code": uuid.uuid4().hex}
    pid = cluster.a.post("/permalinks", {"state": state}).json()["id"]
    cached = quick(uuid.uuid4().hex)
    assert cluster.a.post("/generate_ir", cached).json()["status"] == "ok"
    cluster.redis.stop()
    # Down for longer than the clients' retries (about 10 s): the guide's error shape.
    down = cluster.b.generate(**quick(uuid.uuid4().hex))
    assert down["status"] == "error" and down["message"].startswith("broker unavailable")
    # Down for a moment: a request sent meanwhile waits for Redis and is answered.
    marker = uuid.uuid4().hex
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(cluster.a.generate, **quick(marker))
        time.sleep(1.0)
        assert not waiting.done()
        cluster.redis.start()
        answer = waiting.result(timeout=120)
    assert answer == {"status": "ok", "output": marker + "\n"}, (answer, cluster.logs())
    marker = uuid.uuid4().hex
    assert cluster.b.ok(**quick(marker)) == marker + "\n"
    # Durable (append-only): the permalink and the cached result came back with Redis.
    assert cluster.b.get(f"/permalinks/{pid}").json()["state"] == state
    assert cluster.b.post("/generate_ir", cached).headers["X-Mirai-Cache"] == "hit"
    job_id = submit(cluster.b, quick(uuid.uuid4().hex))
    assert wait_state(cluster.a, job_id, ("done", "failed"), 30)["state"] == "done"
    deadline = time.monotonic() + 30  # every live worker announces itself again
    while cluster.a.get("/health").json()["workers_ready"] < cluster.running_workers():
        assert time.monotonic() < deadline, cluster.logs()
        time.sleep(0.5)


def test_a_killed_replicas_jobs_are_answered_by_the_other(cluster):
    marker = uuid.uuid4().hex
    job_id = submit(cluster.a, slow(marker))
    cluster.a.proc.kill()
    cluster.a.proc.wait(10)
    status = wait_state(cluster.b, job_id, ("done", "failed"), 60)
    assert status["state"] == "done" and status["result"]["output"] == marker + "\n"
    other = uuid.uuid4().hex
    assert cluster.b.ok(**quick(other)) == other + "\n"
