"""The queue in admission order (domain/admission.py `admission_order`): by priority, then the
functions' turns (an invocation's turn: its function's pending and running invocations, plus its
function's queued ones of its priority accepted before it), then acceptance. Read in the
database: the queued rows' turns counted by a window function over a partial index that holds
only queued rows (priority, function, id), the running ones by a grouped count of the few active
rows, so a page reads its own rows and index entries, never the rows behind them."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import ColumnElement, Connection, Subquery, and_, case, func, literal_column, or_, select

from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, State
from elasticityops.store import rows
from elasticityops.store.selects import COLUMNS
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


def page(conn: Connection, priority: Priority, limit: int, after: Invocation | None) -> list[Invocation]:
    """Up to `limit` queued invocations of one priority in admission order; with `after` (one of
    this priority), those behind it."""
    turns = _turns(priority)
    chosen = select(turns.c.id, turns.c.turn)
    if after is not None:
        mine = turn_of(conn, after)
        chosen = chosen.where(or_(turns.c.turn > mine, and_(turns.c.turn == mine, turns.c.id > after.id)))
    picked = chosen.order_by(turns.c.turn, turns.c.id).limit(limit).subquery("picked")
    query = (
        select(*COLUMNS)
        .join_from(invocations, picked, invocations.c.id == picked.c.id)
        .order_by(picked.c.turn, picked.c.id)
    )
    return [rows.invocation_from_row(r) for r in conn.execute(query).mappings()]


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
