"""Replicas stamp milestones on the database server's clock (ha/shared_clock.py): the offset of
a replica's clock is measured against a real PostgreSQL server, and a SQLite file (one gateway)
has none. The replica's clock here is the system's moved by a known skew, as faketime moves a
whole process in the cluster test (tests/backends/kubernetes/test_skewed_clock_cluster.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.clock import SystemClock
from elasticityops.domain.ports import ClockReading
from elasticityops.ha.shared_clock import ClockSync, Offset, SharedClock, best_offset, offset_of
from elasticityops.store.sql import SqlStore

T = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


def _reading(sent_ms: int, remote_ms: int, received_ms: int) -> ClockReading:
    ms = timedelta(milliseconds=1)
    return ClockReading(T + sent_ms * ms, T + remote_ms * ms, T + received_ms * ms)


@pytest.mark.parametrize(
    ("reading", "seconds", "uncertainty"),
    [
        pytest.param(_reading(0, 5, 10), 0.0, 0.005, id="in-step"),
        pytest.param(_reading(0, 5005, 10), 5.0, 0.005, id="remote-ahead"),
        pytest.param(_reading(0, -4995, 10), -5.0, 0.005, id="remote-behind"),
    ],
)
def test_the_offset_is_the_remote_time_minus_the_midpoint(
    reading: ClockReading, seconds: float, uncertainty: float
) -> None:
    # pytest.approx for the fields: each compares as the float it stands for
    assert offset_of(reading) == Offset(pytest.approx(seconds), pytest.approx(uncertainty))  # type: ignore[arg-type]


def test_the_shortest_round_trip_wins_and_slow_readings_say_nothing() -> None:
    slow, quick = _reading(0, 400, 600), _reading(0, 5002, 4)
    assert best_offset([slow, quick]).seconds == pytest.approx(5.0)  # type: ignore[union-attr]
    assert best_offset([_reading(0, 700, 1500)]) is None  # +-0.75 s: too vague to correct by


class SkewedClock(SystemClock):
    def __init__(self, skew_s: float) -> None:
        self.skew = timedelta(seconds=skew_s)

    def now(self) -> datetime:
        return super().now() + self.skew


@pytest.mark.parametrize("skew_s", [5.0, -5.0])
def test_a_skewed_replica_stamps_on_the_database_servers_clock(
    store: SqlStore, run: asyncio.Runner, skew_s: float
) -> None:
    shared = SharedClock(SkewedClock(skew_s))
    offset = run.run(ClockSync(store, shared, interval_s=0).measure())
    if store.dialect == "sqlite":
        # A file has no clock of its own; one gateway, on one machine, uses its own.
        assert offset is None
        assert shared.offset == Offset(0.0, 0.0)
        return
    assert offset is not None
    # The PostgreSQL server is this machine, on the system clock: the skew is measured away.
    assert offset.seconds == pytest.approx(-skew_s, abs=0.05)
    assert offset.uncertainty_s < 0.05
    assert abs((shared.now() - datetime.now(UTC)).total_seconds()) < 0.05
    assert shared.monotonic() == pytest.approx(SystemClock().monotonic(), abs=0.05)
