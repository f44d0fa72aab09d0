"""What the replicas of a gateway share through the database instead of each keeping its own:
`gateway_secrets` (the key callback tokens are derived from, until now a file in each data dir,
so two replicas derived different tokens) and `gateway_generations` (a counter per kind of
cached data, bumped in the transaction of every write of it: `functions` tells a replica's
function cache that another replica deployed or deleted one).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "gateway_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    generations = op.create_table(
        "gateway_generations",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
    )
    # Seeded, so a bump is one UPDATE and two replicas never race to insert the row.
    op.bulk_insert(generations, [{"name": "functions", "value": 0}])


def downgrade() -> None:
    op.drop_table("gateway_generations")
    op.drop_table("gateway_secrets")
