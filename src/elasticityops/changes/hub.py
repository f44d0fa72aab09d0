"""Notifications: who is waiting for which invocation to change.

The API's `?wait=` and log followers wait here instead of polling the store. A change this
replica makes (its dispatcher's, its routes') fires at once; one another replica on the same
database made is found by the change poller (changes/replicas.py), which compares what the
store says with what each waiter last saw (`Watch.saw`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

from elasticityops.background import wait_set


@dataclass(eq=False)
class Watch:
    """One waiter's subscription: `wait()` on `event`; tell `saw` what it read."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    seen: Hashable | None = None

    def saw(self, stamp: Hashable) -> None:
        """What the waiter read from the store after subscribing (the poller's stamp of it:
        state and attempt): a store that says otherwise later wakes it."""
        self.seen = stamp

    async def wait(self) -> bool:
        return await self.event.wait()


class ChangeHub:
    def __init__(self) -> None:
        self._waiters: dict[str, set[Watch]] = {}
        self._work = asyncio.Event()
        self._someone_waits = asyncio.Event()
        self._listeners: list[Callable[[str], None]] = []

    def changed(self, invocation_id: str) -> None:
        """An invocation changed state (or was accepted); wake whoever waits on it."""
        for watch in self._waiters.pop(invocation_id, ()):
            watch.event.set()
        if not self._waiters:
            self._someone_waits.clear()
        for listener in self._listeners:
            listener(invocation_id)

    def listen(self, listener: Callable[[str], None]) -> None:
        """Call `listener(id)` on every change from now on, not just those of one invocation
        (the console's event feed, api/console/feed.py). It must not block: it runs inline."""
        self._listeners.append(listener)

    def unlisten(self, listener: Callable[[str], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    @contextlib.contextmanager
    def watch(self, invocation_id: str) -> Iterator[Watch]:
        """Subscribe BEFORE reading the store, then await the watch: a change that lands between
        the read and the wait is not missed. It fires once; watch again for the next.

        The hub carries no data, so it cannot be stale: callers re-read the store after waking."""
        watch = Watch()
        self._waiters.setdefault(invocation_id, set()).add(watch)
        self._someone_waits.set()
        try:
            yield watch
        finally:
            waiters = self._waiters.get(invocation_id)
            if waiters is not None:
                waiters.discard(watch)
                if not waiters:
                    del self._waiters[invocation_id]
            if not self._waiters:
                self._someone_waits.clear()

    def waited_on(self) -> dict[str, list[Hashable]]:
        """Each invocation someone waits on, with what its waiters saw (those that have read)."""
        return {
            invocation_id: [w.seen for w in watches if w.seen is not None]
            for invocation_id, watches in self._waiters.items()
        }

    async def until_someone_waits(self) -> None:
        await self._someone_waits.wait()

    def work_available(self) -> None:
        """New work was queued or capacity was freed: wake the dispatcher."""
        self._work.set()

    async def wait_for_work(self, tick_s: float) -> None:
        """Return when work is signalled, or after `tick_s` seconds at the latest."""
        await wait_set(self._work, tick_s)
        self._work.clear()
