"""SqlStore against SQLite and PostgreSQL (each test runs on both)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, select, update

from elasticityops.domain.errors import Conflict, InvalidInput, NotFound
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.functions import FunctionSpec, Priority
from elasticityops.domain.gpus_held import by_version
from elasticityops.domain.invocations import FailureReason, Note, State, new_invocation_id
from elasticityops.domain.ports import Change, NewInvocation, SpecChange
from elasticityops.domain.spillover import SPILLED, Spill
from elasticityops.domain.tokens import Scope
from elasticityops.store.sql import SqlStore
from elasticityops.store.tables import invocations
from helpers.pg_cluster import PgCluster, fresh_database

from .conftest import open_store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def spec(name: str = "hello", **extra: object) -> FunctionSpec:
    return FunctionSpec.model_validate({"name": name, "command": ["python", "-c", "pass"], **extra})


def new(
    function: str = "hello", key: str | None = None, at: datetime = T0, payload: bytes = b"{}"
) -> NewInvocation:
    return NewInvocation(
        id=new_invocation_id(),
        function=function,
        spec_version=1,
        priority_rank=Priority.normal.rank,
        accepted_at=at,
        payload=payload,
        idempotency_key=key,
    )


def test_functions_are_created_replaced_listed_and_deleted(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        record, outcome = await store.put_function(spec(), T0)
        assert outcome is SpecChange.created
        assert record.version == 1
        assert record.created_at == T0
        same, outcome = await store.put_function(spec(), T0 + timedelta(seconds=1))
        assert outcome is SpecChange.unchanged
        assert same.version == 1, "an unchanged spec keeps its version"
        changed, outcome = await store.put_function(spec(timeout_seconds=60), T0 + timedelta(seconds=2))
        assert outcome is SpecChange.changed
        assert changed.version == 2
        assert changed.spec.timeout_seconds == 60
        await store.put_function(spec("another"), T0)
        got = await store.get_function("hello")
        assert got is not None
        assert got.version == 2
        assert got.created_at == T0
        assert got.updated_at == T0 + timedelta(seconds=2)
        assert [r.spec.name for r in await store.list_functions()] == ["another", "hello"]
        assert await store.delete_function("hello", T0) is True
        assert await store.delete_function("hello", T0) is False
        assert await store.get_function("hello") is None
        assert [r.spec.name for r in await store.list_functions()] == ["another"]

    run.run(body())


def test_every_version_is_kept_and_a_deleted_name_goes_on_counting(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        await store.put_function(spec(timeout_seconds=10), T0)
        await store.put_function(spec(timeout_seconds=20), T0 + timedelta(seconds=1))
        assert await store.delete_function("hello", T0 + timedelta(seconds=2))
        assert await store.get_function("hello") is None
        again, outcome = await store.put_function(spec(timeout_seconds=10), T0 + timedelta(seconds=3))
        assert outcome is SpecChange.created, "deployed again after a delete: a new function to the user"
        assert again.version == 3, "never restarts at 1: version 1 names another spec"
        assert again.created_at == T0 + timedelta(seconds=3)
        kept = [await store.get_function_version("hello", n) for n in (1, 2, 3)]
        assert [s.timeout_seconds if s else None for s in kept] == [10, 20, 10]
        assert await store.get_function_version("hello", 4) is None
        assert await store.get_function_version("nobody", 1) is None

    run.run(body())


def test_an_invocation_is_stored_queued_with_its_payload(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        item = new(payload=b'{"x": 1}')
        inv, created = await store.create_invocation(item)
        assert created
        assert inv.state is State.queued
        got = await store.get_invocation(item.id)
        assert got is not None
        assert got.state is State.queued
        assert got.function == "hello"
        assert got.priority is Priority.normal
        assert got.timeline.accepted == T0
        assert got.timeline.accepted.tzinfo is not None
        assert await store.get_payload(item.id) == b'{"x": 1}'
        assert await store.get_invocation("inv-unknown") is None
        assert await store.get_payload("inv-unknown") is None

    run.run(body())


def test_an_idempotency_key_returns_the_first_invocation(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        first, created = await store.create_invocation(new(key="k1"))
        again, created_again = await store.create_invocation(new(key="k1"))
        assert created
        assert not created_again
        assert again.id == first.id
        other, created_other = await store.create_invocation(new(function="other", key="k1"))
        assert created_other
        assert other.id != first.id, "keys are per function"

    run.run(body())


def test_an_invocations_annotations_are_stored_with_it_and_read_back_everywhere(
    store: SqlStore, run: asyncio.Runner
) -> None:
    hints = {"eops.dev/run-seconds": "12", "eops.dev/exit-code": "3"}

    async def body() -> None:
        item = replace(new(key="k1"), annotations=hints)
        created, _ = await store.create_invocation(item)
        assert created.annotations == hints
        got = await store.get_invocation(item.id)
        assert got is not None
        assert got.annotations == hints
        page = await store.list_invocations(function="hello", state=None, limit=10, cursor=None)
        assert [i.annotations for i in page.items] == [hints]
        assert [i.annotations for i in await store.queued(10)] == [hints]
        # A replay with other annotations is still the first invocation, as it was stored.
        again, created_again = await store.create_invocation(
            replace(new(key="k1"), annotations={"eops.dev/run-seconds": "99"})
        )
        assert not created_again
        assert (again.id, again.annotations) == (item.id, hints)
        plain, _ = await store.create_invocation(new())
        assert plain.annotations == {}
        read = await store.get_invocation(plain.id)
        assert read is not None
        assert read.annotations == {}

    run.run(body())


def test_none_are_stored_as_null(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> tuple[str, str]:
        plain, _ = await store.create_invocation(new())
        hinted, _ = await store.create_invocation(replace(new(), annotations={"eops.dev/x": "1"}))
        return plain.id, hinted.id

    plain_id, hinted_id = run.run(body())
    with store._engine.connect() as conn:
        stored = {
            row.id: row.annotations
            for row in conn.execute(select(invocations.c.id, invocations.c.annotations))
        }
    assert stored == {plain_id: None, hinted_id: '{"eops.dev/x": "1"}'}


def test_concurrent_requests_with_one_key_create_one_invocation(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        results = await asyncio.gather(*(store.create_invocation(new(key="same")) for _ in range(50)))
        assert sum(created for _, created in results) == 1
        assert len({inv.id for inv, _ in results}) == 1
        page = await store.list_invocations(function="hello", state=None, limit=100, cursor=None)
        assert len(page.items) == 1

    run.run(body())


def test_group_commit_stores_every_concurrent_invocation(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        items = [new() for _ in range(600)]
        results = await asyncio.gather(*(store.create_invocation(i) for i in items))
        assert all(created for _, created in results)
        counts = await store.counts_by_state()
        assert counts[State.queued] == 600
        assert counts[State.running] == 0

    run.run(body())


def test_one_failing_write_fails_only_its_caller(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        await store.create_api_token("first", "a" * 64, T0)
        outcomes = await asyncio.gather(
            *(store.create_invocation(new()) for _ in range(20)),
            store.create_api_token("dup", "a" * 64, T0),
            *(store.create_invocation(new()) for _ in range(20)),
            return_exceptions=True,
        )
        assert isinstance(outcomes[20], Conflict)
        assert all(not isinstance(o, BaseException) for i, o in enumerate(outcomes) if i != 20)
        assert (await store.counts_by_state())[State.queued] == 40

    run.run(body())


def test_pages_walk_newest_first_without_gaps_or_repeats(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        ids = []
        for i in range(25):
            item = new(function="a" if i % 2 else "b", at=T0 + timedelta(seconds=i))
            ids.append(item.id)
            await store.create_invocation(item)
            await asyncio.sleep(0.002)  # ids carry milliseconds: keep them apart
        seen: list[str] = []
        cursor = None
        while True:
            page = await store.list_invocations(function=None, state=None, limit=10, cursor=cursor)
            seen.extend(i.id for i in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == sorted(ids, reverse=True)
        only_a = await store.list_invocations(function="a", state=None, limit=100, cursor=None)
        assert len(only_a.items) == 12
        assert only_a.next_cursor is None
        none_running = await store.list_invocations(function=None, state=State.running, limit=5, cursor=None)
        assert none_running.items == []
        with pytest.raises(InvalidInput):
            await store.list_invocations(function=None, state=None, limit=0, cursor=None)

    run.run(body())


def test_transitions_are_compare_and_set(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        item = new()
        await store.create_invocation(item)
        t1 = T0 + timedelta(seconds=1)
        pending = await store.apply(Change(item.id, State.pending, t1, from_states=frozenset({State.queued})))
        assert pending is not None
        assert pending.state is State.pending
        assert pending.timeline.dispatched == t1
        lost = await store.apply(Change(item.id, State.pending, t1, from_states=frozenset({State.queued})))
        assert lost is None, "the second writer with the same expectation loses"
        assert await store.apply(Change(item.id, State.pending, t1)) is None, "not an allowed transition"
        assert await store.apply(Change("inv-unknown", State.pending, t1)) is None
        t2 = T0 + timedelta(seconds=3)
        await store.record(BackendEvent(item.id, node="slot-0", capacity_ready=t1 + timedelta(seconds=1)))
        await store.record(BackendEvent(item.id, note=Note(t1, "SlotWarming", "slot 0 is provisioning")))
        running = await store.apply(Change(item.id, State.running, t2))
        assert running is not None
        assert running.node == "slot-0"
        t3 = T0 + timedelta(seconds=10)
        done = await store.apply(
            Change(item.id, State.failed, t3, exit_code=3, reason=FailureReason.exit_code, message="boom")
        )
        assert done is not None
        got = await store.get_invocation(item.id)
        assert got is not None
        assert got.state is State.failed
        assert got.exit_code == 3
        assert got.failure_reason is FailureReason.exit_code
        assert got.message == "boom"
        assert got.timeline.capacity_ready == t1 + timedelta(seconds=1)
        assert got.timeline.started == t2
        assert got.timeline.finished == t3
        assert got.notes == (Note(t1, "SlotWarming", "slot 0 is provisioning"),)
        assert await store.apply(Change(item.id, State.cancelled, t3)) is None, "terminal is final"

    run.run(body())


def test_preemption_marks_then_requeues_as_the_next_attempt(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        item = new()
        await store.create_invocation(item)
        t1, t2, t3 = (T0 + timedelta(seconds=s) for s in (1, 2, 3))
        assert await store.mark_preempting(item.id, "inv-h", Note(t1, "Preempting", "x")) is None, "queued"
        await store.apply(Change(item.id, State.pending, t1))
        await store.apply(Change(item.id, State.running, t1, node="slot-0"))
        marked = await store.mark_preempting(item.id, "inv-h", Note(t2, "Preempting", "for inv-h"))
        assert marked is not None
        assert marked.preempting_by == "inv-h"
        assert await store.mark_preempting(item.id, "inv-other", Note(t2, "Preempting", "y")) is None, "once"
        # What the stopped job says is no news: a cancelled end while preempting changes nothing.
        assert await store.record(BackendEvent(item.id, finished=Finished.cancelled(t2))) is None
        note = Note(t3, "Preempted", "preempted by inv-h")
        active = frozenset({State.pending, State.running})
        requeued = await store.apply(Change(item.id, State.queued, t3, from_states=active, note=note))
        assert requeued is not None
        got = await store.get_invocation(item.id)
        assert got == requeued
        assert (got.state, got.attempt, got.preempting_by, got.node) == (State.queued, 1, None, None)
        assert got.timeline.preempted == t3
        assert got.timeline.dispatched is None
        assert [n.kind for n in got.notes] == ["Preempting", "Preempted"]
        # Its place in the queue is its priority and acceptance, as before.
        assert [i.id for i in await store.queued(10)] == [item.id]
        # An event of the old attempt changes nothing; one of the new attempt does.
        await store.apply(Change(item.id, State.pending, t3))
        assert await store.record(BackendEvent(item.id, started=t3, attempt=0)) is None
        started = await store.record(BackendEvent(item.id, started=t3, attempt=1))
        assert started is not None
        assert started[1].state is State.running

    run.run(body())


def test_a_result_is_stored_only_while_the_invocation_is_active(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        item = new()
        await store.create_invocation(item)
        assert await store.set_result(item.id, b"early") is State.queued, "no job runs yet"
        t1 = T0 + timedelta(seconds=1)
        await store.apply(Change(item.id, State.pending, t1))
        await store.apply(Change(item.id, State.running, t1))
        assert await store.set_result(item.id, b'{"n": 1}') is None
        assert await store.set_result(item.id, b'{"n": 2}') is None, "while running the last one wins"
        await store.apply(Change(item.id, State.succeeded, t1 + timedelta(seconds=1), exit_code=0))
        assert await store.set_result(item.id, b'{"n": 3}') is State.succeeded, "ended: final"
        got = await store.get_invocation(item.id)
        assert got is not None
        assert got.result == b'{"n": 2}'
        with pytest.raises(NotFound):
            await store.set_result("inv-unknown", b"{}")

    run.run(body())


def test_transition_observers_see_each_committed_change_once(store: SqlStore, run: asyncio.Runner) -> None:
    seen: list[tuple[State, State]] = []
    store.observe_transitions(lambda before, after: seen.append((before, after.state)))

    async def body() -> None:
        item = new()
        await store.create_invocation(item)
        await store.apply(Change(item.id, State.pending, T0))
        await store.apply(Change(item.id, State.pending, T0))  # refused: not observed
        await store.apply(Change(item.id, State.succeeded, T0, exit_code=0))

    run.run(body())
    assert seen == [(State.queued, State.pending), (State.pending, State.succeeded)]


def test_queued_is_oldest_first_and_active_is_pending_or_running(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        items = []
        for _ in range(4):
            items.append(new())
            await store.create_invocation(items[-1])
            await asyncio.sleep(0.002)
        await store.apply(Change(items[0].id, State.pending, T0))
        await store.apply(Change(items[1].id, State.pending, T0))
        await store.apply(Change(items[1].id, State.running, T0))
        assert [i.id for i in await store.queued(10)] == [items[2].id, items[3].id]
        assert [i.id for i in await store.queued(1)] == [items[2].id]
        assert {i.id for i in await store.active()} == {items[0].id, items[1].id}
        other = new(function="other")
        await store.create_invocation(other)
        await store.apply(Change(other.id, State.pending, T0))
        await store.apply(Change(items[0].id, State.succeeded, T0, from_states=frozenset({State.pending})))
        assert by_version(await store.active_counts_by_type()) == {("hello", 1): 1, ("other", 1): 1}

    run.run(body())


def test_queued_ahead_counts_higher_priorities_and_earlier_ones_of_the_same(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        made: dict[str, NewInvocation] = {}
        plan = [
            ("low1", "hello", Priority.low),
            ("n1", "hello", Priority.normal),
            ("low2", "hello", Priority.low),
        ]
        plan += [("other", "other", Priority.normal), ("done", "hello", Priority.high)]
        plan += [("high", "hello", Priority.high), ("low3", "other", Priority.low)]
        for label, function, priority in plan:
            made[label] = replace(new(function=function), priority_rank=priority.rank)
            await store.create_invocation(made[label])
            await asyncio.sleep(0.002)  # ids are time-ordered: the acceptance order
        await store.apply(Change(made["done"].id, State.pending, T0))

        async def ahead(label: str) -> Mapping[tuple[str, int], int]:
            got = await store.get_invocation(made[label].id)
            assert got is not None
            return await store.queued_ahead(got)

        assert await ahead("high") == {}, "a high one accepted last is first: the pending one is not queued"
        # Within a priority the functions take turns (domain/admission.py), and hello has one
        # pending ("done"): other's first goes before hello's next ones.
        assert await ahead("n1") == {("hello", 1): 1, ("other", 1): 1}
        assert await ahead("other") == {("hello", 1): 1}
        assert await ahead("low1") == {("hello", 1): 2, ("other", 1): 2}
        assert await ahead("low3") == {("hello", 1): 2, ("other", 1): 1}

    run.run(body())


def test_queued_is_in_admission_order_and_pages_on_from_an_invocation(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        made = []
        for priority in (Priority.low, Priority.normal, Priority.high, Priority.low, Priority.high):
            made.append(replace(new(), priority_rank=priority.rank))
            await store.create_invocation(made[-1])
            await asyncio.sleep(0.002)  # ids are time-ordered: the acceptance order
        order = [made[i].id for i in (2, 4, 1, 0, 3)]
        every = await store.queued(10)
        assert [i.id for i in every] == order
        assert [i.id for i in await store.queued(3)] == order[:3]
        assert [i.id for i in await store.queued(2, after=every[1])] == order[2:4]
        assert [i.id for i in await store.queued(10, after=every[3])] == order[4:]
        assert await store.queued(10, after=every[4]) == []

    run.run(body())


def test_queue_counts_read_the_state_priority_id_index(tmp_path: Path, run: asyncio.Runner) -> None:
    """What makes queued_ahead and queued cheap with thousands queued: index ranges, no scan of
    the table, and never a function's whole history by its index (checked on SQLite, whose plan
    is easy to read)."""
    statements: list[tuple[str, Any]] = []

    def keep(_conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, _many: bool) -> None:
        if statement.lstrip().startswith(("SELECT", "WITH")) and "FROM invocations" in statement:
            statements.append((statement, params))

    async def body() -> None:
        store = await open_store(f"sqlite:///{tmp_path / 'eops.db'}")
        try:
            item = new()
            await store.create_invocation(item)
            queued = await store.get_invocation(item.id)
            assert queued is not None
            event.listen(store._engine, "before_cursor_execute", keep)
            await store.queued_ahead(queued)
            await store.queued(10)
            event.remove(store._engine, "before_cursor_execute", keep)
            # A normal one: its turn (two counts), the turns of its priority, the high ones; then
            # per priority its functions (a skip scan), and for normal, the one with any: the
            # running counts, its first ids, their rows (by primary key).
            assert len(statements) == 10, statements
            queue_indexes = (
                "ix_invocations_state_priority_id",
                "ix_invocations_queued_priority_function_id",
                "ix_invocations_state_id",
                "sqlite_autoindex_invocations_1",
            )
            with store._engine.connect() as conn:
                for statement, params in statements:
                    plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params).all()
                    details = " ".join(str(row[-1]) for row in plan)
                    assert any(index in details for index in queue_indexes), (statement, details)
                    assert "ix_invocations_function_id" not in details, details
                    assert "SCAN invocations" not in details, details
        finally:
            await store.close()

    run.run(body())


def test_ping_reaches_the_database(store: SqlStore, run: asyncio.Runner) -> None:
    run.run(store.ping())


def test_api_tokens_are_checked_by_hash(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        await store.create_api_token("admin", "f" * 64, T0)
        assert await store.check_api_token("f" * 64)
        assert not await store.check_api_token("e" * 64)
        with pytest.raises(Conflict):
            await store.create_api_token("again", "f" * 64, T0)

    run.run(body())


def test_api_tokens_are_listed_and_revoked_by_id(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        admin = await store.create_api_token("same", "a1" * 32, T0)
        later = T0 + timedelta(seconds=1)
        narrow = await store.create_api_token(
            "same", "b2" * 32, later, scope=Scope.invoke, expires_at=T0 + timedelta(hours=1)
        )
        assert (admin.id, narrow.id) == ("tok-a1a1a1a1a1a1", "tok-b2b2b2b2b2b2")
        assert await store.list_api_tokens() == [admin, narrow]
        assert not await store.revoke_api_token("tok-000000000000")
        assert not await store.revoke_api_token("tok-%"), "not a pattern"
        assert not await store.revoke_api_token("b2b2b2b2b2b2")
        assert await store.revoke_api_token(narrow.id)
        assert not await store.revoke_api_token(narrow.id)
        assert await store.list_api_tokens() == [admin]
        assert await store.check_api_token("b2" * 32) is None

    run.run(body())


def test_what_was_stored_is_there_after_reopening(store_url: str, run: asyncio.Runner) -> None:
    async def body() -> None:
        first = await open_store(store_url)
        items = [new() for _ in range(100)]
        await asyncio.gather(*(first.create_invocation(i) for i in items))
        await first.put_function(spec(), T0)
        await first.close()
        second = await open_store(store_url)
        try:
            assert (await second.counts_by_state())[State.queued] == 100
            assert await second.get_function("hello") is not None
            for item in items[:5]:
                assert await second.get_invocation(item.id) is not None
        finally:
            await second.close()

    run.run(body())


def test_an_unknown_database_is_refused_with_the_fix(run: asyncio.Runner) -> None:
    with pytest.raises(InvalidInput) as caught:
        run.run(open_store("mysql://localhost/x"))
    assert "postgresql+psycopg" in str(caught.value)


def test_small_payloads_are_read_together_and_large_ones_left_out(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        small, large, other = new(payload=b'{"a": 1}'), new(payload=b"x" * 5000), new(payload=b"[]")
        for item in (small, large, other):
            await store.create_invocation(item)
        found = await store.small_payloads([small.id, large.id, "inv-missing"], max_bytes=4096)
        assert found == {small.id: b'{"a": 1}'}
        assert await store.small_payloads([], max_bytes=4096) == {}
        many = [new(payload=b"%d" % i) for i in range(600)]  # more ids than one query takes
        for item in many:
            await store.create_invocation(item)
        assert len(await store.small_payloads([i.id for i in many], max_bytes=10)) == 600

    run.run(body())


def test_transitions_queued_together_are_applied_in_order_each_compare_and_set(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        items = [new() for _ in range(50)]
        for item in items:
            await store.create_invocation(item)
        queued = frozenset({State.queued})
        first = items[0].id
        # Sent at once, so the writer takes them as batches: the second queued -> pending of
        # `first` must lose, and its pending -> running (queued after it) must see pending.
        results = await asyncio.gather(
            *(store.apply(Change(i.id, State.pending, T0, from_states=queued)) for i in items),
            store.apply(Change(first, State.pending, T0, from_states=queued)),
            store.apply(Change(first, State.running, T0, from_states=frozenset({State.pending}))),
            store.apply(Change("inv-missing", State.pending, T0)),
        )
        assert all(r is not None and r.state is State.pending for r in results[:50])
        assert results[50] is None
        assert results[51] is not None
        assert results[51].state is State.running
        assert results[52] is None
        stored = await store.get_invocation(first)
        assert stored is not None
        assert stored.state is State.running
        assert stored.timeline.dispatched is not None
        assert by_version(await store.active_counts_by_type()) == {("hello", 1): 50}

    run.run(body())


def test_transitions_of_a_burst_share_update_statements(store: SqlStore, run: asyncio.Runner) -> None:
    updates: list[int] = []

    def count(_conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        if statement.startswith("UPDATE invocations"):
            updates.append(len(params) if many else 1)

    event.listen(store._engine, "before_cursor_execute", count)

    async def body() -> None:
        items = [new() for _ in range(100)]
        await asyncio.gather(*(store.create_invocation(i) for i in items))
        queued = frozenset({State.queued})
        results = await asyncio.gather(
            *(store.apply(Change(i.id, State.pending, T0, from_states=queued)) for i in items)
        )
        assert all(r is not None and r.state is State.pending for r in results)
        assert sum(updates) == 100, "every row written once"
        assert len(updates) < 50, f"100 transitions took {len(updates)} UPDATE statements"
        page = await store.list_invocations(function=None, state=State.pending, limit=200, cursor=None)
        assert {i.id for i in page.items} == {i.id for i in items}
        assert all(i.timeline.dispatched == T0 for i in page.items)

    run.run(body())


def test_a_compare_and_set_lost_inside_a_batch_is_redone_one_by_one(
    store: SqlStore, run: asyncio.Runner
) -> None:
    """Another writer (a second gateway on the same database) moves one row on between the
    batch's read and its UPDATE: that change loses, the rest of the batch still lands."""
    interfered: list[str] = []
    victim: list[str] = []

    def other_writer(_conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        # Only a multi-row UPDATE that is about to write the victim: (..., id, expected state).
        if (
            many
            and statement.startswith("UPDATE invocations")
            and not interfered
            and victim[0] in {row[-2] for row in params}
        ):
            interfered.append(statement)
            with store._engine.begin() as other:
                other.execute(
                    update(invocations)
                    .where(invocations.c.id == victim[0])
                    .values(state=State.cancelled.value)
                )

    async def body() -> None:
        items = [new() for _ in range(60)]
        await asyncio.gather(*(store.create_invocation(i) for i in items))
        victim.append(items[30].id)
        event.listen(store._engine, "before_cursor_execute", other_writer)
        queued = frozenset({State.queued})
        results = await asyncio.gather(
            *(store.apply(Change(i.id, State.pending, T0, from_states=queued)) for i in items)
        )
        assert interfered, "the other writer never ran: the victim was not written in a multi-row batch"
        assert results[30] is None
        assert all(r is not None and r.state is State.pending for k, r in enumerate(results) if k != 30)
        lost = await store.get_invocation(victim[0])
        assert lost is not None
        assert lost.state is State.cancelled
        assert by_version(await store.active_counts_by_type()) == {("hello", 1): 59}

    run.run(body())


def note(invocation_id: str, n: Note) -> BackendEvent:
    return BackendEvent(invocation_id, note=n)


def test_an_event_is_one_write_of_transition_milestones_notes_and_result(
    store: SqlStore, run: asyncio.Runner
) -> None:
    updates: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, params: Any, _ctx: Any, many: bool) -> None:
        if statement.startswith("UPDATE invocations"):
            updates.append(statement)

    seen: list[tuple[State, State]] = []
    store.observe_transitions(lambda before, after: seen.append((before, after.state)))

    async def body() -> None:
        item = new()
        await store.create_invocation(item)
        await store.apply(Change(item.id, State.pending, T0, from_states=frozenset({State.queued})))
        event.listen(store._engine, "before_cursor_execute", count)
        t = [T0 + timedelta(seconds=s) for s in range(5)]
        short_job = BackendEvent(
            item.id,
            node="gpu-3",
            capacity_ready=t[1],
            started=t[2],
            note=Note(t[1], "Pulled", "image pulled"),
            finished=Finished.succeeded(t[3], result=b'{"ok": 1}'),
        )
        outcome = await store.record(short_job)
        assert outcome is not None
        before, after = outcome
        assert (before, after.state) == (State.pending, State.succeeded)
        assert len(updates) == 1, updates
        stored = await store.get_invocation(item.id)
        assert stored is not None
        assert stored == after
        assert (stored.timeline.capacity_ready, stored.timeline.started, stored.timeline.finished) == (
            t[1],
            t[2],
            t[3],
        )
        assert (stored.node, stored.result, [n.kind for n in stored.notes]) == (
            "gpu-3",
            b'{"ok": 1}',
            ["Pulled"],
        )
        assert seen[-1] == (State.pending, State.succeeded)
        # Late or repeated news of an ended invocation writes nothing.
        late = BackendEvent(item.id, finished=Finished.cancelled(t[4]), note=Note(t[4], "Killing", "late"))
        assert await store.record(late) is None
        assert await store.record(BackendEvent("inv-unknown", started=t[4])) is None
        assert len(updates) == 1
        assert await store.get_invocation(item.id) == stored

    run.run(body())


