"""The queue of free workers, fair between clients: requests wait grouped by client, and a worker that
frees up goes to the clients in turn (round-robin among the clients that have requests waiting),
first come first served within one client. A client with many slow requests queued delays another
client's request by at most one request per client waiting, not by all of its own.

>>> async def demo():
...     queue, order = FairQueue(), []
...     async def take(client, n):
...         order.append(f"{client}{n} got {await queue.get(client)}")
...     clients = [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
...     tasks = [asyncio.create_task(take(client, n)) for client, n in clients]
...     await asyncio.sleep(0)  # all four wait
...     for worker in "wxyz":
...         queue.put(worker)
...     await asyncio.gather(*tasks)
...     return order
>>> from concurrent.futures import ThreadPoolExecutor  # a loop of its own, whoever calls
>>> ThreadPoolExecutor(1).submit(asyncio.run, demo()).result()
['a1 got w', 'b1 got x', 'a2 got y', 'a3 got z']
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    """Free items and the requests waiting for one. Free items and waiters never coexist: `put` hands
    an item straight to a waiter when there is one."""

    def __init__(self) -> None:
        self._free: deque[T] = deque()
        # Waiters by client, FIFO; clients in turn order (the next to be served first).
        self._waiters: OrderedDict[Hashable, deque[asyncio.Future[T]]] = OrderedDict()

    @property
    def free(self) -> int:
        """Items that are free (no request waits)."""
        return len(self._free)

    @property
    def waiting(self) -> int:
        """Requests waiting for an item, all clients together."""
        return sum(len(waiters) for waiters in self._waiters.values())

    def waiting_for(self, client: Hashable) -> int:
        """Requests of `client` waiting for an item."""
        return len(self._waiters.get(client, ()))

    def put(self, item: T) -> None:
        """Hand `item` to the first waiter of the client whose turn it is (that client then goes to the
        back of the turn order), or keep it free when nobody waits."""
        while self._waiters:
            client, waiters = next(iter(self._waiters.items()))
            future = waiters.popleft()
            if waiters:
                self._waiters.move_to_end(client)
            else:
                del self._waiters[client]
            if not future.done():
                future.set_result(item)
                return
        self._free.append(item)

    async def get(self, client: Hashable) -> T:
        """A free item, once it is `client`'s turn. A cancelled waiter leaves the queue; an item handed
        to it as it was cancelled goes to the next waiter."""
        if self._free:
            return self._free.popleft()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if client not in self._waiters:
            self._waiters[client] = deque()  # a new client takes its turn after those waiting
        self._waiters[client].append(future)
        try:
            return await future
        except asyncio.CancelledError:
            if not future.done() or future.cancelled():
                self._forget(client, future)
            elif future.exception() is None:
                self.put(future.result())
            raise

    def fail_waiters(self, error: BaseException) -> None:
        """Raise `error` in every waiting request (no item will come)."""
        waiters, self._waiters = self._waiters, OrderedDict()
        for queue in waiters.values():
            for future in queue:
                if not future.done():
                    future.set_exception(error)

    def _forget(self, client: Hashable, future: asyncio.Future[T]) -> None:
        waiters = self._waiters.get(client)
        if waiters is not None and future in waiters:
            waiters.remove(future)
            if not waiters:
                del self._waiters[client]
