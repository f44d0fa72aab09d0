"""Spot nodes told apart: invocations.node_capacity, what the current attempt's node is priced
as (spot or on-demand, read from its GKE labels), so the attempt's node-seconds are priced at it
when it ends. NULL in the rows before: priced as their backend's, as they were.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.add_column(sa.Column("node_capacity", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("node_capacity")
