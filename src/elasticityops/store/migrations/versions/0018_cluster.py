"""Several clusters (issue 40, MultiKueue): `invocations.cluster`, the worker cluster that runs the
current attempt, recorded while it runs (MultiKueue deletes the worker's copy when the work
ends, so the gateway's record is what the timeline, cost and console show afterwards). NULL with
one cluster. And `node_seconds.cluster`, the same for each ledger row of an attempt, so the cost
report groups by cluster; the running totals (/metrics) are keyed by it too, rebuilt from the
ledger as 0014 rebuilt them ("" where a row names no cluster). On SQLite the invocations table
is rebuilt to keep the large values last (docs/migrations.md, migration 0015); PostgreSQL adds
the column in place.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None

# The ledger as 0011-0017 made it, with this migration's cluster: what the totals are rebuilt from.
_ledger = sa.table(
    "node_seconds",
    sa.column("function", sa.String),
    sa.column("phase", sa.String),
    sa.column("capacity", sa.String),
    sa.column("cluster", sa.String),
    sa.column("seconds", sa.Float),
    sa.column("usd", sa.Float),
)


def _totals_table(by_cluster: bool) -> None:
    op.create_table(
        "node_seconds_totals",
        sa.Column("function", sa.String(64), primary_key=True),
        sa.Column("phase", sa.String(24), primary_key=True),
        sa.Column("capacity", sa.String(16), primary_key=True),
        *([sa.Column("cluster", sa.String(256), primary_key=True)] if by_cluster else []),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("usd", sa.Float, nullable=False),
    )


def _rebuild(by_cluster: bool) -> None:
    keys: list[sa.ColumnElement[str]] = [_ledger.c.function, _ledger.c.phase, _ledger.c.capacity]
    if by_cluster:
        keys.append(sa.func.coalesce(_ledger.c.cluster, "").label("cluster"))
    sums = sa.select(
        *keys,
        sa.func.sum(_ledger.c.seconds),
        sa.func.sum(sa.func.coalesce(_ledger.c.usd, 0.0)),  # the priced part only
    ).group_by(*keys)
    columns = ["function", "phase", "capacity", *(["cluster"] if by_cluster else []), "seconds", "usd"]
    target = sa.table("node_seconds_totals", *(sa.column(name) for name in columns))
    op.execute(target.insert().from_select(columns, sums))


_LARGE_LAST = (
    "id",
    "function",
    "spec_version",
    "priority",
    "state",
    "idempotency_key",
    "accepted_at",
    "dispatched_at",
    "capacity_ready_at",
    "started_at",
    "finished_at",
    "exit_code",
    "failure_reason",
    "message",
    "node",
    "notes",
    "annotations",
    "gpu_type",
    "attempt",
    "preempted_at",
    "preempting_by",
    "cancel_requested_at",
    "node_since_at",
    "warm_pick",
    "node_capacity",
    "batch_id",
    "cluster",
    "result_head",
    "result",
    "payload",
)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "invocations",
        recreate="always" if sqlite else "auto",
        partial_reordering=[_LARGE_LAST] if sqlite else None,
    ) as batch:
        batch.add_column(sa.Column("cluster", sa.String(256), nullable=True))
    op.add_column("node_seconds", sa.Column("cluster", sa.String(256), nullable=True))
    op.drop_table("node_seconds_totals")
    _totals_table(by_cluster=True)
    _rebuild(by_cluster=True)


def downgrade() -> None:
    op.drop_table("node_seconds_totals")
    _totals_table(by_cluster=False)
    _rebuild(by_cluster=False)
    with op.batch_alter_table("node_seconds") as batch:
        batch.drop_column("cluster")
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("cluster")
