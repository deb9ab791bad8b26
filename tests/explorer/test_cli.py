"""`mirai serve` is registered in the command line and answers /version quickly."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from explorer_server import ROOT, free_port


def test_serve_help():
    result = subprocess.run(
        [sys.executable, "-m", "mirai.cli", "serve", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for flag in ("--host", "--port", "--workers", "--allow-user-tool", "--timeout"):
        assert flag in result.stdout


def test_version_within_five_seconds(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "mirai.cli", "serve", "--port", str(port), "--workers", "1"]
    command += ["--cache-dir", str(tmp_path)]
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            assert proc.poll() is None
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/version", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        assert time.monotonic() - started < 5
        assert response.json().startswith("mirai-explorer")
    finally:
        proc.terminate()
        proc.wait(20)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mirai.cli", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_worker_help_lists_the_pool_flags():
    result = run_cli("worker", "--help")
    assert result.returncode == 0, result.stderr
    for flag in ("--broker", "--workers", "--timeout", "--no-sandbox", "--max-tries", "--name"):
        assert flag in result.stdout


def test_worker_needs_a_redis_broker():
    missing = run_cli("worker")
    assert missing.returncode == 2 and "--broker redis://" in missing.stderr
    wrong = run_cli("worker", "--broker", "http://127.0.0.1:6379")
    assert wrong.returncode == 2 and "must be a redis:// URL" in wrong.stderr


def test_serve_refuses_a_broker_that_is_no_redis_url():
    result = run_cli("serve", "--broker", "amqp://127.0.0.1/")
    assert result.returncode == 2 and "must be a redis:// URL" in result.stderr