def test_notes_and_nodes_queued_together_are_each_kept(store: SqlStore, run: asyncio.Runner) -> None:
    async def body() -> None:
        items = [new() for _ in range(40)]
        await asyncio.gather(*(store.create_invocation(i) for i in items))
        await asyncio.gather(
            *(
                store.apply(Change(i.id, State.pending, T0, from_states=frozenset({State.queued})))
                for i in items
            )
        )
        t1 = T0 + timedelta(seconds=3)
        await asyncio.gather(
            *(store.record(note(i.id, Note(T0, "Unschedulable", f"no node for {i.id}"))) for i in items),
            *(store.record(note(i.id, Note(t1, "TriggeredScaleUp", "pool gpu-t4 1->2"))) for i in items),
            *(
                store.record(BackendEvent(i.id, node=f"node-{k}", capacity_ready=t1))
                for k, i in enumerate(items)
            ),
            store.record(note("inv-missing", Note(T0, "Unschedulable", "nobody"))),
        )
        for k, item in enumerate(items):
            stored = await store.get_invocation(item.id)
            assert stored is not None
            assert [n.kind for n in stored.notes] == ["Unschedulable", "TriggeredScaleUp"]
            assert stored.notes[0].message == f"no node for {item.id}"
            assert stored.timeline.capacity_ready == t1
            assert stored.node == f"node-{k}"
            assert stored.state is State.pending

    run.run(body())


