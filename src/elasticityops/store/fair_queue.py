"""The queue in admission order (domain/admission.py `admission_order`): by priority, then the
functions' turns (an invocation's turn: its function's pending and running invocations, plus its
function's queued ones of its priority accepted before it), then acceptance. Read in the
database: the queued rows' turns counted by a window function over a partial index that holds
only queued rows (priority, function, id), the running ones by a grouped count of the few active
rows, so a page reads its own rows and index entries, never the rows behind them."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from sqlalchemy import (
    ColumnElement,
    Connection,
    Subquery,
    and_,
    case,
    func,
    literal_column,
    or_,
    select,
    text,
)

from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, State
from elasticityops.store import rows
from elasticityops.store.selects import COLUMNS, id_batches
from elasticityops.store.tables import invocations

# Written out, not a bound parameter: neither database uses a partial index for `state = ?`
# (the value is not known when the statement is planned).
_QUEUED: ColumnElement[str] = literal_column(f"'{State.queued.value}'")


def _turns(priority: Priority, *, versions: bool = False) -> Subquery:
    """Each queued invocation of `priority`: id, turn, function (and spec_version)."""
    c = invocations.c
    order = func.row_number().over(partition_by=c.function, order_by=c.id).label("order")
    extra = [c.spec_version.label("version")] if versions else []
    ranked = (
        select(c.id.label("id"), c.function.label("function"), order, *extra)
        .where(c.state == _QUEUED, c.priority == priority.value)
        .subquery("ranked")
    )
    active = (
        select(c.function.label("function"), func.count().label("running"))
        .where(c.state.in_([s.value for s in ACTIVE_STATES]))
        .group_by(c.function)
        .subquery("active")
    )
    turn = (ranked.c.order + func.coalesce(active.c.running, 0)).label("turn")
    columns = [ranked.c.id, ranked.c.function, turn, *([ranked.c.version] if versions else [])]
    joined = ranked.outerjoin(active, ranked.c.function == active.c.function)
    return select(*columns).select_from(joined).subquery("turns")


def turn_of(conn: Connection, inv: Invocation) -> int:
    """Its turn: its function's pending and running invocations, plus 1 + its function's queued
    ones of its priority accepted before it."""
    c = invocations.c
    queued = select(func.count()).where(
        c.state == _QUEUED, c.priority == inv.priority.value, c.function == inv.function, c.id < inv.id
    )
    # Counted over the few active rows (the state index), never by the function's index, which
    # would walk every invocation the function ever had.
    mine = case((c.function == inv.function, 1), else_=0)
    running = select(func.coalesce(func.sum(mine), 0)).where(c.state.in_([s.value for s in ACTIVE_STATES]))
    return int(conn.execute(queued).scalar_one()) + int(conn.execute(running).scalar_one()) + 1


# The functions with queued work of one priority, each found by one seek of the partial index
# (priority, function, id): a skip scan, however many invocations each has queued.
_FUNCTIONS = text(
    """
    WITH RECURSIVE fns(name) AS (
        SELECT min(function) FROM invocations WHERE state = 'queued' AND priority = :priority
        UNION ALL
        SELECT (
            SELECT min(q.function) FROM invocations q
            WHERE q.state = 'queued' AND q.priority = :priority AND q.function > fns.name
        )
        FROM fns WHERE fns.name IS NOT NULL
    )
    SELECT name FROM fns WHERE name IS NOT NULL
    """
)


def page(conn: Connection, priority: Priority, limit: int, after: Invocation | None) -> list[Invocation]:
    """Up to `limit` queued invocations of one priority in admission order; with `after` (one of
    this priority), those behind it. Reads each function's first ids (as deep as a page can
    reach: its first `limit` past the floor) and the active counts, never the whole queue: a
    cycle costs about the same behind ten thousand queued as behind ten."""
    c = invocations.c
    names = [row[0] for row in conn.execute(_FUNCTIONS, {"priority": priority.value})]
    if not names:
        return []
    # Over the few active rows (the state index); a filter on the names would let the
    # function index walk every invocation each function ever had.
    running: dict[str, int] = dict(
        conn.execute(
            select(c.function, func.count())
            .where(c.state.in_([s.value for s in ACTIVE_STATES]))
            .group_by(c.function)
        ).all()
    )
    floor = (turn_of(conn, after), after.id) if after is not None else None
    candidates: list[tuple[int, str]] = []
    for name in names:
        base = running.get(name, 0)
        # A function's ids past its first `limit` behind the floor cannot be in the page: as
        # many of its own come before each of them.
        skipped = 0 if floor is None else max(0, floor[0] - base)
        firsts = conn.execute(
            select(c.id)
            .where(c.state == _QUEUED, c.priority == priority.value, c.function == name)
            .order_by(c.id)
            .limit(skipped + limit)
        ).scalars()
        candidates += [(base + rank, invocation_id) for rank, invocation_id in enumerate(firsts, start=1)]
    if floor is not None:
        candidates = [turn for turn in candidates if turn > floor]
    chosen = [invocation_id for _, invocation_id in heapq.nsmallest(limit, candidates)]
    found: dict[str, Invocation] = {}
    for some in id_batches(chosen):
        for row in conn.execute(select(*COLUMNS).where(c.id.in_(some))).mappings():
            found[row["id"]] = rows.invocation_from_row(row)
    # Admitted or cancelled between the reads: left out, as a later read would.
    return [found[i] for i in chosen if i in found and found[i].state is State.queued]


def ahead_in_its_priority(conn: Connection, inv: Invocation) -> Mapping[tuple[str, int], int]:
    """The queued invocations of its priority that admission order puts before it, counted by
    function and version: every one of a lower turn, and of its own turn those accepted before
    it."""
    mine = turn_of(conn, inv)
    turns = _turns(inv.priority, versions=True)
    query = (
        select(turns.c.function, turns.c.version, func.count())
        .where(or_(turns.c.turn < mine, and_(turns.c.turn == mine, turns.c.id < inv.id)))
        .group_by(turns.c.function, turns.c.version)
    )
    return {(function, version): count for function, version, count in conn.execute(query)}
