"""The pool of pre-warmed worker processes that run requests (user code never runs in the server).

Each worker (`mirai.explorer.worker`) handles one request at a time. Past the pool, requests wait, up
to `queue_size` of them (one client at most half of them), and free workers go to the waiting clients
in turn (`mirai.explorer.fairqueue`); one request more gets a clear "server busy" error
(`ServerBusy`, answered with a Retry-After header). Each request carries its time limit
(`timeout_s`) to the worker, which stops the request itself; a worker that has not answered
`TIMEOUT_GRACE_S` after the limit is killed (with everything it started) and replaced. One that dies
is replaced and its log's tail is returned as the error's detail.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import shutil
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mirai.explorer import sandbox
from mirai.explorer.errors import ExplorerError
from mirai.explorer.fairqueue import FairQueue
from mirai.explorer.settings import Settings

log = logging.getLogger("mirai.explorer")

READY_TIMEOUT_S = 300.0
STREAM_LIMIT = 1 << 30  # a response is one JSON line; IR dumps can be large
LOG_TAIL = 6000
LOG_LIMIT = 8 << 20  # a worker's log is emptied before a request when it has grown past this
# How long past a request's time limit the server still waits for the worker's own answer.
TIMEOUT_GRACE_S = 5.0


class WorkerDied(Exception):
    pass


@dataclass(frozen=True)
class PoolStats:
    """What /health reports of the workers: `ready` warm and alive (idle or busy), `busy` running a
    request, `queued` requests waiting for one."""

    ready: int
    busy: int
    queued: int


class ServerBusy(ExplorerError):
    """Every worker is in use and the queue (or the client's share of it) is full."""

    def __init__(self, message: str, detail: str, retry_after_s: int) -> None:
        super().__init__(message, detail, headers={"Retry-After": str(retry_after_s)})
        self.retry_after_s = retry_after_s


class Worker:
    """One worker process and its JSON-lines pipe."""

    def __init__(self, number: int, settings: Settings, log_dir: Path) -> None:
        self.number = number
        self.settings = settings
        self.log_path = log_dir / f"worker-{number}.log"
        self.scratch: Path | None = None  # without the sandbox: the folder of its requests
        self.proc: asyncio.subprocess.Process | None = None
        self.served = 0
        self.ready = False  # started and warm; false again once it is being replaced

    async def start(self) -> None:
        config = self.settings.worker_config()
        command = [sys.executable, "-m", "mirai.explorer.worker"]
        env = None
        launch = None
        if self.settings.sandbox:
            try:
                launch = sandbox.worker_launch(
                    [*command, json.dumps(config)],
                    slot=self.number,
                    scratch_mb=self.settings.scratch_mb,
                    host_tmp_visible=self.settings.any_user_tool,
                )
            except ExplorerError as err:
                raise WorkerDied(f"{err.message}\n{err.detail}") from None
            command, env = launch.argv, launch.env
            # --allow-user-tools (one user, own machine): requests keep the sandbox's root user,
            # the server's own, so a tool in that user's private temporary folder can be run.
            config["request_uid"] = None if self.settings.any_user_tool else launch.request_uid
            command[-1] = json.dumps(config)
        else:
            # No sandbox: the requests' folders go under the server's cache dir, in a folder of this
            # worker's that goes with it, whatever becomes of its requests.
            self.scratch = Path(self.settings.cache_dir) / "scratch" / f"worker-{self.number}"
            self.scratch.mkdir(parents=True, exist_ok=True)
            env = {**os.environ, "TMPDIR": str(self.scratch)}
            command = [*command, json.dumps(config)]
        try:
            with open(self.log_path, "ab") as log_file:
                self.proc = await asyncio.create_subprocess_exec(
                    *command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=log_file,
                    start_new_session=True,
                    limit=STREAM_LIMIT,
                    env=env,
                    pass_fds=launch.pass_fds if launch else (),
                )
        finally:
            if launch:
                launch.release()
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.kill()
            raise WorkerDied(f"worker not ready after {READY_TIMEOUT_S:g} s") from None
        if not line:
            raise WorkerDied(f"worker exited while starting:\n{self.log_tail(0)}")
        self.ready = True

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def wait(self) -> None:
        """Until the process has exited."""
        await self.proc.wait()

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
        """Kill the worker with everything it started; remove its requests' folder (no sandbox)."""
        self.ready = False
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


class WorkerPool:
    """`settings.workers` workers, started in the background; `run` sends a request to a free one."""

    caches_results = False  # the service caches what `run` answers (a broker's workers do it there)

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log_dir = Path(settings.cache_dir) / "logs"
        self.idle: FairQueue[Worker] = FairQueue()
        self.busy = 0
        self.workers: set[Worker] = set()  # started or starting, not yet replaced
        self.started_workers = 0
        self.start_error: str | None = None
        self._starting = 0  # workers being started
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

    @property
    def waiting(self) -> int:
        """Requests waiting for a worker."""
        return self.idle.waiting

    @property
    def client_queue_size(self) -> int:
        """Requests one client may have waiting: half the queue (at least one when there is a queue)."""
        return max(1, self.settings.queue_size // 2) if self.settings.queue_size else 0

    async def stats(self) -> PoolStats:
        return PoolStats(ready=self.ready_workers(), busy=self.busy, queued=self.waiting)

    def ready_workers(self) -> int:
        """Workers idle or running a request: warm, alive, and not being replaced."""
        return sum(1 for worker in self.workers if worker.ready and worker.alive())

    async def run(
        self, payload: dict, on_start: Callable[[], None] | None = None, client: str = ""
    ) -> dict:
        """The worker's response to `payload`, once `client`'s turn comes; ServerBusy when the queue is
        full, ExplorerError when timed out or crashed."""
        self._check_room(client)
        worker = await self._acquire(client)
        self.busy += 1
        if on_start:
            on_start()
        timeout = self.settings.request_timeout_s
        try:
            # The worker stops the request at `timeout_s`; the server kills it a grace later.
            message = {**payload, "timeout_s": timeout}
            response = await worker.run(message, timeout + TIMEOUT_GRACE_S)
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
        elif worker in self.workers:  # not replaced meanwhile (it died just after answering)
            self.idle.put(worker)
        return response

    def _check_room(self, client: str) -> None:
        if self.idle.free:
            return
        workers, queue_size = self.settings.workers, self.settings.queue_size
        # Within one time limit every running request ends and frees its worker for a waiting one.
        retry = math.ceil(self.settings.request_timeout_s)
        when = f"retry in {retry} s (Retry-After)"
        if self.idle.waiting >= queue_size:
            raise ServerBusy(
                "server busy: every worker is in use and the queue is full, try again later",
                f"{workers} workers, {queue_size} queued requests; {when}",
                retry,
            )
        if self.idle.waiting_for(client) >= self.client_queue_size:
            raise ServerBusy(
                "server busy: this client already has as many requests queued as one client may,"
                " try again later",
                f"{self.client_queue_size} queued requests per client; {when}",
                retry,
            )

    async def _acquire(self, client: str) -> Worker:
        while True:
            if self._none_coming():
                raise ExplorerError("no worker could be started", self.start_error)
            worker = await self.idle.get(client)
            if worker.alive():
                return worker
            self._replace(worker)  # died while idle, before its watch noticed

    def _replace(self, worker: Worker) -> None:
        worker.kill()
        if worker not in self.workers:  # replaced already
            return
        self.workers.discard(worker)
        if not self._closed:
            self._spawn()

    async def _watch(self, worker: Worker) -> None:
        """Replace the worker as soon as it dies on its own, idle or not: /health stops counting it
        and its replacement warms up before a request needs it."""
        await worker.wait()
        if worker in self.workers:
            log.error("worker %d died: %s", worker.number, worker.describe_exit())
            self._replace(worker)

    def _track(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _spawn(self) -> None:
        self._starting += 1
        self._track(self._start_one())

    def _none_coming(self) -> bool:
        """No worker is alive or starting: nothing will ever serve a waiting request."""
        return not self.workers and not self._starting

    async def _start_one(self) -> None:
        try:
            started = await self._start_worker()
        finally:
            self._starting -= 1
        if not started and self._none_coming():
            self.idle.fail_waiters(ExplorerError("no worker could be started", self.start_error))

    async def _start_worker(self) -> bool:
        """Start a worker (three attempts) and make it free; whether that worked."""
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
            self._track(self._watch(worker))
            self.idle.put(worker)
            return True
        return False
