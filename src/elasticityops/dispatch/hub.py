"""In-process notifications: who is waiting for which invocation to change.

The gateway and the dispatcher run in one process; the API's `?wait=` and log followers wait
here instead of polling the store."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterator


class ChangeHub:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)
        self._work = asyncio.Event()

    def changed(self, invocation_id: str) -> None:
        """An invocation changed state; wake whoever waits on it."""
        for event in self._waiters.pop(invocation_id, ()):
            event.set()

    @contextlib.contextmanager
    def watch(self, invocation_id: str) -> Iterator[asyncio.Event]:
        """Subscribe BEFORE reading the store, then await the event: a change that lands between
        the read and the wait is not missed. The event fires once; watch again for the next.

        The hub carries no data, so it cannot be stale: callers re-read the store after waking."""
        event = asyncio.Event()
        self._waiters[invocation_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(invocation_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[invocation_id]

    def work_available(self) -> None:
        """New work was queued or capacity was freed: wake the dispatcher."""
        self._work.set()

    async def wait_for_work(self, tick_s: float) -> None:
        """Return when work is signalled, or after `tick_s` seconds at the latest."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._work.wait(), tick_s)
        self._work.clear()
