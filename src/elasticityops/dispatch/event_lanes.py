"""Backend events recorded in order per invocation, and for different invocations at once."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

from elasticityops.domain.events import BackendEvent


class EventLanes:
    """Backend events recorded in order per invocation, and for different invocations at once.

    The backend's watch hands over an event and goes on at once instead of waiting for its
    durable commit, so a burst's events share group commits (one watch recording one event per
    fsync fell minutes behind 1,000 Jobs) while each invocation still sees its events in order."""

    def __init__(self, record: Callable[[BackendEvent], Awaitable[None]], concurrency: int) -> None:
        self._record = record
        self._queues: dict[str, deque[BackendEvent]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(concurrency)

    def put(self, event: BackendEvent) -> None:
        queue = self._queues.get(event.invocation_id)
        if queue is not None:
            queue.append(event)  # its lane is running: it takes this one in turn
            return
        self._queues[event.invocation_id] = deque([event])
        task = asyncio.create_task(self._drain(event.invocation_id), name=f"events {event.invocation_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, invocation_id: str) -> None:
        queue = self._queues[invocation_id]
        try:
            async with self._slots:
                while queue:
                    await self._record(queue[0])
                    queue.popleft()
        finally:
            # No await between the last check of `queue` and here: a put() for this invocation
            # either landed in the queue above or finds no lane and starts a new one.
            del self._queues[invocation_id]

    async def drain(self, seconds: float) -> None:
        """Wait (at most `seconds`) until every event handed over has been recorded."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=seconds)
        for task in list(self._tasks):
            task.cancel()
