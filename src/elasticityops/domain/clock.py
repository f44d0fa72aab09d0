"""Time as a dependency: every `now()` and sleep goes through a Clock, so tests and the
planner can run on virtual time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes backwards."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """Virtual time that holds still: it moves only when a test says so.

    `sleep` waits for its deadline on this clock; `advance` moves the clock and wakes the
    sleepers whose deadline has come. A background loop that sleeps (a sweep, a watch's back-off)
    therefore waits like it would on the system clock instead of spinning virtual time forward
    (the old clock advanced itself on every sleep: a probe saw a week pass in half a second).
    For an operation whose own sleeps are the subject of a test (retries, pacing), `run` drives
    it: whenever it has been blocked for a moment of real time, the clock jumps to the next
    deadline (trio's MockClock autojump, limited to what the test is waiting for)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        """Move the clock `seconds` forward and wake every sleeper due by then."""
        if seconds < 0:
            raise ValueError(f"a clock never goes back (advance({seconds}))")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), future))
        await future

    def next_deadline(self) -> float | None:
        """Seconds until the earliest sleeper is due; None when nobody sleeps."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # cancelled sleepers
        return None if not self._sleepers else max(0.0, self._sleepers[0][0] - self._mono)

    async def run(self, awaitable: Awaitable[T], *, idle_s: float = 0.02, limit_s: float = 30.0) -> T:
        """Await `awaitable`; each time it has been blocked for `idle_s` of real time while
        someone sleeps on this clock, jump to the earliest deadline. Gives up (TimeoutError)
        after `limit_s` of real time."""
        task = asyncio.ensure_future(awaitable)
        give_up = time.monotonic() + limit_s
        while True:
            done, _ = await asyncio.wait({task}, timeout=idle_s)
            if done:
                return task.result()
            if time.monotonic() > give_up:
                task.cancel()
                raise TimeoutError(f"still waiting after {limit_s:g} s of real time")
            step = self.next_deadline()
            if step is not None:
                self.advance(step)
