"""The elector's loop on virtual time over an in-memory LeaseStore that keeps resourceVersions
as the API server does (a write at an old one is a Conflict). The same loop against the real
kube-apiserver: tests/backends/kubernetes/test_lease_cluster.py."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

import pytest

from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import TemporaryError
from elasticityops.ha.elector import LeaderElector
from elasticityops.ha.settings import JITTER_FACTOR, LeaderElectionSettings

from .memory_leases import Leases, Replica

pytestmark = pytest.mark.anyio

SETTINGS = LeaderElectionSettings(
    leader_elect=True, lease_duration_s=15, renew_deadline_s=10.0, retry_period_s=2.0
)
# The longest a follower waits between two looks.
LOOK = SETTINGS.retry_period_s * (1 + JITTER_FACTOR)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Duties:
    """What the gateway's leader runs, as a log of starts and stops with their times."""

    clock: ManualClock
    log: list[tuple[str, float]] = field(default_factory=list)

    async def start(self) -> None:
        self.log.append(("start", self.clock.monotonic()))

    async def stop(self) -> None:
        self.log.append(("stop", self.clock.monotonic()))


def elector(name: str, replica: Replica, clock: ManualClock, duties: Duties, seed: int = 1) -> LeaderElector:
    return LeaderElector(
        replica,
        name,
        SETTINGS,
        clock,
        on_started_leading=duties.start,
        on_stopped_leading=duties.stop,
        rng=random.Random(seed),
    )


@asynccontextmanager
async def running(*electors: LeaderElector) -> AsyncIterator[None]:
    for e in electors:
        e.start()
    try:
        yield
    finally:
        for e in electors:
            await e.stop(release=False)


async def until(clock: ManualClock, awaitable: Awaitable[object]) -> float:
    """Drive virtual time until `awaitable` is done; the monotonic time then."""
    await clock.run(awaitable)
    return clock.monotonic()


async def test_a_lone_replica_creates_the_lease_leads_and_renews_every_retry_period() -> None:
    clock, leases = ManualClock(), Leases()
    duties = Duties(clock)
    a = elector("a", Replica(leases), clock, duties)
    async with running(a):
        await until(clock, a.started_leading.wait())
        assert a.is_leader
        assert a.leader == "a"
        assert leases.record is not None
        assert leases.record.holder == "a"
        assert leases.record.transitions == 0
        start = clock.monotonic()
        await until(clock, clock.sleep(3 * SETTINGS.retry_period_s + 0.1))
        renewals = [w for w in leases.writes[1:] if w.holder == "a"]
        assert len(renewals) == 3, leases.writes
        assert all(w.acquire_time == leases.writes[0].acquire_time for w in renewals)
        assert renewals[-1].renew_time is not None
        assert renewals[0].renew_time is not None
        assert renewals[-1].renew_time > renewals[0].renew_time
        assert duties.log == [("start", 0.0)]
        assert start == 0.0


async def test_a_follower_takes_over_a_silent_leader_after_the_lease_duration_on_its_clock() -> None:
    clock, leases = ManualClock(), Leases()
    duties_a, duties_b = Duties(clock), Duties(clock)
    a = elector("a", Replica(leases), clock, duties_a)
    b = elector("b", Replica(leases), clock, duties_b, seed=2)
    async with running(a):
        await until(clock, a.started_leading.wait())
        async with running(b):
            await until(clock, clock.sleep(20))
            assert not b.is_leader, "a renews: b waits however long"
            assert b.leader == "a"
            # a dies (SIGKILL): no release, no more renewals.
            assert a._election.task is not None
            a._election.task.cancel()
            killed = clock.monotonic()
            took = await until(clock, b.started_leading.wait()) - killed
            # b saw a's last renewal at most one look after it was written, and looks again
            # at most one look after the lease expired.
            assert SETTINGS.lease_duration_s - SETTINGS.retry_period_s <= took
            assert took <= SETTINGS.lease_duration_s + 2 * LOOK
            assert leases.record is not None
            assert leases.record.holder == "b"
            assert leases.record.transitions == 1
            assert duties_b.log == [("start", clock.monotonic())]


async def test_a_graceful_stop_releases_and_the_follower_takes_over_at_its_next_look() -> None:
    clock, leases = ManualClock(), Leases()
    duties_a, duties_b = Duties(clock), Duties(clock)
    a = elector("a", Replica(leases), clock, duties_a)
    b = elector("b", Replica(leases), clock, duties_b, seed=2)
    async with running(a, b):
        await until(clock, a.started_leading.wait())
        await until(clock, clock.sleep(5))
        stopped = clock.monotonic()
        await a.stop(release=True)
        assert duties_a.log[-1] == ("stop", stopped), "the duties stop before the lease is given up"
        assert leases.writes[-1].holder == ""
        assert leases.writes[-1].lease_duration_s == 1
        took = await until(clock, b.started_leading.wait()) - stopped
        assert took <= LOOK
        assert leases.record is not None
        assert leases.record.transitions == 1


async def test_a_renewal_that_landed_unread_still_lets_a_graceful_stop_release() -> None:
    clock, leases = ManualClock(), Leases()
    duties_a = Duties(clock)
    a = elector("a", Replica(leases), clock, duties_a)
    async with running(a):
        await until(clock, a.started_leading.wait())
        assert leases.record is not None
        # A renewal the stop cut short after the server wrote it: ours, at a version `a` never read.
        leases.stored(leases.record)
        assert await a.release()
        assert leases.record.holder == ""
        assert leases.record.lease_duration_s == 1


