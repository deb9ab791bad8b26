"""The fair queue of free workers, and the pool's use of it, without processes: turn order between
clients, waiters that leave, the time limit sent to the worker, and what /health counts as ready."""

from __future__ import annotations

import asyncio
import pytest
from event_loop import run_coroutine as run

from mirai.explorer import pool as pool_module
from mirai.explorer.errors import ExplorerError
from mirai.explorer.fairqueue import FairQueue
from mirai.explorer.pool import ServerBusy, WorkerDied, WorkerPool
from mirai.explorer.settings import Settings


async def waiting(queue: FairQueue, client: str) -> asyncio.Task:
    task = asyncio.create_task(queue.get(client))
    await asyncio.sleep(0)
    return task


def test_clients_take_turns_and_each_is_fifo():
    async def scenario() -> list[str]:
        queue = FairQueue()
        order = []

        async def take(name: str) -> None:
            await queue.get(name[0])
            order.append(name)

        tasks = []
        for name in ("a1", "a2", "a3", "a4", "b1", "b2", "c1"):
            tasks.append(asyncio.create_task(take(name)))
            await asyncio.sleep(0)
        assert queue.waiting == 7 and queue.waiting_for("a") == 4
        for item in range(7):
            queue.put(item)
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    assert run(scenario()) == ["a1", "b1", "c1", "a2", "b2", "a3", "a4"]


def test_free_items_are_taken_at_once():
    async def scenario() -> None:
        queue = FairQueue()
        queue.put("w")
        assert queue.free == 1
        assert await queue.get("a") == "w"
        assert queue.free == 0 and queue.waiting == 0

    run(scenario())


def test_a_cancelled_waiter_leaves_the_queue():
    async def scenario() -> None:
        queue = FairQueue()
        first, second = await waiting(queue, "a"), await waiting(queue, "b")
        first.cancel()
        await asyncio.sleep(0)
        assert first.cancelled()
        assert queue.waiting == 1 and queue.waiting_for("a") == 0
        queue.put("w")
        assert await second == "w"
        assert queue.waiting == 0 and queue.free == 0

    run(scenario())


def test_an_item_handed_to_a_leaving_waiter_goes_to_the_next():
    async def scenario() -> None:
        queue = FairQueue()
        first, second = await waiting(queue, "a"), await waiting(queue, "b")
        queue.put("w")  # `first` has the item but has not run yet
        first.cancel()
        assert await second == "w"
        assert first.cancelled()

    run(scenario())


def test_fail_waiters():
    async def scenario() -> None:
        queue = FairQueue()
        task = await waiting(queue, "a")
        queue.fail_waiters(ExplorerError("no worker could be started"))
        with pytest.raises(ExplorerError):
            await task
        assert queue.waiting == 0

    run(scenario())


class FakeWorker:
    """Stands in for a worker process: `start` and `run` wait for the test to let them go."""

    instances: list["FakeWorker"] = []
    start_ok = True

    def __init__(self, number, settings, log_dir) -> None:
        self.number = number
        self.ready = False
        self.served = 0
        self.killed = False
        self.started = asyncio.Event()
        self.exited = asyncio.Event()
        self.answer: asyncio.Future = asyncio.get_running_loop().create_future()
        self.messages: list[tuple[dict, float]] = []
        FakeWorker.instances.append(self)

    async def start(self) -> None:
        await self.started.wait()
        if not FakeWorker.start_ok:
            raise WorkerDied("worker exited while starting")
        self.ready = True

    async def run(self, payload: dict, timeout_s: float) -> dict:
        self.messages.append((payload, timeout_s))
        result = await asyncio.wait_for(asyncio.shield(self.answer), timeout_s)
        self.answer = asyncio.get_running_loop().create_future()
        self.served += 1
        return result

    def alive(self) -> bool:
        return not self.killed

    async def wait(self) -> None:
        await self.exited.wait()

    def kill(self) -> None:
        self.killed, self.ready = True, False
        self.exited.set()

    def describe_exit(self) -> str:
        return "killed"


@pytest.fixture
def fake_workers(monkeypatch):
    monkeypatch.setattr(pool_module, "Worker", FakeWorker)
    monkeypatch.setattr(pool_module, "TIMEOUT_GRACE_S", 0.05)
    FakeWorker.instances = []
    FakeWorker.start_ok = True
    return FakeWorker


