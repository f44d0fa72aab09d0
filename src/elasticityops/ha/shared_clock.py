"""One wall clock for every replica: the database server's.

An invocation's milestones are stamped by whichever replica does the step: the one that
accepts the request stamps `accepted`, the leader's dispatcher `dispatched`, and after a
failover another leader goes on. With each replica on its own clock, a replica a few seconds
off bends every timeline it touches: a follower ahead stamps `accepted` after the leader's
`dispatched` (the queue time reads 0, and ids, which sort by acceptance, jump the queue by the
skew), one behind adds its skew to the queue time and to eops_time_to_start_seconds. Stamping
by "the leader's clock" would not be enough: leadership moves, and with it the clock.

So every replica reads the one clock they all share, the PostgreSQL server's, as NTP does:
this replica's clock before a query, the server's `clock_timestamp()`, this replica's clock
after; the offset is the server's time minus the midpoint, uncertain by half the round trip.
Of a few readings the one with the shortest round trip is kept, and the offset is measured
again every `clock_sync_s` (clocks drift). `SharedClock.now()` is this replica's time plus the
offset; monotonic time and sleeps stay local (durations on one machine need no correction).

The lease does not depend on this (domain/lease.py compares no times written by another replica);
on SQLite there is one gateway, and no offset."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from elasticityops.background import Background
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import EopsError
from elasticityops.domain.ports import ClockReading, Housekeeping

log = logging.getLogger(__name__)

READINGS = 3  # per measurement: the shortest round trip of three is kept
TRUSTED_ROUND_TRIP_S = 1.0  # a reading slower than this says too little (+-0.5 s) to be used


@dataclass(frozen=True)
class Offset:
    """The other clock minus this one, and half the round trip it was measured in: the most
    it can be off by."""

    seconds: float
    uncertainty_s: float


def offset_of(reading: ClockReading) -> Offset:
    round_trip = (reading.received - reading.sent).total_seconds()
    midpoint = reading.sent + (reading.received - reading.sent) / 2
    return Offset((reading.remote - midpoint).total_seconds(), max(0.0, round_trip) / 2)


def best_offset(readings: Sequence[ClockReading]) -> Offset | None:
    """The offset of the reading with the shortest round trip; None when none is short enough."""
    offsets = [offset_of(r) for r in readings if (r.received - r.sent).total_seconds() >= 0]
    usable = [o for o in offsets if o.uncertainty_s * 2 <= TRUSTED_ROUND_TRIP_S]
    return min(usable, key=lambda o: o.uncertainty_s) if usable else None


class SharedClock:
    """`local` with its wall time moved by the measured offset (0 until one is measured)."""

    def __init__(self, local: Clock) -> None:
        self.local = local
        self.offset = Offset(0.0, 0.0)
        self._delta = timedelta(0)

    def set_offset(self, offset: Offset) -> None:
        self.offset = offset
        self._delta = timedelta(seconds=offset.seconds)

    def now(self) -> datetime:
        return self.local.now() + self._delta

    def monotonic(self) -> float:
        return self.local.monotonic()

    async def sleep(self, seconds: float) -> None:
        await self.local.sleep(seconds)


class ClockSync:
    """Measures the offset of `clock.local` to the database's clock now (`measure`) and then
    every `interval_s` in a task of its own; a failed or slow measurement keeps the last offset."""

    def __init__(self, store: Housekeeping, clock: SharedClock, interval_s: float) -> None:
        self._store = store
        self._clock = clock
        self._interval_s = interval_s
        self._loop_task = Background("clock sync")

    async def measure(self) -> Offset | None:
        readings: list[ClockReading] = []
        try:
            for _ in range(READINGS):
                reading = await self._store.clock_reading(self._clock.local.now)
                if reading is None:
                    return None
                readings.append(reading)
        except EopsError as exc:
            log.warning(
                "reading the database's clock failed (%s); keeping the offset %+.3f s",
                exc,
                self._clock.offset.seconds,
            )
            return None
        offset = best_offset(readings)
        if offset is None:
            return None
        if abs(offset.seconds - self._clock.offset.seconds) >= 1.0:
            log.warning(
                "this replica's clock is %+.3f s (+-%.3f s) off the database's; "
                "milestones are stamped on the database's",
                -offset.seconds,
                offset.uncertainty_s,
            )
        self._clock.set_offset(offset)
        return offset

    def start(self) -> None:
        if self._interval_s > 0:
            self._loop_task.start(self._run)

    async def stop(self) -> None:
        await self._loop_task.stop()

    async def _run(self) -> None:
        while True:
            await self._clock.sleep(self._interval_s)
            await self.measure()
