"""The cost of every invocation (issue 17): invocations.node_since_at and warm_pick (where an
attempt's node time starts); node_seconds, the node time of every attempt by phase and hour,
and node_seconds_totals, its running totals per function and phase.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.add_column(sa.Column("node_since_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("warm_pick", sa.Integer, nullable=False, server_default="0"))
    op.create_table(
        "node_seconds",
        sa.Column("source", sa.String(300), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("phase", sa.String(24), primary_key=True),
        sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("function", sa.String(64), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=True),
        sa.Column("capacity", sa.String(16), nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("usd", sa.Float, nullable=True),
    )
    op.create_index("ix_node_seconds_hour_function", "node_seconds", ["hour", "function"])
    op.create_table(
        "node_seconds_totals",
        sa.Column("function", sa.String(64), primary_key=True),
        sa.Column("phase", sa.String(24), primary_key=True),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("usd", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("node_seconds_totals")
    op.drop_index("ix_node_seconds_hour_function", "node_seconds")
    op.drop_table("node_seconds")
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("warm_pick")
        batch.drop_column("node_since_at")