def test_writes_go_on_after_the_database_drops_the_writers_connection(
    postgres: PgCluster, run: asyncio.Runner
) -> None:
    """A server that closes the writer's connection (a restart, an idle timeout) costs a
    reconnect, not a failed write: neither for a lone write nor for a batch of them."""
    url = fresh_database(postgres)
    database = url.rsplit("/", 1)[-1]

    async def body() -> None:
        store = await open_store(url)
        try:
            first, _ = await store.create_invocation(new())
            with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
                killed = admin.execute(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()) AS k",
                    (database,),
                ).fetchone()
            assert killed is not None
            assert killed[0] >= 1, "the writer's connection was not there to drop"
            second, created = await store.create_invocation(new())
            assert created
            moved = await store.apply(
                Change(first.id, State.pending, T0, from_states=frozenset({State.queued}))
            )
            assert moved is not None
            assert {i.id for i in (await store.queued(10))} == {second.id}
            with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (database,),
                )
            batch = await asyncio.gather(*(store.create_invocation(new()) for _ in range(30)))
            assert all(created for _, created in batch)
            assert len(await store.queued(100)) == 31
        finally:
            await store.close()

    run.run(body())


def test_commit_observers_see_how_many_writes_each_commit_carried(
    store: SqlStore, run: asyncio.Runner
) -> None:
    commits: list[int] = []
    store.observe_commits(commits.append)

    async def body() -> None:
        await asyncio.gather(*(store.create_invocation(new()) for _ in range(50)))
        await store.put_function(spec("observed"), T0)

    run.run(body())
    assert sum(commits) == 51, "every write is in exactly one observed commit"
    assert all(n >= 1 for n in commits)


