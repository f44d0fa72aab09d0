"""The node-seconds ledger in the store, on SQLite and PostgreSQL: written by the transition
that ends an attempt (and only once), summed per invocation, per function and per hour, and
kept in running totals for /metrics."""

# pytest.approx in a tuple or dict compares as the float it stands for, which mypy's strict
# equality cannot see: it would call those comparisons always false.
# mypy: disable-error-code="comparison-overlap"

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import State, new_invocation_id
from elasticityops.domain.node_seconds import (
    Charge,
    Phase,
    Span,
    WorkerRun,
    idle_after_span,
    warm_unused_span,
)
from elasticityops.domain.ports import Change, NewInvocation
from elasticityops.pricing.table import Capacity
from elasticityops.store.node_seconds import Pricing
from elasticityops.store.sql import SqlStore

from .conftest import open_store

T0 = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
T4 = "nvidia-tesla-t4"
T4_PER_S = 0.54 / 3600


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


async def admitted(store: SqlStore, function: str = "hello", gpu_type: str | None = T4) -> str:
    """One invocation accepted at 0 s and admitted (pending) at once; its id."""
    new = NewInvocation(new_invocation_id(), function, 1, Priority.normal.rank, at(0), b"{}")
    await store.create_invocation(new)
    await store.apply(Change(new.id, State.pending, at(0), gpu_type=gpu_type))
    return new.id


async def ran(
    store: SqlStore, function: str, *, ready: float, started: float, ended: float, gpu_type: str | None = T4
) -> str:
    """One invocation through admission, placement, start and success, as the backends report them."""
    inv = await admitted(store, function, gpu_type)
    await store.record(BackendEvent(inv, node="gpu0", capacity_ready=at(ready)))
    await store.record(BackendEvent(inv, started=at(started)))
    await store.record(BackendEvent(inv, finished=Finished.succeeded(at(ended))))
    return inv


