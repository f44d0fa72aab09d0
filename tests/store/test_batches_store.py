"""Batches in the SqlStore, on SQLite and PostgreSQL: stored whole in one transaction, replayed by
their idempotency key, counted by state, listed in input order."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from elasticityops.domain.batches import Batch, ids_in_input_order, item_key, new_batch_id
from elasticityops.domain.errors import Conflict
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import Invocation, State
from elasticityops.domain.ports import Change, NewInvocation
from elasticityops.store.sql import SqlStore

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def a_batch(count: int, key: str | None = None, function: str = "hello") -> tuple[Batch, list[NewInvocation]]:
    batch = Batch(new_batch_id(at=T0), function, T0, count, key)
    ids = ids_in_input_order(count, os.urandom, at=T0)
    items = [
        NewInvocation(
            id=ids[i],
            function=function,
            spec_version=1,
            priority_rank=Priority.normal.rank,
            accepted_at=T0,
            payload=b'{"i": %d}' % i,
            idempotency_key=item_key(key, i),
            batch_id=batch.id,
        )
        for i in range(count)
    ]
    return batch, items


def test_a_batch_is_stored_whole_and_read_in_input_order(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        batch, items = a_batch(600)  # more than one IN (...) slice of ids
        stored, invocations, created = await store.create_batch(batch, items)
        assert created
        assert stored == batch
        assert [i.id for i in invocations] == [n.id for n in items]
        assert {(i.batch_id, i.state) for i in invocations} == {(batch.id, State.queued)}
        assert await store.get_payload(items[7].id) == b'{"i": 7}'
        status = await store.get_batch(batch.id)
        assert status is not None
        assert status.batch == batch
        assert status.counts == {State.queued: 600}
        assert not status.done
        states = await store.batch_states(batch.id)
        assert [i for i, _ in states] == [n.id for n in items]
        page = await store.list_invocations(
            function=None, state=None, limit=250, cursor=None, batch=batch.id, oldest_first=True
        )
        assert [i.id for i in page.items] == [n.id for n in items[:250]]
        page = await store.list_invocations(
            function=None, state=None, limit=500, cursor=page.next_cursor, batch=batch.id, oldest_first=True
        )
        assert [i.id for i in page.items] == [n.id for n in items[250:]]
        assert page.next_cursor is None
        alone = await store.list_invocations(
            function="hello", state=None, limit=10, cursor=None, batch="bat-x"
        )
        assert alone.items == []
        assert await store.get_batch("bat-nosuch") is None

    run.run(body())


def test_a_retried_batch_is_the_one_stored_first(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        batch, items = a_batch(3, key="k1")
        _, first, created = await store.create_batch(batch, items)
        assert created
        again_batch, again_items = a_batch(3, key="k1")
        stored, again, created = await store.create_batch(again_batch, again_items)
        assert not created
        assert stored == batch
        assert [i.id for i in again] == [i.id for i in first]
        assert [i.idempotency_key for i in again] == ["k1#0", "k1#1", "k1#2"]
        _, _, created = await store.create_batch(*a_batch(2, key="k1", function="other"))
        assert created, "a key is per function"
        page = await store.list_invocations(function="hello", state=None, limit=100, cursor=None)
        assert len(page.items) == 3

    run.run(body())


def test_a_batch_that_cannot_be_stored_stores_nothing(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        batch, items = a_batch(4)
        first_batch, _ = a_batch(1)
        await store.create_batch(first_batch, [replace(items[2], batch_id=first_batch.id)])
        with pytest.raises(Conflict):
            await store.create_batch(batch, items)  # its third id is taken: the whole batch fails
        assert await store.get_batch(batch.id) is None
        assert await store.get_invocation(items[0].id) is None

    run.run(body())


def test_counts_follow_the_invocations_states(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        batch, items = a_batch(3)
        await store.create_batch(batch, items)
        await store.apply(Change(items[0].id, State.cancelled, T0, frozenset({State.queued})))
        status = await store.get_batch(batch.id)
        assert status is not None
        assert status.counts == {State.queued: 2, State.cancelled: 1}
        assert status.ended == 1
        ended = await store.ended_among([n.id for n in items])
        assert [i.id for i in ended] == [items[0].id]
        assert ended[0].result is None

    run.run(body())


def test_the_queue_is_read_with_the_functions_taking_turns(store: SqlStore, run: asyncio.Runner) -> None:
    """store.queued: within a priority every function's first queued invocation before any
    function's second; each page past `after` goes on in that order. queued_ahead counts the
    same order."""

    async def body() -> None:
        batch, items = a_batch(300, function="a")
        await store.create_batch(batch, items)
        ids_b = ids_in_input_order(2, os.urandom, at=T0.replace(minute=1))
        singles = [
            NewInvocation(
                id=i,
                function="b",
                spec_version=1,
                priority_rank=Priority.normal.rank,
                accepted_at=T0.replace(minute=1),
                payload=b"{}",
            )
            for i in ids_b
        ]
        for single in singles:
            await store.create_invocation(single)
        first = await store.queued(3)
        assert [i.id for i in first] == [items[0].id, ids_b[0], items[1].id]
        rest = await store.queued(3, after=first[-1])
        assert [i.id for i in rest] == [ids_b[1], items[2].id, items[3].id]
        whole = await store.queued(1000)
        assert len(whole) == 302
        b_ahead = await store.queued_ahead(await _get(store, ids_b[0]))
        assert b_ahead == {("a", 1): 1}, "one turn of the batch, not the batch"
        a_last = await store.queued_ahead(await _get(store, items[299].id))
        assert a_last == {("a", 1): 299, ("b", 1): 2}
        # One of the batch's admitted: the next of it waits behind the other function's first.
        await store.apply(Change(items[0].id, State.pending, T0, frozenset({State.queued})))
        assert [i.id for i in await store.queued(2)] == [ids_b[0], items[1].id]
        assert await store.queued_ahead(await _get(store, items[1].id)) == {("b", 1): 1}
        # A function far ahead in running ones still fills the page once the others are read.
        for single in singles:
            await store.apply(Change(single.id, State.cancelled, T0, frozenset({State.queued})))
        for item in items[1:40]:
            await store.apply(Change(item.id, State.pending, T0, frozenset({State.queued})))
        assert [i.id for i in await store.queued(5)] == [n.id for n in items[40:45]]
        page = await store.queued(5, after=await _get(store, items[41].id))
        assert [i.id for i in page] == [n.id for n in items[42:47]]

    run.run(body())


async def _get(store: SqlStore, invocation_id: str) -> Invocation:
    inv = await store.get_invocation(invocation_id)
    assert inv is not None
    return inv
