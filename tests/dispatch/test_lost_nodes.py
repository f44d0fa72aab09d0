"""A lost node's end against a real SQLite store: requeued as the next attempt while the
function's retries last, then failed `evicted`; never applied to an attempt that is over."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from elasticityops.api.metrics import Metrics
from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.dispatch.lost_nodes import end_lost_node
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import FailureReason, Invocation, State, new_invocation_id
from elasticityops.domain.ports import Change, NewInvocation
from elasticityops.domain.retry import NODE_LOST
from elasticityops.store.sql import SqlStore

T0 = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def _lost(inv: str, attempt: int, node: str, at: datetime) -> BackendEvent:
    said = f"{node} went away: its node disappeared (spot preemption or node deleted)"
    return BackendEvent(
        inv,
        node=node,
        attempt=attempt,
        finished=Finished.failed(at, FailureReason.evicted, said, lost_node=node),
    )


async def _running(store: SqlStore, function: str, at: datetime) -> Invocation:
    record = await store.get_function(function)
    assert record is not None
    new = NewInvocation(new_invocation_id(), function, record.version, record.spec.priority.rank, at, b"{}")
    inv, _ = await store.create_invocation(new)
    for state in (State.pending, State.running):
        changed = await store.apply(Change(inv.id, state, at, node="gpu-1"))
        assert changed is not None
        inv = changed
    return inv


def test_a_lost_node_requeues_then_fails_as_the_retries_say(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await SqlStore.open(f"sqlite:///{tmp_path / 'eops.db'}")
        try:
            metrics = Metrics()
            store.observe_transitions(metrics.on_transition)
            spec = FunctionSpec(name="embed", command=["python", "w.py"], retries=1)
            await store.put_function(spec, T0)
            functions = FunctionCache(store)
            inv = await _running(store, "embed", T0)

            requeued = await end_lost_node(
                store, functions, _lost(inv.id, 0, "gpu-1", T0 + timedelta(seconds=5))
            )
            assert requeued is not None
            assert (requeued.state, requeued.attempt, requeued.node) == (State.queued, 1, None)
            assert requeued.notes[-1].kind == NODE_LOST
            assert requeued.notes[-1].message.startswith("node lost: gpu-1 went away")
            assert "requeued as attempt 1 (retry 1 of 1)" in requeued.message
            # The old attempt's end, seen again (a relist): not this attempt's to change.
            assert await end_lost_node(store, functions, _lost(inv.id, 0, "gpu-1", T0)) is None

            for state in (State.pending, State.running):
                assert await store.apply(Change(inv.id, state, T0 + timedelta(seconds=9), node="gpu-2"))
            failed = await end_lost_node(
                store, functions, _lost(inv.id, 1, "gpu-2", T0 + timedelta(seconds=20))
            )
            assert failed is not None
            assert (failed.state, failed.failure_reason, failed.attempt) == (
                State.failed,
                FailureReason.evicted,
                1,
            )
            assert failed.message.startswith("node lost: gpu-2 went away")
            assert "no retry left (1 of its function's 1 used)" in failed.message
            stored = await store.get_invocation(inv.id)
            assert stored == failed
            counted = {
                (name, outcome): metrics.registry.get_sample_value(f"{name}_total", {"outcome": outcome})
                for name in ("eops_node_losses", "eops_preemptions")
                for outcome in ("requeued", "failed")
            }
            assert counted == {
                ("eops_node_losses", "requeued"): 1.0,
                ("eops_node_losses", "failed"): 1.0,
                ("eops_preemptions", "requeued"): None,  # no preemption: never incremented
                ("eops_preemptions", "failed"): None,
            }
        finally:
            await store.close()

    asyncio.run(scenario())


def test_a_requeue_decided_for_an_attempt_that_is_over_loses_its_compare_and_set(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await SqlStore.open(f"sqlite:///{tmp_path / 'eops.db'}")
        try:
            await store.put_function(FunctionSpec(name="embed", command=["python", "w.py"], retries=3), T0)
            inv = await _running(store, "embed", T0)
            first = Change(inv.id, State.queued, T0, attempt=0)
            assert await store.apply(first) is not None
            for state in (State.pending, State.running):
                assert await store.apply(Change(inv.id, state, T0))
            # Decided on attempt 0 while attempt 1 now runs: left alone.
            assert await store.apply(replace(first, at=T0 + timedelta(seconds=1))) is None
            current = await store.get_invocation(inv.id)
            assert current is not None
            assert (current.state, current.attempt) == (State.running, 1)
        finally:
            await store.close()

    asyncio.run(scenario())


def test_an_eviction_that_kept_its_node_is_recorded_as_usual(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await SqlStore.open(f"sqlite:///{tmp_path / 'eops.db'}")
        try:
            await store.put_function(FunctionSpec(name="embed", command=["python", "w.py"], retries=3), T0)
            inv = await _running(store, "embed", T0)
            evicted = Finished.failed(T0, FailureReason.evicted, "The node was low on resource: memory.")
            event = BackendEvent(inv.id, attempt=0, finished=evicted)
            assert await end_lost_node(store, FunctionCache(store), event) is None
            current = await store.get_invocation(inv.id)
            assert current is not None
            assert current.state is State.running  # the usual fold records this end
        finally:
            await store.close()

    asyncio.run(scenario())
