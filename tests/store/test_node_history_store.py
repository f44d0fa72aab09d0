"""The GPU nodes' records in the store (store/node_history.py), on SQLite and PostgreSQL:
written in order with the events that changed them, replaced, forgotten in the transaction
that keeps the node's last charges (once, however often the event comes), read back whole; and
a node watch restarted from them charging what the one before left open."""

# pytest.approx in a tuple or dict compares as the float it stands for, which mypy's strict
# equality cannot see: it would call those comparisons always false.
# mypy: disable-error-code="comparison-overlap"

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from backends.kubernetes.builders import gpu_node
from elasticityops.backends.kubernetes.gpu_nodes import GpuNodes, Occupant
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.node_history import WARM_SOURCE, LastJob, NodeHistory, NodeHistoryWrite
from elasticityops.domain.node_seconds import Phase
from elasticityops.pricing.table import Capacity
from elasticityops.store.node_seconds import Pricing
from elasticityops.store.sql import SqlStore

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
T4 = "nvidia-tesla-t4"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def record(name: str, *, unused: bool = False, last: LastJob | None = None) -> NodeHistory:
    return NodeHistory(name, T4, Capacity.spot, at(0), unused=unused, last=last)


def test_records_are_kept_replaced_and_read_back(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        assert await store.gpu_node_history() == []
        first = [NodeHistoryWrite("b", record("b", unused=True)), NodeHistoryWrite("a", record("a"))]
        assert await store.record(BackendEvent("", node_history=tuple(first))) is None
        ended = LastJob("inv-1", 3, "fn", None, at(90.5))
        await store.record(BackendEvent("", node_history=(NodeHistoryWrite("b", record("b", last=ended)),)))
        assert await store.gpu_node_history() == [record("a"), record("b", last=ended)]
        changes = (NodeHistoryWrite("a", None), NodeHistoryWrite("a", record("a", unused=True)))
        await store.record(BackendEvent("", node_history=changes))
        assert [r.name for r in await store.gpu_node_history()] == ["a", "b"], (
            "in order: forgotten, then kept"
        )
        await store.record(BackendEvent("", node_history=(NodeHistoryWrite("a", None),)))
        await store.record(BackendEvent("", node_history=(NodeHistoryWrite("a", None),)))
        assert [r.name for r in await store.gpu_node_history()] == ["b"], "forgetting twice is as once"

    run.run(body())


def test_a_record_is_forgotten_with_its_last_charges_and_they_are_kept_once(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        last = LastJob("inv-1", 0, "fn", T4, at(0))
        await store.record(BackendEvent("", node_history=(NodeHistoryWrite("n1", record("n1", last=last)),)))
        nodes = GpuNodes()
        nodes.restore(await store.gpu_node_history())
        nodes.on_node("ADDED", gpu_node("n1", created=at(0), spot=True), now=at(10).timestamp())
        nodes.listed(at(10).timestamp())
        closing = BackendEvent(
            "",
            charges=tuple(
                nodes.on_node("DELETED", gpu_node("n1", created=at(0), spot=True), now=at(3600).timestamp())
            ),
            node_history=tuple(nodes.history_writes()),
        )
        await store.record(closing)
        await store.record(closing)  # the event again (its lane retried it, say)
        assert await store.gpu_node_history() == []
        idle = (await store.node_seconds_of("inv-1"))[Phase.idle_after]
        assert (idle.seconds, idle.usd) == (3600, pytest.approx(0.24)), "once, priced spot"

    run.run(body())


def test_a_watch_restarted_from_the_store_charges_what_the_one_before_left_open(
    store_url: str, run: asyncio.Runner
) -> None:
    """Two gateways one after the other on one database (a restart, or a new leader)."""

    async def body() -> None:
        first = await SqlStore.open(store_url, pricing=Pricing(capacity=Capacity.on_demand))
        try:
            before = GpuNodes()
            before.restore(await first.gpu_node_history())
            before.listed(at(0).timestamp())
            before.on_node("ADDED", gpu_node("used", created=at(0)), now=at(1).timestamp())
            before.on_node("ADDED", gpu_node("spare", created=at(0)), now=at(1).timestamp())
            before.occupied("used", "inv-1", now=at(60).timestamp())
            before.vacated("used", "inv-1", now=at(600).timestamp(), occupant=Occupant("inv-1", 0, "fn", T4))
            await first.record(BackendEvent("", node_history=tuple(before.history_writes())))
        finally:
            await first.close()
        second = await SqlStore.open(store_url, pricing=Pricing(capacity=Capacity.on_demand))
        try:
            after = GpuNodes()
            after.restore(await second.gpu_node_history())
            for name in ("used", "spare"):
                after.on_node("ADDED", gpu_node(name, created=at(0)), now=at(900).timestamp())
            assert after.listed(at(900).timestamp()) == []
            charges = [
                *after.on_node("DELETED", gpu_node("used", created=at(0)), now=at(1800).timestamp()),
                *after.on_node("DELETED", gpu_node("spare", created=at(0)), now=at(3600).timestamp()),
            ]
            await second.record(
                BackendEvent("", charges=tuple(charges), node_history=tuple(after.history_writes()))
            )
            assert await second.gpu_node_history() == []
            assert (await second.node_seconds_of("inv-1"))[Phase.idle_after].seconds == 1200
            totals = {
                (t.function, t.phase, t.capacity): (t.seconds, t.usd)
                for t in await second.node_seconds_totals()
            }
            assert totals[("", Phase.warm_unused, Capacity.on_demand)] == (3600, pytest.approx(0.54)), (
                f"{WARM_SOURCE}spare, on demand"
            )
        finally:
            await second.close()

    run.run(body())
