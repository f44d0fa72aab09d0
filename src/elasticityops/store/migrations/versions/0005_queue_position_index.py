"""An index on invocations (state, priority, id): a queued invocation's queue position counts
the queued invocations of a higher priority and those of its own accepted before it
(`SqlStore.queued_ahead`); with it that count reads a few index ranges instead of every queued
row.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.create_index("ix_invocations_state_priority_id", ["state", "priority", "id"])


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_index("ix_invocations_state_priority_id")
