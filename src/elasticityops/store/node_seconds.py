"""The node-seconds ledger in SQL: written in the transaction that ends an attempt, read per
invocation, summed into a report by function, hour or capacity, and totalled for /metrics.
Every read aggregates in the database; no read loads the ledger's rows into Python."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Insert, and_, case, func, insert, select, update

from elasticityops.domain.invocations import Invocation
from elasticityops.domain.node_seconds import (
    GROUPINGS,
    AttemptTimes,
    Charge,
    CostGroup,
    Phase,
    PhaseTotal,
    RunningTotal,
    attempt_spans,
    by_hour,
    ended_attempt,
)
from elasticityops.pricing.table import Capacity, PriceTable, prices
from elasticityops.store.dialect_insert import dialect_insert
from elasticityops.store.tables import node_seconds, node_seconds_totals


@dataclass(frozen=True)
class Pricing:
    """How this gateway's node-seconds are priced: the capacity of a charge whose node is not
    known (its backend's: a local slot, or a cluster node on demand) and the shared price table.
    A charge that names its node's capacity (Charge.capacity: a spot node) is priced at it."""

    capacity: Capacity = Capacity.local
    table: PriceTable = field(default_factory=prices)


def ended_charges(updates: Iterable[tuple[Invocation, Invocation]]) -> list[Charge]:
    """The charges of the attempts these committed transitions ended."""
    charges = []
    for before, after in updates:
        times = ended_attempt(before, after)
        if times is None:
            continue
        charges.append(charge_of(before, times, times.ended or before.timeline.accepted))
    return charges


def charge_of(inv: Invocation, times: AttemptTimes, now: datetime) -> Charge:
    return Charge(
        source=inv.id,
        attempt=inv.attempt,
        function=inv.function,
        gpu_type=inv.gpu_type,
        spans=attempt_spans(times, now),
        capacity=times.capacity,
        cluster=inv.cluster,
    )


# A phase a later release adds is skipped by this one's reads, not an error, while two releases
# share the database (a rolling update: docs/migrations.md).
_KNOWN = frozenset(phase.value for phase in Phase)


def run_again_charged_s(conn: Connection, source: str, attempt: int) -> float:
    """What one attempt has been charged as run_again so far (node_seconds.run_again_charge
    charges the rest)."""
    query = select(func.coalesce(func.sum(node_seconds.c.seconds), 0.0)).where(
        and_(
            node_seconds.c.source == source,
            node_seconds.c.attempt == attempt,
            node_seconds.c.phase == Phase.run_again.value,
        )
    )
    return float(conn.execute(query).scalar_one())


def add(conn: Connection, charges: Sequence[Charge], pricing: Pricing) -> None:
    """Like `write`, but a row whose key is there already grows by the charge instead of being
    kept as it was: run_again's charges are increments (the caller subtracts what was charged),
    and two in one hour share its row. The totals grow by the same, under the row's cluster."""
    rows = _rows(charges, pricing)
    fresh = _new_only(conn, rows)
    new_ids = {id(row) for row in fresh}
    there = [row for row in rows if id(row) not in new_ids]
    if fresh:
        conn.execute(insert(node_seconds), fresh)
    for row in there:
        key = and_(
            node_seconds.c.source == row["source"],
            node_seconds.c.attempt == row["attempt"],
            node_seconds.c.phase == row["phase"],
            node_seconds.c.hour == row["hour"],
        )
        # The row stays what it was (its cluster, its capacity); the increment is priced as it.
        cluster, capacity = conn.execute(
            select(node_seconds.c.cluster, node_seconds.c.capacity).where(key)
        ).one()
        price = pricing.table.per_hour(row["gpu_type"], Capacity(capacity))
        row.update(
            cluster=cluster, capacity=capacity, usd=None if price is None else row["seconds"] * price / 3600
        )
        grown = func.coalesce(node_seconds.c.usd, 0.0) + row["usd"]
        usd = node_seconds.c.usd if row["usd"] is None else grown
        conn.execute(
            update(node_seconds).where(key).values(seconds=node_seconds.c.seconds + row["seconds"], usd=usd)
        )
    for total_key, (seconds, usd) in _summed(rows).items():
        conn.execute(_add_to_total(conn, total_key, seconds, usd))


def write(conn: Connection, charges: Sequence[Charge], pricing: Pricing) -> None:
    """The ledger rows of the charges, and their totals, in the caller's transaction."""
    ledger = _new_only(conn, _rows(charges, pricing))
    if not ledger:
        return
    conn.execute(insert(node_seconds), ledger)
    for key, (seconds, usd) in _summed(ledger).items():
        conn.execute(_add_to_total(conn, key, seconds, usd))


def _rows(charges: Sequence[Charge], pricing: Pricing) -> list[dict[str, Any]]:
    ledger: list[dict[str, Any]] = []
    for charge in charges:
        capacity = charge.capacity or pricing.capacity
        price = pricing.table.per_hour(charge.gpu_type, capacity)
        for span in charge.spans:
            for hour, seconds in by_hour(span):
                usd = None if price is None else seconds * price / 3600.0
                ledger.append(
                    {
                        "source": charge.source,
                        "attempt": charge.attempt,
                        "phase": span.phase.value,
                        "hour": hour,
                        "function": charge.function,
                        "gpu_type": charge.gpu_type,
                        "capacity": capacity.value,
                        "cluster": charge.cluster,
                        "seconds": seconds,
                        "usd": usd,
                    }
                )
    return ledger


def _new_only(conn: Connection, ledger: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows whose key is not in the ledger yet: a charge seen again (an idle span recorded
    once more after a restart) keeps its first rows, and the totals count it once."""
    sources = sorted({row["source"] for row in ledger})
    there: set[tuple[str, int, str, datetime]] = set()
    for start in range(0, len(sources), 500):  # bound parameters are capped by the drivers
        query = select(
            node_seconds.c.source, node_seconds.c.attempt, node_seconds.c.phase, node_seconds.c.hour
        ).where(node_seconds.c.source.in_(sources[start : start + 500]))
        there.update((r[0], r[1], r[2], r[3]) for r in conn.execute(query))
    fresh = []
    for row in ledger:
        key = (row["source"], row["attempt"], row["phase"], row["hour"])
        if key not in there:
            there.add(key)
            fresh.append(row)
    return fresh


_TotalKey = tuple[str, str, str, str]  # (function, phase, capacity, cluster: "" for none)


def _summed(ledger: list[dict[str, Any]]) -> dict[_TotalKey, tuple[float, float]]:
    sums: dict[_TotalKey, tuple[float, float]] = {}
    for row in ledger:
        key = (row["function"], row["phase"], row["capacity"], row["cluster"] or "")
        seconds, usd = sums.get(key, (0.0, 0.0))
        sums[key] = (seconds + row["seconds"], usd + (row["usd"] or 0.0))
    return sums


def _add_to_total(conn: Connection, key: _TotalKey, seconds: float, usd: float) -> Insert:
    function_, phase, capacity, cluster = key
    statement = dialect_insert(conn, node_seconds_totals).values(
        function=function_, phase=phase, capacity=capacity, cluster=cluster, seconds=seconds, usd=usd
    )
    return statement.on_conflict_do_update(
        index_elements=["function", "phase", "capacity", "cluster"],
        set_={
            "seconds": node_seconds_totals.c.seconds + statement.excluded.seconds,
            "usd": node_seconds_totals.c.usd + statement.excluded.usd,
        },
    )


def of_invocation(conn: Connection, invocation_id: str) -> dict[Phase, PhaseTotal]:
    """Every phase's totals over all of one invocation's attempts (its primary key's prefix)."""
    query = (
        select(node_seconds.c.phase, *_sums())
        .where(node_seconds.c.source == invocation_id)
        .group_by(node_seconds.c.phase)
    )
    return {Phase(row[0]): PhaseTotal(*row[1:]) for row in conn.execute(query) if row[0] in _KNOWN}


def report(conn: Connection, since: datetime, until: datetime, by: Sequence[str]) -> list[CostGroup]:
    """Totals per group (by any of function, hour, capacity and cluster, or none) of the hours in
    [since, until): hours are the ledger's grain, so `since` counts from the start of its hour."""
    unknown = set(by) - set(GROUPINGS)
    if unknown:
        raise ValueError(f"no grouping {sorted(unknown)}; the report groups by {GROUPINGS}")
    keys = [node_seconds.c[name] for name in by]
    hour_of_since = since.replace(minute=0, second=0, microsecond=0)
    query = (
        select(*keys, node_seconds.c.phase, *_sums())
        .where(and_(node_seconds.c.hour >= hour_of_since, node_seconds.c.hour < until))
        .group_by(*keys, node_seconds.c.phase)
        .order_by(*keys)
    )
    groups: dict[tuple[Any, ...], dict[Phase, PhaseTotal]] = {}
    for row in conn.execute(query):
        if row[len(keys)] not in _KNOWN:
            continue
        key = tuple(row[: len(keys)])
        groups.setdefault(key, {})[Phase(row[len(keys)])] = PhaseTotal(*row[len(keys) + 1 :])
    out = []
    for key, phases in groups.items():
        named = dict(zip(by, key, strict=True))
        capacity = named.get("capacity")
        out.append(
            CostGroup(
                function=named.get("function"),
                hour=named.get("hour"),
                phases=phases,
                capacity=None if capacity is None else Capacity(capacity),
                cluster=named.get("cluster"),
            )
        )
    return out


def totals(conn: Connection) -> list[RunningTotal]:
    """Per function, phase, capacity and cluster since the ledger began: the /metrics counters."""
    t = node_seconds_totals.c
    query = select(t.function, t.phase, t.capacity, t.cluster, t.seconds, t.usd).order_by(
        t.function, t.phase, t.capacity, t.cluster
    )
    return [
        RunningTotal(f, Phase(p), Capacity(c), s, u, cluster)
        for f, p, c, cluster, s, u in conn.execute(query)
        if p in _KNOWN
    ]


def _sums() -> list[Any]:
    return [
        func.coalesce(func.sum(node_seconds.c.seconds), 0.0),
        func.coalesce(func.sum(node_seconds.c.usd), 0.0),
        func.coalesce(func.sum(case((node_seconds.c.usd.is_(None), node_seconds.c.seconds), else_=0.0)), 0.0),
    ]