def test_the_gpu_type_is_kept_from_admission_and_counted_per_type(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        t4, l4 = "nvidia-tesla-t4", "nvidia-l4"
        items = [new() for _ in range(4)]
        for item in items:
            await store.create_invocation(item)
        await store.apply(Change(items[0].id, State.pending, T0, gpu_type=t4))
        await store.apply(Change(items[1].id, State.pending, T0, gpu_type=l4))
        await store.apply(Change(items[2].id, State.pending, T0))  # as a gateway before spillover
        running = await store.apply(Change(items[1].id, State.running, T0))
        assert running is not None
        assert running.gpu_type == l4, "later transitions keep it"
        got = await store.get_invocation(items[0].id)
        assert got is not None
        assert got.gpu_type == t4
        queued = await store.get_invocation(items[3].id)
        assert queued is not None
        assert queued.gpu_type is None
        assert await store.active_counts_by_type() == {
            ("hello", 1, t4): 1,
            ("hello", 1, l4): 1,
            ("hello", 1, None): 1,
        }
        assert by_version(await store.active_counts_by_type()) == {("hello", 1): 3}

    run.run(body())


def test_a_spill_moves_a_pending_invocation_to_the_next_type_once(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        t4, l4 = "nvidia-tesla-t4", "nvidia-l4"
        item = new()
        await store.create_invocation(item)
        await store.apply(Change(item.id, State.pending, T0, gpu_type=t4))
        why = Spill(l4, "zone us-central1-a stocked out for nvidia-tesla-t4")
        moved = await store.spill(item.id, t4, why, T0 + timedelta(seconds=5))
        assert moved is not None
        assert (moved.state, moved.gpu_type) == (State.pending, l4)
        assert moved.notes[-1] == Note(T0 + timedelta(seconds=5), SPILLED, why.text)
        again = await store.get_invocation(item.id)
        assert again == moved
        assert await store.spill(item.id, t4, why, T0) is None, "it waits on L4 now: no second move"
        assert await store.active_counts_by_type() == {("hello", 1, l4): 1}
        await store.apply(Change(item.id, State.running, T0 + timedelta(seconds=9)))
        assert await store.spill(item.id, l4, Spill(t4, "x"), T0) is None, "a started one stays"

    run.run(body())