async def test_a_release_leaves_a_lease_another_took_alone() -> None:
    clock, leases = ManualClock(), Leases()
    a = elector("a", Replica(leases), clock, Duties(clock))
    async with running(a):
        await until(clock, a.started_leading.wait())
        assert leases.record is not None
        leases.stored(replace(leases.record, holder="b"))
        assert not await a.release()
        assert leases.record.holder == "b"


async def test_a_leader_that_cannot_renew_stops_before_the_lease_expires_for_the_others() -> None:
    clock, leases = ManualClock(), Leases()
    duties_a, duties_b = Duties(clock), Duties(clock)
    replica_a = Replica(leases)
    a = elector("a", replica_a, clock, duties_a)
    b = elector("b", Replica(leases), clock, duties_b, seed=2)
    async with running(a, b):
        await until(clock, a.started_leading.wait())
        await until(clock, clock.sleep(4))
        last_write = leases.writes[-1]
        replica_a.fail = TemporaryError("PUT leases/elasticityops: 503 Service Unavailable")
        cut = clock.monotonic()
        await until(clock, a.stopped_leading.wait())
        stepped_down = clock.monotonic()
        assert not a.is_leader
        assert duties_a.log[-1] == ("stop", stepped_down)
        assert a.last_error is not None
        assert "503" in a.last_error
        await until(clock, b.started_leading.wait())
        took_over = clock.monotonic()
        assert stepped_down - cut <= SETTINGS.renew_deadline_s
        assert stepped_down < took_over, "a stopped acting before b could start"
        assert leases.writes[-2] == last_write, "a wrote nothing meanwhile"
        # a campaigns again as a follower, failing quietly, never crashing.
        replica_a.fail = None
        await until(clock, clock.sleep(10))
        assert a._election.task is not None
        assert not a._election.task.done()
        assert not a.is_leader
        assert a.leader == "b"


async def test_a_hung_request_cannot_keep_a_leader_past_its_renew_deadline() -> None:
    clock, leases = ManualClock(), Leases()
    duties = Duties(clock)
    replica = Replica(leases)
    a = elector("a", replica, clock, duties)
    async with running(a):
        await until(clock, a.started_leading.wait())
        replica.hang = True
        cut = clock.monotonic()
        await until(clock, a.stopped_leading.wait())
        assert clock.monotonic() - cut <= SETTINGS.renew_deadline_s + SETTINGS.retry_period_s
        assert replica.hung, "the request was sent, and never answered"
        assert a.last_error is not None
        assert "no answer" in a.last_error


async def test_a_leader_that_sees_another_holder_steps_down_at_once() -> None:
    clock, leases = ManualClock(), Leases()
    duties = Duties(clock)
    a = elector("a", Replica(leases), clock, duties)
    async with running(a):
        await until(clock, a.started_leading.wait())
        # Someone (an operator, a replica with a skewed rate) wrote itself in.
        assert leases.record is not None
        leases.stored(replace(leases.record, holder="intruder"))
        seen = clock.monotonic()
        await until(clock, a.stopped_leading.wait())
        assert clock.monotonic() - seen <= SETTINGS.retry_period_s
        assert a.leader == "intruder"


async def test_replicas_started_together_elect_exactly_one() -> None:
    clock, leases = ManualClock(), Leases()
    all_duties = [Duties(clock) for _ in range(4)]
    electors = [elector(f"r{i}", Replica(leases), clock, d, seed=i) for i, d in enumerate(all_duties)]
    async with running(*electors):
        await until(
            clock,
            asyncio.wait(
                [asyncio.ensure_future(e.started_leading.wait()) for e in electors],
                return_when=asyncio.FIRST_COMPLETED,
            ),
        )
        await until(clock, clock.sleep(30))
        leaders = [e.identity for e in electors if e.is_leader]
        assert len(leaders) == 1
        assert sum(len(d.log) for d in all_duties) == 1
        assert all(e.leader == leaders[0] for e in electors)


async def test_duties_that_fail_to_start_give_the_lease_up() -> None:
    clock, leases = ManualClock(), Leases()
    stops: list[float] = []

    async def broken() -> None:
        raise RuntimeError("the dispatcher could not start")

    async def stopped() -> None:
        stops.append(clock.monotonic())

    a = LeaderElector(
        Replica(leases), "a", SETTINGS, clock, on_started_leading=broken, on_stopped_leading=stopped
    )
    async with running(a):
        await until(clock, a.started_leading.wait())
        await until(clock, a.stopped_leading.wait())
        assert stops, "what had started is stopped"
        assert leases.record is not None
        assert leases.record.holder == ""


async def test_a_stop_during_a_step_down_still_stops_the_duties() -> None:
    clock, leases = ManualClock(), Leases()
    replica = Replica(leases)
    stopping = asyncio.Event()
    finished: list[str] = []

    async def slow_stop() -> None:
        stopping.set()
        await clock.sleep(5)  # the dispatcher draining its events
        finished.append("stopped")

    a = LeaderElector(replica, "a", SETTINGS, clock, on_stopped_leading=slow_stop)
    a.start()
    await until(clock, a.started_leading.wait())
    replica.fail = TemporaryError("503")
    await until(clock, stopping.wait())
    assert not a.is_leader, "the flag drops before the duties are stopped"
    assert not a.stopped_leading.is_set()
    await until(clock, a.stop(release=False))  # SIGTERM while stepping down: cut short, redone
    assert finished == ["stopped"]
    assert a.stopped_leading.is_set()
