"""Batches: many invocations accepted in one request (issue 41), and the queue's fair order.

A `batches` table (id, function, created_at, count, idempotency key, unique per function as an
invocation's is) and `invocations.batch_id`, with a partial index on (batch_id, id) that a single
accept, whose batch_id is NULL, adds no entry to. On SQLite the table is rebuilt to keep the
large values last (docs/migrations.md, migration 0015); PostgreSQL adds the column in place.

And a partial index of the queued rows on (priority, function, id): admission now lets the
functions of one priority take turns (domain/admission.py), and the store counts each queued
invocation's turn over it (store/fair_queue.py).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None

_IN_A_BATCH = "batch_id IS NOT NULL"
_QUEUED = "state = 'queued'"
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
    "result_head",
    "result",
    "payload",
)


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("function", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.UniqueConstraint("function", "idempotency_key", name="uq_batch_idempotency"),
    )
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "invocations",
        recreate="always" if sqlite else "auto",
        partial_reordering=[_LARGE_LAST] if sqlite else None,
    ) as batch:
        batch.add_column(sa.Column("batch_id", sa.String(40), nullable=True))
    op.create_index(
        "ix_invocations_batch_id_id",
        "invocations",
        ["batch_id", "id"],
        sqlite_where=sa.text(_IN_A_BATCH),
        postgresql_where=sa.text(_IN_A_BATCH),
    )
    op.create_index(
        "ix_invocations_queued_priority_function_id",
        "invocations",
        ["priority", "function", "id"],
        sqlite_where=sa.text(_QUEUED),
        postgresql_where=sa.text(_QUEUED),
    )


def downgrade() -> None:
    op.drop_index("ix_invocations_queued_priority_function_id", table_name="invocations")
    op.drop_index("ix_invocations_batch_id_id", table_name="invocations")
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("batch_id")
    op.drop_table("batches")
