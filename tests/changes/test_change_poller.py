"""The change poller (changes/replicas.py) on a real SQLite store, written to by a second store
on the same file as another replica would: nobody waiting, no query; N waiters, one query per
interval for all; a waiter is woken when the store's (state, attempt) differs from what it saw."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from elasticityops.changes.hub import ChangeHub, Watch
from elasticityops.changes.replicas import ChangePoller, stamp
from elasticityops.domain.clock import ManualClock, SystemClock
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import State, new_invocation_id
from elasticityops.domain.ports import Change, NewInvocation
from elasticityops.store.sql import SqlStore

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, tzinfo=UTC)


class CountingStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.reads: list[int] = []  # ids per change_stamps read

    async def change_stamps(self, ids: Sequence[str]) -> Any:
        self.reads.append(len(ids))
        return await self.store.change_stamps(ids)


@dataclass
class Setup:
    here: SqlStore  # this replica's store
    there: SqlStore  # another replica's, on the same database
    counted: CountingStore
    hub: ChangeHub
    clock: ManualClock
    poller: ChangePoller

    async def queued(self) -> str:
        new = NewInvocation(new_invocation_id(), "hello", 1, Priority.normal.rank, T0, b"{}")
        await self.there.create_invocation(new)
        return new.id


@asynccontextmanager
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    url = f"sqlite:///{tmp_path / 'eops.db'}"
    here, there = await SqlStore.open(url), await SqlStore.open(url)
    counted = CountingStore(here)
    hub, clock = ChangeHub(), ManualClock()
    poller = ChangePoller(counted, hub, clock, 0.5)  # type: ignore[arg-type]
    try:
        yield Setup(here, there, counted, hub, clock, poller)
    finally:
        await poller.stop()
        await here.close()
        await there.close()


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


async def test_nobody_waiting_means_no_query(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        s.poller.start()
        for _ in range(3):
            s.clock.advance(1.0)
            await _settle()
        assert s.counted.reads == []
        with s.hub.watch(await s.queued()) as watch:
            watch.saw((State.queued, 0))
            await _settle()
            s.clock.advance(0.5)
            await _settle()
            assert s.counted.reads == [1]
        for _ in range(3):
            s.clock.advance(1.0)
            await _settle()
        assert s.counted.reads == [1], "the last waiter left: polling stops"


async def test_one_query_per_interval_reads_every_invocation_waited_on(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        ids = [await s.queued() for _ in range(100)]
        s.poller.start()
        with watching(s.hub, ids) as watches:
            for watch, _ in zip(watches, ids, strict=True):
                watch.saw((State.queued, 0))
            await _settle()
            for _ in range(4):
                s.clock.advance(0.5)
                await _settle()
            assert s.counted.reads == [100] * 4
            assert not any(w.event.is_set() for w in watches), "nothing moved: nobody is woken"


async def test_a_change_another_replica_made_wakes_only_its_waiters(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        moved, still = await s.queued(), await s.queued()
        with s.hub.watch(moved) as w_moved, s.hub.watch(still) as w_still, s.hub.watch(still) as w_unread:
            for watch, inv_id in ((w_moved, moved), (w_still, still)):
                inv = await s.here.get_invocation(inv_id)
                assert inv is not None
                watch.saw(stamp(inv))
            assert await s.there.apply(Change(moved, State.pending, T0)) is not None
            await s.poller.poll()
            assert w_moved.event.is_set()
            assert not w_still.event.is_set()
            assert not w_unread.event.is_set(), "one that has not read yet reads for itself"


async def test_a_new_attempt_in_the_same_state_counts_as_a_change(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        inv_id = await s.queued()
        with s.hub.watch(inv_id) as watch:
            watch.saw((State.queued, 0))
            for to in (State.pending, State.running, State.queued):  # preempted: queued again
                assert await s.there.apply(Change(inv_id, to, T0)) is not None
            await s.poller.poll()
            assert watch.event.is_set()


async def test_a_waiter_on_a_follower_is_answered_within_an_interval_of_the_change(tmp_path: Path) -> None:
    """The loop on the system clock: waiting, the end written by another store, woken."""
    url = f"sqlite:///{tmp_path / 'eops.db'}"
    here, there = await SqlStore.open(url), await SqlStore.open(url)
    hub = ChangeHub()
    poller = ChangePoller(here, hub, SystemClock(), 0.1)
    poller.start()
    try:
        new = NewInvocation(new_invocation_id(), "hello", 1, Priority.normal.rank, T0, b"{}")
        await there.create_invocation(new)
        with hub.watch(new.id) as watch:
            watch.saw((State.queued, 0))
            await there.apply(Change(new.id, State.cancelled, T0))
            async with asyncio.timeout(5):
                await watch.wait()
    finally:
        await poller.stop()
        await here.close()
        await there.close()


@contextmanager
def watching(hub: ChangeHub, ids: Sequence[str]) -> Iterator[list[Watch]]:
    with ExitStack() as stack:
        yield [stack.enter_context(hub.watch(inv_id)) for inv_id in ids]
