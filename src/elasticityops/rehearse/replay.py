"""Send a trace's requests at their arrival offsets, in real time, at most `max_in_flight` at
once. Time comes from an injected clock and each request goes out through an injected `send`,
so the schedule is tested on virtual time with a fake gateway; the driver gives it the real
clock and the gateway's client."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from elasticityops.domain.clock import Clock

LATE_S = 1.0
"""A request sent this much after its offset counts as late (the replay could not keep up)."""


@dataclass(frozen=True)
class Sent:
    """What became of request `index`: its invocation id, or the error its send ended with."""

    index: int
    invocation_id: str | None
    error: str
    sent_s: float  # when it went out, seconds since the replay began
    lag_s: float  # how long after its arrival offset

    @property
    def late(self) -> bool:
        return self.lag_s > LATE_S


async def replay(
    arrivals: Sequence[float],
    send: Callable[[int], Awaitable[str]],
    clock: Clock,
    *,
    max_in_flight: int,
    failures: tuple[type[BaseException], ...] = (),
    on_sent: Callable[[Sent], None] | None = None,
) -> list[Sent]:
    """Call `send(i)` at `arrivals[i]` seconds after the start (sorted ascending); an exception
    of a `failures` type is recorded as that request's error, any other propagates. Returns
    one `Sent` per request, in trace order, once every send has ended."""
    if max_in_flight < 1:
        raise ValueError("max_in_flight must be >= 1")
    start = clock.monotonic()
    slots = asyncio.Semaphore(max_in_flight)
    results: list[Sent | None] = [None] * len(arrivals)

    async def one(index: int, offset: float) -> None:
        sent_s = clock.monotonic() - start
        try:
            inv_id, error = await send(index), ""
        except failures as exc:
            inv_id, error = None, str(exc) or type(exc).__name__
        finally:
            slots.release()
        done = Sent(index, inv_id, error, sent_s, max(0.0, sent_s - offset))
        results[index] = done
        if on_sent is not None:
            on_sent(done)

    tasks: list[asyncio.Task[None]] = []
    try:
        for index, offset in enumerate(arrivals):
            delay = start + offset - clock.monotonic()
            if delay > 0:
                await clock.sleep(delay)
            await slots.acquire()
            tasks.append(asyncio.create_task(one(index, float(offset))))
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    return [r for r in results if r is not None]
