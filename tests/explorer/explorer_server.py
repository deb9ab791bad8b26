"""Starting and talking to a real `mirai serve` in the explorer tests (HTTP on 127.0.0.1)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair() -> int:
    """A port p such that p and p + 1 are both free on 127.0.0.1 (for launchers that take p + 1)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports on 127.0.0.1")


@dataclass
class Server:
    """A running server: its URL, process, cache dir and log."""

    url: str
    proc: subprocess.Popen
    cache_dir: Path
    log: Path

    def post(self, path: str, body, timeout: float = 180.0) -> httpx.Response:
        if isinstance(body, (bytes, str)):
            headers = {"Content-Type": "application/json"}
            return httpx.post(self.url + path, content=body, headers=headers, timeout=timeout)
        return httpx.post(self.url + path, json=body, timeout=timeout)

    def get(self, path: str, **kwargs) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kwargs)

    def generate(self, timeout: float = 180.0, **fields) -> dict:
        response = self.post("/generate_ir", fields, timeout=timeout)
        assert response.status_code == 200, response.text
        return response.json()

    def ok(self, **fields) -> str:
        """The output of a request that must succeed."""
        result = self.generate(**fields)
        assert result["status"] == "ok", f"{result.get('message')}\n{result.get('detail')}"
        return result["output"]

    def wait_ready(self, workers: int = 1, timeout: float = START_TIMEOUT_S) -> None:
        """Until `workers` workers are warm and idle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-4000:]
            try:
                health = self.get("/health").json()
                if health["workers_ready"] - health["workers_busy"] >= workers:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"workers not ready:\n{self.log.read_text()[-4000:]}")


def start_server(tmp: Path, *args: str, env: dict[str, str] | None = None) -> Server:
    """A server started with `args` (flags of `mirai serve`), and `env` added to this environment."""
    port = free_port()
    cache_dir = tmp / "cache"
    log = tmp / "server.log"
    command = [sys.executable, "-m", "mirai.explorer", "--port", str(port)]
    command += ["--cache-dir", str(cache_dir), "--log-level", "warning", *args]
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env} if env else None,
        )
    server = Server(f"http://127.0.0.1:{port}", proc, cache_dir, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            server.get("/version")
            return server
        except httpx.HTTPError:
            time.sleep(0.1)
    stop_server(server)
    raise AssertionError(f"server did not answer:\n{log.read_text()[-4000:]}")


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(20)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
