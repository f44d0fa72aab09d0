"""Background tasks, started and stopped one way everywhere (as kopf's aiotasks does it).

A component's loop (the dispatcher's, the headroom controller's, the change poller's, a watch)
runs in a `Background` slot: `start` makes the task unless one is running, `stop` cancels it and
waits until it has ended, so nothing of it runs after `stop` returns. `cancelled_and_done` does
the same for tasks held in other shapes (a dict of per-invocation tasks)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterable
from typing import Any


async def wait_set(event: asyncio.Event, seconds: float | None) -> bool:
    """Whether `event` is set within `seconds` (None: wait until it is). Not
    `asyncio.wait_for(event.wait(), ...)`: on Python 3.11 that returns the event's result when a
    cancellation and the event come together, and the cancellation is lost (cpython gh-86296), so
    a loop around it is never stopped and whoever awaits its end waits for ever (a gateway's
    webhook deliverer, woken every 0.1 s, hung a test's stop so). `asyncio.timeout` tells its own
    cancellation from a caller's."""
    if event.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
            return True
    return False


async def cancelled_and_done(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel each task, then wait for each to end. A task's own error comes out here as it
    would from awaiting it; its cancellation does not."""
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Background:
    """At most one task at a time, named for the logs and for `asyncio.all_tasks()`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def task(self) -> asyncio.Task[None] | None:
        return self._task

    def start(self, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start `run()` unless a task is running (one that ended is replaced)."""
        if not self.running:
            self._task = asyncio.create_task(run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the task and wait for it to end (nothing when none was started)."""
        task, self._task = self._task, None
        await cancelled_and_done([task])