def test_an_ended_invocation_has_its_node_seconds_by_phase(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        inv = await ran(store, "hello", ready=1, started=3, ended=63)
        phases = await store.node_seconds_of(inv)
        assert {p: t.seconds for p, t in phases.items()} == pytest.approx(
            {Phase.idle_before_start: 2, Phase.run: 60}
        )
        assert phases[Phase.run].usd == pytest.approx(60 * T4_PER_S), "a local slot: the on-demand T4 node"
        assert await store.node_seconds_of("inv-none") == {}

    run.run(body())


def test_a_preempted_attempt_is_charged_and_the_next_attempt_too(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        inv = await admitted(store)
        await store.record(BackendEvent(inv, capacity_ready=at(1), started=at(2)))
        requeued = await store.apply(Change(inv, State.queued, at(12)))
        assert requeued is not None
        assert requeued.attempt == 1
        await store.apply(Change(inv, State.pending, at(20), gpu_type=T4))
        await store.record(BackendEvent(inv, capacity_ready=at(21), started=at(22)))
        await store.record(BackendEvent(inv, finished=Finished.succeeded(at(52))))
        phases = await store.node_seconds_of(inv)
        assert phases[Phase.run].seconds == pytest.approx(10 + 30), "both attempts' runs"
        assert phases[Phase.idle_before_start].seconds == pytest.approx(2)

    run.run(body())


def test_a_repeated_end_charges_nothing_more(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        inv = await ran(store, "hello", ready=1, started=3, ended=63)
        again = await store.record(BackendEvent(inv, finished=Finished.succeeded(at(90))))
        assert again is None, "ended already"
        assert (await store.node_seconds_of(inv))[Phase.run].seconds == pytest.approx(60)
        [(function, _, _, seconds, _, _)] = [
            t for t in await store.node_seconds_totals() if t.phase is Phase.run
        ]
        assert (function, seconds) == ("hello", pytest.approx(60))

    run.run(body())


def test_the_report_sums_in_the_database_by_function_and_by_hour(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        # T0 is 10:30: the second run crosses 11:00, so the hours split it.
        await ran(store, "alpha", ready=0, started=0, ended=600)
        await ran(store, "alpha", ready=0, started=0, ended=1200)
        await ran(store, "beta", ready=0, started=0, ended=2400)
        await ran(store, "gamma", ready=0, started=0, ended=60, gpu_type="nvidia-h100-80gb")
        since, until = T0 - timedelta(hours=1), T0 + timedelta(hours=3)

        by_function = {g.function: g for g in await store.cost_report(since, until, ["function"])}
        assert set(by_function) == {"alpha", "beta", "gamma"}
        assert by_function["alpha"].phases[Phase.run].seconds == pytest.approx(1800)
        assert by_function["beta"].usd == pytest.approx(2400 * T4_PER_S)
        assert by_function["gamma"].usd == 0, "no price for its GPU type"
        assert by_function["gamma"].unpriced_seconds == pytest.approx(60)

        by_hour = {g.hour: g.seconds for g in await store.cost_report(since, until, ["hour"])}
        assert by_hour == {
            T0.replace(minute=0): pytest.approx(600 + 1200 + 1800 + 60),
            T0.replace(hour=11, minute=0): pytest.approx(600),
        }
        both = await store.cost_report(since, until, ["function", "hour"])
        assert {(g.function, g.hour) for g in both} == {
            ("alpha", T0.replace(minute=0)),
            ("beta", T0.replace(minute=0)),
            ("beta", T0.replace(hour=11, minute=0)),
            ("gamma", T0.replace(minute=0)),
        }
        [total] = await store.cost_report(since, until, [])
        assert total.seconds == pytest.approx(600 + 1200 + 2400 + 60)
        # From 11:35: the range starts at its hour, 11:00, and leaves 10:00 out.
        later = await store.cost_report(T0 + timedelta(hours=1, minutes=5), until, ["function"])
        assert [(g.function, g.seconds) for g in later] == [("beta", pytest.approx(600))]
        assert await store.cost_report(T0 + timedelta(hours=2), until, ["function"]) == []

    run.run(body())


def test_idle_after_and_warm_unused_charges_are_kept_once(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        inv = await ran(store, "hello", ready=1, started=3, ended=63)
        idle = idle_after_span(at(63), at(663))
        warm = warm_unused_span(at(0), at(900))
        assert idle is not None
        assert warm is not None
        charges = [
            Charge(source=inv, attempt=0, function="hello", gpu_type=T4, spans=[idle]),
            Charge(source="warm/t4-0", attempt=0, function="", gpu_type=T4, spans=[warm]),
        ]
        await store.charge(charges)
        await store.charge(charges)  # seen again after a restart
        phases = await store.node_seconds_of(inv)
        assert phases[Phase.idle_after].seconds == pytest.approx(600)
        totals = {(t.function, t.phase): t.seconds for t in await store.node_seconds_totals()}
        assert totals[("hello", Phase.idle_after)] == pytest.approx(600), "counted once"
        assert totals[("", Phase.warm_unused)] == pytest.approx(900)
        assert totals[("hello", Phase.run)] == pytest.approx(60)

    run.run(body())


def test_the_pricing_the_store_was_opened_with_prices_its_ledger(store_url: str, run: asyncio.Runner) -> None:
    async def body() -> None:
        store = await open_store(store_url)
        await store.close()  # migrated; reopen with cluster pricing
        cluster = await SqlStore.open(store_url, pricing=Pricing(capacity=Capacity.spot))
        try:
            await cluster.charge([Charge("inv-x", 0, "hello", T4, [Span(Phase.run, at(0), at(3600))])])
            [(_, _, capacity, seconds, usd, _)] = await cluster.node_seconds_totals()
            assert (capacity, seconds, usd) == (Capacity.spot, 3600, pytest.approx(0.24))
        finally:
            await cluster.close()

    run.run(body())


def test_a_cluster_node_made_for_it_is_charged_from_its_creation(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        inv = await admitted(store)
        placed = BackendEvent(inv, node="n1", capacity_ready=at(200), node_since=at(20), warm=False)
        await store.record(placed)
        stored = await store.get_invocation(inv)
        assert stored is not None
        assert (stored.node_since, stored.warm) == (at(20), False), "kept in the row until the end"
        await store.record(BackendEvent(inv, started=at(230)))
        await store.record(BackendEvent(inv, finished=Finished.succeeded(at(530))))
        phases = {p: t.seconds for p, t in (await store.node_seconds_of(inv)).items()}
        assert phases == pytest.approx({Phase.provisioning: 180, Phase.idle_before_start: 30, Phase.run: 300})

    run.run(body())


def test_node_time_about_no_invocation_is_recorded_from_its_event(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        warm = warm_unused_span(at(0), at(600))
        assert warm is not None
        told = await store.record(BackendEvent("", charges=(Charge("node/n9", 0, "", T4, (warm,)),)))
        assert told is None, "no invocation changed"
        [(function, phase, capacity, seconds, usd, _)] = await store.node_seconds_totals()
        assert (function, phase, capacity, seconds) == ("", Phase.warm_unused, Capacity.local, 600)
        assert usd == pytest.approx(600 * T4_PER_S)

    run.run(body())


async def placed_and_ran(store: SqlStore, capacity: Capacity | None, gpu_type: str = T4) -> str:
    """One invocation on a cluster node of `capacity` (None: a node the watch did not know),
    placed at 0 s, run from 10 s to 3610 s: an hour of run."""
    inv = await admitted(store, gpu_type=gpu_type)
    await store.record(
        BackendEvent(
            inv, node="n1", capacity_ready=at(0), node_since=at(0), warm=True, node_capacity=capacity
        )
    )
    await store.record(BackendEvent(inv, started=at(10)))
    await store.record(BackendEvent(inv, finished=Finished.succeeded(at(3610))))
    return inv


def test_an_attempt_is_priced_as_the_capacity_of_its_node(store_url: str, run: asyncio.Runner) -> None:
    async def body() -> None:
        cluster = await SqlStore.open(store_url, pricing=Pricing(capacity=Capacity.on_demand))
        try:
            spot = await placed_and_ran(cluster, Capacity.spot)
            stored = await cluster.get_invocation(spot)
            assert stored is not None
            assert stored.node_capacity is Capacity.spot, "kept in the row until the end"
            assert (await cluster.node_seconds_of(spot))[Phase.run].usd == pytest.approx(0.24)

            on_demand = await placed_and_ran(cluster, Capacity.on_demand)
            assert (await cluster.node_seconds_of(on_demand))[Phase.run].usd == pytest.approx(0.54)
            unknown = await placed_and_ran(cluster, None)
            assert (await cluster.node_seconds_of(unknown))[Phase.run].usd == pytest.approx(0.54), (
                "a node not known: the backend's capacity, on demand"
            )

            l4_spot = await placed_and_ran(cluster, Capacity.spot, gpu_type="nvidia-l4")
            assert (await cluster.node_seconds_of(l4_spot))[Phase.run].usd == pytest.approx(0.34)
            l4 = await placed_and_ran(cluster, Capacity.on_demand, gpu_type="nvidia-l4")
            assert (await cluster.node_seconds_of(l4))[Phase.run].usd == pytest.approx(0.85)
            h100 = await placed_and_ran(cluster, Capacity.spot, gpu_type="nvidia-h100-80gb")
            run_ = (await cluster.node_seconds_of(h100))[Phase.run]
            assert (run_.seconds, run_.usd, run_.unpriced_seconds) == (3600, 0, 3600), "no row for the type"
        finally:
            await cluster.close()

    run.run(body())


def test_a_preempted_spot_attempt_is_priced_spot_and_the_next_one_as_its_own_node(
    store_url: str, run: asyncio.Runner
) -> None:
    async def body() -> None:
        cluster = await SqlStore.open(store_url, pricing=Pricing(capacity=Capacity.on_demand))
        try:
            inv = await admitted(cluster)
            spot = BackendEvent(
                inv, node="s1", capacity_ready=at(0), started=at(0), node_capacity=Capacity.spot
            )
            await cluster.record(spot)
            requeued = await cluster.apply(Change(inv, State.queued, at(3600)))
            assert requeued is not None
            assert requeued.node_capacity is None
            await cluster.apply(Change(inv, State.pending, at(3600), gpu_type=T4))
            again = BackendEvent(
                inv, node="n2", capacity_ready=at(3600), started=at(3600), node_capacity=Capacity.on_demand
            )
            await cluster.record(again)
            await cluster.record(BackendEvent(inv, finished=Finished.succeeded(at(7200))))
            run_ = (await cluster.node_seconds_of(inv))[Phase.run]
            assert (run_.seconds, run_.usd) == (7200, pytest.approx(0.24 + 0.54))
        finally:
            await cluster.close()

    run.run(body())


def test_node_time_charged_on_a_spot_node_is_priced_spot(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        warm = warm_unused_span(at(0), at(3600))
        assert warm is not None
        await store.charge([Charge("node/s1", 0, "", T4, (warm,), Capacity.spot)])
        [(_, _, capacity, seconds, usd, _)] = await store.node_seconds_totals()
        assert (capacity, seconds, usd) == (Capacity.spot, 3600, pytest.approx(0.24)), (
            "on the local store too: the node says"
        )

    run.run(body())


def test_the_report_says_how_much_was_spot(store_url: str, run: asyncio.Runner) -> None:
    async def body() -> None:
        cluster = await SqlStore.open(store_url, pricing=Pricing(capacity=Capacity.on_demand))
        try:
            await placed_and_ran(cluster, Capacity.spot)
            await placed_and_ran(cluster, Capacity.spot, gpu_type="nvidia-h100-80gb")
            await placed_and_ran(cluster, None)
            warm = warm_unused_span(at(0), at(1800))
            assert warm is not None
            await cluster.charge([Charge("node/s9", 0, "", T4, (warm,), Capacity.spot)])
            since, until = T0 - timedelta(hours=1), T0 + timedelta(hours=3)

            by_capacity = {g.capacity: g for g in await cluster.cost_report(since, until, ["capacity"])}
            assert set(by_capacity) == {Capacity.spot, Capacity.on_demand}
            spot, on_demand = by_capacity[Capacity.spot], by_capacity[Capacity.on_demand]
            assert (spot.seconds, spot.usd, spot.unpriced_seconds) == (
                pytest.approx(3610 + 3610 + 1800),
                pytest.approx((3610 + 1800) * 0.24 / 3600),
                pytest.approx(3610),
            ), "T4 spot priced, a type without a price row counted and unpriced"
            assert (on_demand.seconds, on_demand.usd) == (
                pytest.approx(3610),
                pytest.approx(3610 * 0.54 / 3600),
            )

            both = await cluster.cost_report(since, until, ["function", "capacity"])
            assert sorted((g.function, g.capacity, round(g.seconds)) for g in both) == [
                ("", Capacity.spot, 1800),
                ("hello", Capacity.on_demand, 3610),
                ("hello", Capacity.spot, 7220),
            ]
            [total] = await cluster.cost_report(since, until, [])
            assert total.capacity is None
            assert total.seconds == pytest.approx(3610 * 3 + 1800)

            # The running totals (/metrics) keep the capacities apart as the ledger does.
            totals = {(t.function, t.capacity): (0.0, 0.0) for t in await cluster.node_seconds_totals()}
            for t in await cluster.node_seconds_totals():
                seconds, usd = totals[(t.function, t.capacity)]
                totals[(t.function, t.capacity)] = (seconds + t.seconds, usd + t.usd)
            assert totals == {
                ("", Capacity.spot): (pytest.approx(1800), pytest.approx(1800 * 0.24 / 3600)),
                ("hello", Capacity.on_demand): (pytest.approx(3610), pytest.approx(3610 * 0.54 / 3600)),
                ("hello", Capacity.spot): (pytest.approx(7220), pytest.approx(3610 * 0.24 / 3600)),
            }
        finally:
            await cluster.close()

    run.run(body())


def test_the_worker_cluster_is_kept_in_the_row_and_read_by_lists(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        inv = await admitted(store)
        await store.record(BackendEvent(inv, cluster="worker-1"))
        stored = await store.get_invocation(inv)
        assert stored is not None
        assert stored.cluster == "worker-1"
        await store.record(BackendEvent(inv, cluster="worker-2"))
        await store.record(BackendEvent(inv, node="n1", capacity_ready=at(0)))
        await store.record(BackendEvent(inv, finished=Finished.succeeded(at(60))))
        ended = await store.get_invocation(inv)
        assert ended is not None
        assert (ended.state, ended.cluster) == (State.succeeded, "worker-2")
        page = await store.list_invocations(function=None, state=None, limit=10, cursor=None)
        [listed] = [i for i in page.items if i.id == inv]
        assert listed.cluster == "worker-2", "lists read it too"

    run.run(body())


def test_the_report_groups_the_node_time_by_the_worker_cluster_that_ran_it(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        for cluster in ("worker-1", "worker-2", "worker-2"):
            inv = await admitted(store)
            await store.record(BackendEvent(inv, cluster=cluster))
            await store.record(BackendEvent(inv, node="n1", capacity_ready=at(0), node_since=at(0)))
            await store.record(BackendEvent(inv, started=at(10)))
            await store.record(BackendEvent(inv, finished=Finished.succeeded(at(3610))))
        warm = warm_unused_span(at(0), at(1800))
        assert warm is not None
        await store.charge([Charge("node/s9", 0, "", T4, (warm,))])
        since, until = T0 - timedelta(hours=1), T0 + timedelta(hours=3)
        by_cluster = {g.cluster: round(g.seconds) for g in await store.cost_report(since, until, ["cluster"])}
        assert by_cluster == {"worker-1": 3610, "worker-2": 7220, None: 1800}, "warm capacity: no cluster"
        # The running totals (/metrics) keep the clusters apart as the ledger does.
        totals: dict[str, float] = {}
        for t in await store.node_seconds_totals():
            totals[t.cluster] = totals.get(t.cluster, 0.0) + t.seconds
        assert {k: round(v) for k, v in totals.items()} == {"worker-1": 3610, "worker-2": 7220, "": 1800}

    run.run(body())


def test_active_invocations_are_counted_by_the_worker_cluster_that_runs_them(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        for cluster in ("worker-1", "worker-2", "worker-2", None):
            inv = await admitted(store)
            if cluster is not None:
                await store.record(BackendEvent(inv, cluster=cluster))
        ended = await admitted(store)
        await store.record(BackendEvent(ended, cluster="worker-1"))
        await store.record(BackendEvent(ended, finished=Finished.succeeded(at(60))))
        counts = await store.active_counts_by_cluster()
        # one cluster, or not yet taken by a worker: not counted; an ended one: not active
        assert {(c, n) for (c, *_), n in counts.items()} == {("worker-1", 1), ("worker-2", 2)}
        [(_, name, version, _)] = [k for k in counts if k[0] == "worker-1"]
        assert (name, version) == ("hello", 1)

    run.run(body())


def test_what_runs_in_two_workers_held_beyond_the_records_run_is_charged_as_run_again(
    store: SqlStore, run: asyncio.Runner
) -> None:
    """MultiKueue ran one attempt in two workers (then three): the record's run counts from its
    first start to its end; what the runs held beyond it is run_again, charged once the record
    has ended, once however often the runs are told, a run told later adding its part."""

    async def body() -> None:
        inv = await admitted(store)
        await store.record(BackendEvent(inv, cluster="worker-1", node="a1", capacity_ready=at(0)))
        await store.record(BackendEvent(inv, started=at(2)))
        await store.record(BackendEvent(inv, cluster="worker-2", node="b1"))
        lost = WorkerRun("worker-1", started=at(2), ended=at(32), capacity=Capacity.spot)
        await store.record(BackendEvent(inv, attempt=0, worker_runs=(lost,)))  # before the end: nothing
        await store.record(BackendEvent(inv, cluster="worker-2", finished=Finished.succeeded(at(62))))
        both = (lost, WorkerRun("worker-2", started=at(20), ended=at(62)))
        await store.record(BackendEvent(inv, attempt=0, worker_runs=both))
        await store.record(BackendEvent(inv, attempt=0, worker_runs=both))  # told again
        await store.record(BackendEvent(inv, attempt=-1, worker_runs=both))  # an older attempt's
        phases = await store.node_seconds_of(inv)
        # 30 s + 42 s held, the record's run counting 60 s of it (from worker-1's start).
        assert {p: round(t.seconds) for p, t in phases.items() if t.seconds} == {
            Phase.idle_before_start: 2,
            Phase.run: 60,
            Phase.run_again: 12,
        }
        assert phases[Phase.run_again].usd < 12 * T4_PER_S, "priced as worker-1's spot node"
        since, until = T0 - timedelta(hours=1), T0 + timedelta(hours=1)
        by_cluster = {g.cluster: round(g.seconds) for g in await store.cost_report(since, until, ["cluster"])}
        assert by_cluster == {"worker-2": 62, "worker-1": 12}

        # A third worker's run, told later, adds its part to the hour's row.
        third = (*both, WorkerRun("worker-3", started=at(40), ended=at(70)))
        await store.record(BackendEvent(inv, attempt=0, worker_runs=third))
        phases = await store.node_seconds_of(inv)
        assert round(phases[Phase.run_again].seconds) == 42
        totals = {(t.phase, t.cluster): round(t.seconds) for t in await store.node_seconds_totals()}
        assert totals[(Phase.run_again, "worker-1")] == 42, "the totals grow as the row does"

    run.run(body())
