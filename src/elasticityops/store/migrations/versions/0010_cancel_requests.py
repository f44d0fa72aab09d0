"""invocations.cancel_requested_at: a cancel asked of a replica whose dispatcher is not running,
for a pending or running invocation (only the dispatcher's backend can stop its job); the
running dispatcher acts on it and the end clears it. Indexed: the dispatcher looks for requests
every cycle, and the column is NULL in nearly every row.

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
        batch.create_index("ix_invocations_cancel_requested_at", ["cancel_requested_at"])


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_index("ix_invocations_cancel_requested_at")
        batch.drop_column("cancel_requested_at")
