"""The GPU nodes' records (domain/node_history.py) in SQL: written in the transaction of the
event that changed them (beside the charges they close), read whole when the node watch starts.
A few rows: one per GPU node of the cluster, and of each MultiKueue worker (a table of their
own, under the worker's name)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, delete, select

from elasticityops.domain.node_history import LastJob, NodeHistory, NodeHistoryWrite
from elasticityops.pricing.table import Capacity
from elasticityops.store.dialect_insert import dialect_insert
from elasticityops.store.tables import gpu_node_history, worker_node_history


def write(conn: Connection, writes: Sequence[NodeHistoryWrite]) -> None:
    """Each change in order, in the caller's transaction: a record kept (inserted, or replacing
    the node's), or the node forgotten."""
    for change in writes:
        table, key = _where(change.cluster, change.name)
        if change.history is None:
            conn.execute(delete(table).where(*(table.c[k] == v for k, v in key.items())))
            continue
        row = {**key, **_row(change.history)}
        statement = dialect_insert(conn, table).values(**row)
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=list(key), set_={k: statement.excluded[k] for k in row if k not in key}
            )
        )


def read(conn: Connection, cluster: str = "") -> list[NodeHistory]:
    """The records of one cluster's nodes ("": the gateway's own; else a MultiKueue worker's)."""
    table, _ = _where(cluster)
    query = select(table)
    if cluster:
        query = query.where(table.c.cluster == cluster)
    return [_history(row) for row in conn.execute(query.order_by(table.c.name)).mappings()]


def _where(cluster: str, name: str = "") -> tuple[Table, dict[str, str]]:
    """The table a cluster's records are in (the gateway's own: gpu_node_history; a worker's:
    worker_node_history, under its name), and a record's key there."""
    if not cluster:
        return gpu_node_history, {"name": name}
    return worker_node_history, {"cluster": cluster, "name": name}


def _row(history: NodeHistory) -> dict[str, Any]:
    last = history.last
    return {
        "name": history.name,
        "gpu_type": history.gpu_type,
        "capacity": history.capacity.value,
        "created_at": history.created_at,
        "unused": int(history.unused),
        "last_invocation": None if last is None else last.invocation_id,
        "last_attempt": None if last is None else last.attempt,
        "last_function": None if last is None else last.function,
        "last_gpu_type": None if last is None else last.gpu_type,
        "last_ended_at": None if last is None else last.ended,
    }


def _history(row: Any) -> NodeHistory:
    last = None
    if row["last_invocation"] is not None:
        last = LastJob(
            invocation_id=row["last_invocation"],
            attempt=row["last_attempt"],
            function=row["last_function"],
            gpu_type=row["last_gpu_type"],
            ended=row["last_ended_at"],
        )
    return NodeHistory(
        name=row["name"],
        gpu_type=row["gpu_type"],
        capacity=Capacity(row["capacity"]),
        created_at=row["created_at"],
        unused=bool(row["unused"]),
        last=last,
    )
