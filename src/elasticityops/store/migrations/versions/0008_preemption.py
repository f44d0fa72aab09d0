"""Preemption: `attempt` (0 for an invocation's first run, one more each time preemption puts
it back in the queue; each attempt gets a job of its own), `preempted_at` (the latest
preemption, for its timeline) and `preempting_by` (the invocation it makes way for while the
preemption is under way: the durable intent a restart finishes).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.add_column(sa.Column("attempt", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("preempted_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("preempting_by", sa.String(40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("preempting_by")
        batch.drop_column("preempted_at")
        batch.drop_column("attempt")
