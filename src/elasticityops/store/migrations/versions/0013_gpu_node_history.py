"""Node history kept across a gateway restart: gpu_node_history, what the GPU node watch knows
of each node's past that the node-seconds attribution needs (its creation, whether a job used
it, its last job and that job's end), so a restarted gateway or a new leader charges a node's
idle time after a job and its unused warm time from where the one before stopped.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "gpu_node_history",
        sa.Column("name", sa.String(253), primary_key=True),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("capacity", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("unused", sa.Integer, nullable=False),
        sa.Column("last_invocation", sa.String(40), nullable=True),
        sa.Column("last_attempt", sa.Integer, nullable=True),
        sa.Column("last_function", sa.String(64), nullable=True),
        sa.Column("last_gpu_type", sa.String(64), nullable=True),
        sa.Column("last_ended_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("gpu_node_history")