def make_pool(tmp_path, **settings) -> WorkerPool:
    return WorkerPool(Settings(cache_dir=tmp_path, **settings))


def test_pool_sends_the_time_limit_and_kills_a_worker_past_it(fake_workers, tmp_path):
    async def scenario() -> None:
        pool = make_pool(tmp_path, workers=1, request_timeout_s=0.1)
        pool.start()
        await asyncio.sleep(0)
        assert pool.ready_workers() == 0  # starting
        fake_workers.instances[0].started.set()
        await asyncio.sleep(0)
        assert pool.ready_workers() == 1
        with pytest.raises(ExplorerError) as err:
            await pool.run({"request": {}})
        assert err.value.message == "time limit exceeded: the request ran longer than 0.1 s"
        first = fake_workers.instances[0]
        assert first.messages == [({"request": {}, "timeout_s": 0.1}, 0.1 + 0.05)]
        assert first.killed
        # While its replacement warms up, no worker is ready.
        await asyncio.sleep(0)
        assert pool.ready_workers() == 0 and pool.busy == 0
        fake_workers.instances[1].started.set()
        await asyncio.sleep(0)
        assert pool.ready_workers() == 1
        await pool.close()

    run(scenario())


def test_a_worker_that_dies_idle_is_replaced_at_once(fake_workers, tmp_path):
    async def scenario() -> None:
        pool = make_pool(tmp_path, workers=2)
        pool.start()
        await asyncio.sleep(0)
        for worker in fake_workers.instances:
            worker.started.set()
        await asyncio.sleep(0)
        assert pool.ready_workers() == 2
        fake_workers.instances[0].kill()  # as if from outside
        await asyncio.sleep(0.01)
        assert pool.ready_workers() == 1 and len(fake_workers.instances) == 3
        assert pool.idle.free == 2  # the dead one is still in the queue: never handed out
        for _ in range(2):
            worker = await pool._acquire("a")
            assert worker is fake_workers.instances[1]
            pool.idle.put(worker)
        fake_workers.instances[2].started.set()
        await asyncio.sleep(0)
        assert pool.ready_workers() == 2
        await pool.close()

    run(scenario())


def test_pool_serves_clients_in_turn_and_limits_the_queue(fake_workers, tmp_path):
    async def scenario() -> list[str]:
        pool = make_pool(tmp_path, workers=1, queue_size=4)
        pool.start()
        await asyncio.sleep(0)
        worker = fake_workers.instances[0]
        worker.started.set()
        order = []

        async def request(name: str) -> None:
            await pool.run({"name": name}, client=name[0])
            order.append(name)

        tasks = []
        for name in ("a1", "a2", "a3", "b1"):
            tasks.append(asyncio.create_task(request(name)))
            await asyncio.sleep(0)
        assert pool.busy == 1 and pool.waiting == 3
        with pytest.raises(ServerBusy) as per_client:  # a2, a3 wait: a's half of the queue
            await pool.run({}, client="a")
        assert per_client.value.message.startswith("server busy")
        tasks.append(asyncio.create_task(request("c1")))
        await asyncio.sleep(0)
        with pytest.raises(ServerBusy) as full:
            await pool.run({}, client="d")
        assert full.value.headers == {"Retry-After": "20"}
        while len(order) < 5:
            worker.answer.set_result({"status": "ok", "output": ""})
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
        await pool.close()
        return order

    assert run(scenario()) == ["a1", "a2", "b1", "c1", "a3"]


def test_pool_that_cannot_start_a_worker_says_so(fake_workers, tmp_path):
    async def scenario() -> None:
        fake_workers.start_ok = False
        pool = make_pool(tmp_path, workers=1)
        pool.start()
        waiter = asyncio.create_task(pool.run({}))
        await asyncio.sleep(0)
        for _ in range(3):  # three attempts
            fake_workers.instances[-1].started.set()
            await asyncio.sleep(0.01)
        with pytest.raises(ExplorerError) as err:
            await waiter
        assert err.value.message == "no worker could be started"
        with pytest.raises(ExplorerError):
            await pool.run({})
        assert pool.ready_workers() == 0
        await pool.close()

    run(scenario())


def test_settings_defaults():
    settings = Settings()
    assert settings.request_timeout_s == 20 and settings.tool_timeout_s == 20
    assert settings.max_body_mb == 4
    # A tool may not run longer than the request that runs it.
    assert Settings(request_timeout_s=5).worker_config()["tool_timeout_s"] == 5
