"""Several clusters (issue 40, MultiKueue): `kept_logs`, the last bytes of each attempt's log
that ran in a MultiKueue worker, kept by the gateway before it lets the pod go (MultiKueue
deletes the worker's copy of the Job, and its pod with it, as soon as the work ends). A new
table: a release before this one, still running during a rolling update, never reads it.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "kept_logs",
        sa.Column("invocation_id", sa.String(40), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("cluster", sa.String(256), primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("dropped", sa.Integer, nullable=False),
        sa.Column("kept_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("kept_logs")
