"""Several clusters (issue 40, MultiKueue): `invocations.cluster`, the worker cluster that runs the
current attempt, recorded while it runs (MultiKueue deletes the worker's copy when the work
ends, so the gateway's record is what the timeline, cost and console show afterwards). NULL with
one cluster. And `node_seconds.cluster`, the same for each ledger row of an attempt, so the cost
report groups by cluster. On SQLite the invocations table is rebuilt to keep the large values
last (docs/migrations.md, migration 0015); PostgreSQL adds the column in place.

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


def downgrade() -> None:
    with op.batch_alter_table("node_seconds") as batch:
        batch.drop_column("cluster")
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("cluster")
