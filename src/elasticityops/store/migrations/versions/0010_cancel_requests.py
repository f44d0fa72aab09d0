"""invocations.cancel_requested_at: a cancel asked of a replica whose dispatcher is not running,
for a pending or running invocation (only the dispatcher's backend can stop its job); the
running dispatcher acts on it and the end clears it. A partial index (rows with a request
only): the dispatcher looks for requests every tick, and the column is NULL in nearly every
row, so an insert adds nothing to it.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True))
        requested = sa.text("cancel_requested_at IS NOT NULL")
        batch.create_index(
            "ix_invocations_cancel_requested_at",
            ["cancel_requested_at"],
            sqlite_where=requested,
            postgresql_where=requested,
        )


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_index("ix_invocations_cancel_requested_at")
        batch.drop_column("cancel_requested_at")
