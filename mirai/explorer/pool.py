"""The pool of pre-warmed worker processes that run requests (user code never runs in the server).

Each worker (`mirai.explorer.worker`) handles one request at a time. Past the pool, requests wait, up
to `queue_size` of them; one more gets a clear "busy" error. A worker that overruns the time limit is
killed (with everything it started) and replaced; one that dies is replaced and its log's tail is
returned as the error's detail.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

from mirai.explorer.errors import ExplorerError
from mirai.explorer.settings import Settings

log = logging.getLogger("mirai.explorer")

READY_TIMEOUT_S = 300.0
STREAM_LIMIT = 1 << 30  # a response is one JSON line; IR dumps can be large
LOG_TAIL = 6000
LOG_LIMIT = 8 << 20  # a worker's log is emptied before a request when it has grown past this


class WorkerDied(Exception):
    pass


class Worker:
    """One worker process and its JSON-lines pipe."""

    def __init__(self, number: int, settings: Settings, log_dir: Path) -> None:
        self.number = number
        self.settings = settings
        self.log_path = log_dir / f"worker-{number}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.served = 0

    async def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "mirai.explorer.worker",
            json.dumps(self.settings.worker_config()),
        ]
        with open(self.log_path, "ab") as log_file:
            self.proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                start_new_session=True,
                limit=STREAM_LIMIT,
            )
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.kill()
            raise WorkerDied(f"worker not ready after {READY_TIMEOUT_S:g} s") from None
        if not line:
            raise WorkerDied(f"worker exited while starting:\n{self.log_tail(0)}")

    async def run(self, payload: dict, timeout_s: float) -> dict:
        """The worker's answer to `payload`. Each message carries a fresh id that the answer must
        echo: a line that does not is never handed to a client (WorkerDied, and the worker is
        replaced), so no stray writer can pass one request's answer off as another's."""
        request_id = uuid.uuid4().hex
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        if offset > LOG_LIMIT:  # the worker appends (O_APPEND): emptying the file here is safe
            os.truncate(self.log_path, 0)
            offset = 0
        self.proc.stdin.write(json.dumps({**payload, "id": request_id}).encode() + b"\n")
        try:
            await self.proc.stdin.drain()
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            await self._reap()
            raise WorkerDied(self.describe_exit() + "\n" + self.log_tail(offset))
        self.served += 1
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            raise WorkerDied(f"the worker's answer is not tied to this request: {line[:200]!r}")
        response = answer.get("response")
        if not isinstance(response, dict) or response.get("status") not in ("ok", "error"):
            raise WorkerDied(f"the worker's answer has no response: {line[:200]!r}")
        return response

    def describe_exit(self) -> str:
        code = self.proc.returncode if self.proc else None
        if code is not None and code < 0:
            try:
                return f"worker killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"worker killed by signal {-code}"
        return f"worker exited with code {code}"

    def log_tail(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as log_file:
                log_file.seek(offset)
                text = log_file.read().decode(errors="replace")
        except OSError:
            return ""
        return text[-LOG_TAIL:]

    async def _reap(self) -> None:
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except asyncio.TimeoutError:
            self.kill()

    def kill(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class WorkerPool:
    """`settings.workers` workers, started in the background; `run` sends a request to a free one."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log_dir = Path(settings.cache_dir) / "logs"
        self.idle: asyncio.Queue[Worker | None] = asyncio.Queue()
        self.waiting = 0
        self.busy = 0
        self.workers: set[Worker] = set()
        self.started_workers = 0
        self.start_error: str | None = None
        self.failed = False  # a worker could not be started: the queue holds a None sentinel
        self._numbers = 0
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(self.settings.workers):
            self._spawn()

    async def close(self) -> None:
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for worker in list(self.workers):
            worker.kill()

    def ready_workers(self) -> int:
        return self.idle.qsize() - int(self.failed) + self.busy

    async def run(self, payload: dict, on_start: Callable[[], None] | None = None) -> dict:
        """The worker's response to `payload`; ExplorerError when busy, timed out or crashed."""
        if self.idle.empty() and self.waiting >= self.settings.queue_size:
            raise ExplorerError(
                "server busy: every worker is in use and the queue is full, try again later",
                f"{self.settings.workers} workers, {self.settings.queue_size} queued requests",
            )
        worker = await self._acquire()
        self.busy += 1
        if on_start:
            on_start()
        timeout = self.settings.request_timeout_s
        try:
            response = await worker.run(payload, timeout)
        except asyncio.TimeoutError:
            self._replace(worker)
            raise ExplorerError(
                f"time limit exceeded: the request ran longer than {timeout:g} s",
                "the worker running it was stopped (and replaced)",
            ) from None
        except WorkerDied as died:
            self._replace(worker)
            raise ExplorerError("the worker running the request crashed", str(died)) from None
        except BaseException:  # cancelled (job cancel, client gone): the worker may still be busy
            self._replace(worker)
            raise
        finally:
            self.busy -= 1
        if worker.served >= self.settings.max_worker_requests:
            self._replace(worker)  # user code may leave state behind: start afresh now and then
        else:
            self.idle.put_nowait(worker)
        return response

    async def _acquire(self) -> Worker:
        self.waiting += 1
        try:
            worker = await self.idle.get()
        finally:
            self.waiting -= 1
        if worker is None:  # the sentinel of a worker that could not be started: tell every waiter
            self.idle.put_nowait(None)
            raise ExplorerError("no worker could be started", self.start_error or "")
        return worker

    def _replace(self, worker: Worker) -> None:
        worker.kill()
        self.workers.discard(worker)
        if not self._closed:
            self._spawn()

    def _spawn(self) -> None:
        task = asyncio.get_running_loop().create_task(self._start_one())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _start_one(self) -> None:
        for attempt in range(3):
            self._numbers += 1
            worker = Worker(self._numbers, self.settings, self.log_dir)
            self.workers.add(worker)
            started = time.monotonic()
            try:
                await worker.start()
            except WorkerDied as err:
                self.workers.discard(worker)
                self.start_error = str(err)
                log.error("worker %d failed to start (attempt %d): %s", worker.number, attempt, err)
                continue
            except BaseException:
                worker.kill()
                self.workers.discard(worker)
                raise
            self.started_workers += 1
            log.info("worker %d ready in %.1f s", worker.number, time.monotonic() - started)
            self.idle.put_nowait(worker)
            return
        if not self.failed:
            self.failed = True
            self.idle.put_nowait(None)
