"""Writes of invocation rows as compare-and-set UPDATEs, batched: the steps the writer runs
together (transitions, backend events, preemption intents) read their rows with one SELECT and
write them in as few statements as their columns allow, in the writer's transaction."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Dialect, select

from elasticityops.domain.changes import apply_change, preempting
from elasticityops.domain.events import BackendEvent, apply_event
from elasticityops.domain.invocations import Invocation, Note, State
from elasticityops.domain.node_seconds import run_again_charge
from elasticityops.domain.ports import Change
from elasticityops.store import driver, node_history, rows, webhook_outbox
from elasticityops.store import node_seconds as ledger
from elasticityops.store.selects import COLUMNS, id_batches
from elasticityops.store.tables import invocations

T = TypeVar("T")


class _LostRace(Exception):
    """A compare-and-set in a batch of updates matched fewer rows than it wrote (another
    gateway on the same database got there first). The batch's transaction is rolled back and
    the writer runs each operation in a transaction of its own, where the count is exact."""


def _read_current(conn: Connection, ids: Sequence[str]) -> dict[str, Invocation]:
    current: dict[str, Invocation] = {}
    for batch in id_batches(list(dict.fromkeys(ids))):
        query = select(*COLUMNS).where(invocations.c.id.in_(batch))
        for row in conn.execute(query).mappings():
            inv = rows.invocation_from_row(row)
            current[inv.id] = inv
    return current


def apply_many(
    conn: Connection, changes: list[Change], *, pricing: ledger.Pricing
) -> list[tuple[State, Invocation] | None]:
    """Apply transitions in order: (state before, invocation after) each, None where the
    compare-and-set lost."""
    return fold_many(conn, [(change.id, change) for change in changes], apply_change, pricing)


def record_many(
    conn: Connection, events: list[BackendEvent], *, pricing: ledger.Pricing
) -> list[tuple[State, Invocation] | None]:
    """Fold backend events into their invocations in order (`apply_event`: transition, notes,
    milestones and result), each changed row one compare-and-set UPDATE. An event that changes
    nothing (unknown id, ended already, a repeat) writes nothing and yields None."""
    outcomes = fold_many(conn, [(seen.invocation_id, seen) for seen in events], _with_event, pricing)
    told = [charge for seen in events for charge in seen.charges]
    if told:
        ledger.write(conn, told, pricing)
    _runs_again(conn, events, pricing)
    changed = [change for seen in events for change in seen.node_history]
    if changed:
        node_history.write(conn, changed)
    return outcomes


def _runs_again(conn: Connection, events: list[BackendEvent], pricing: ledger.Pricing) -> None:
    """What the runs these events tell held beyond the record's run, less what was charged so
    far, added as run_again: judged against the rows as the batch left them (the run that
    ends an invocation tells its runs right after its end)."""
    told = [seen for seen in events if seen.worker_runs]
    if not told:
        return
    now = _read_current(conn, [seen.invocation_id for seen in told])
    for seen in told:
        inv = now.get(seen.invocation_id)
        if inv is None:
            continue
        charged = ledger.run_again_charged_s(conn, inv.id, inv.attempt)
        charge = run_again_charge(inv, seen.attempt, seen.worker_runs, charged)
        if charge is not None:
            ledger.add(conn, [charge], pricing)


def preempting_many(
    conn: Connection, items: list[tuple[str, str, Note]]
) -> list[tuple[State, Invocation] | None]:
    """Mark invocations as being preempted (see `SqlTransitions.mark_preempting`), in order."""
    return fold_many(conn, [(item[0], item) for item in items], _with_preempting)


def _with_preempting(before: Invocation, item: tuple[str, str, Note]) -> Invocation | None:
    _, by, note = item
    return preempting(before, by, note)


def _with_event(before: Invocation, seen: BackendEvent) -> Invocation | None:
    after = apply_event(before, seen)
    return None if after == before else after


def fold_many(
    conn: Connection,
    items: list[tuple[str, T]],
    step: Callable[[Invocation, T], Invocation | None],
    pricing: ledger.Pricing | None = None,
) -> list[tuple[State, Invocation] | None]:
    """`step` each (id, item) over its invocation as it stands after the items before it, in
    order: (state before, invocation after), None where `step` changed nothing. One SELECT
    reads the batch's rows, and the updates go out as few statements as their columns allow
    (see _write_updates). The node-seconds of the attempts the updates end go to the ledger in
    the same transaction (`pricing`: the steps that can end an attempt pass it), and so do the
    webhook messages of the starts and ends among them (webhook_outbox.py)."""
    current = _read_current(conn, [invocation_id for invocation_id, _ in items])
    outcomes: list[tuple[State, Invocation] | None] = []
    updates: list[tuple[Invocation, Invocation]] = []
    for invocation_id, item in items:
        before = current.get(invocation_id)
        after = None if before is None else step(before, item)
        if before is None or after is None:
            outcomes.append(None)
            continue
        current[invocation_id] = after  # a later item of the same invocation in this batch
        updates.append((before, after))
        outcomes.append((before.state, after))
    if not _write_updates(conn, updates):
        # Only ever with a single update (a larger batch raises _LostRace instead): it lost.
        return [None] * len(outcomes)
    if pricing is not None:
        ledger.write(conn, ledger.ended_charges(updates), pricing)
    webhook_outbox.write_events(conn, updates)
    return outcomes


def _write_updates(conn: Connection, updates: Sequence[tuple[Invocation, Invocation]]) -> bool:
    """Write each (before, after) in order as a compare-and-set on the state, so a second
    gateway on the same database cannot win too. Consecutive updates of the same columns go
    to the driver as one executemany (a burst's 256 admissions are one statement instead of
    256 through SQLAlchemy's per-statement machinery, which was most of the writer's time).

    Returns False only when a single update lost; in a larger batch a lost compare-and-set
    raises _LostRace, so the writer re-runs each operation alone, where the count is exact."""
    changed = [(before, rows.invocation_update(before, after)) for before, after in updates]
    for columns, group in itertools.groupby(changed, key=lambda item: tuple(item[1])):
        if not columns:
            continue  # nothing changed, nothing to write
        run = list(group)
        sql, converters = _update_plan(conn.dialect, columns)
        params = [
            (
                *(convert(values[c]) for c, convert in zip(columns, converters, strict=True)),
                before.id,
                before.state.value,
            )
            for before, values in run
        ]
        matched = conn.exec_driver_sql(sql, params).rowcount
        if matched != len(run):
            if len(updates) == 1:
                return False
            raise _LostRace(f"{len(run) - matched} of {len(run)} compare-and-set updates lost")
    return True


@functools.cache
def _update_plan(dialect: Dialect, columns: tuple[str, ...]) -> tuple[str, tuple[Callable[[Any], Any], ...]]:
    """The driver-level compare-and-set UPDATE of these columns, and each column's converter
    (the one SQLAlchemy itself would apply: timestamps to SQLite's text, for one)."""
    mark = driver.mark(dialect)
    sets = ", ".join(f"{c} = {mark}" for c in columns)
    sql = f"UPDATE {invocations.name} SET {sets} WHERE id = {mark} AND state = {mark}"
    return sql, tuple(driver.converter(dialect, invocations.c[c]) for c in columns)
