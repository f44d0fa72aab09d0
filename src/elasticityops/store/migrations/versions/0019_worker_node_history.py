"""Several clusters (issue 40, MultiKueue): `worker_node_history`, the GPU node records of each
MultiKueue worker the gateway watches (as gpu_node_history keeps the gateway's own cluster's),
keyed by the worker's name and the node's, so that a restart or a new leader goes on charging a
worker's node time, and two clusters' nodes of one name stay apart. A new table, not a column
of gpu_node_history: a release before this one, still running during a rolling update, keeps
writing that table as it did.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "worker_node_history",
        sa.Column("cluster", sa.String(256), primary_key=True),
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
    op.drop_table("worker_node_history")
