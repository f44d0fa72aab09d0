"""The running totals by capacity: node_seconds_totals keyed by (function, phase, capacity), so
that /metrics can say how much of the node time and its cost was spot.

The totals were always the ledger's sums (kept in the same transactions, and the ledger is never
pruned), and the ledger keeps every row's capacity (the backend's, capacity_of_backend, where
the node named none: local slots `local`, cluster nodes `on-demand`). So they are rebuilt from
it, each row counted at the capacity it was priced at, rather than guessed from the backend the
gateway runs now; the downgrade sums them back per (function, phase) the same way.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

# The ledger as 0011 made it (and 0012, 0013 left it): what the totals are rebuilt from.
_ledger = sa.table(
    "node_seconds",
    sa.column("function", sa.String),
    sa.column("phase", sa.String),
    sa.column("capacity", sa.String),
    sa.column("seconds", sa.Float),
    sa.column("usd", sa.Float),
)


def _totals_table(by_capacity: bool) -> None:
    op.create_table(
        "node_seconds_totals",
        sa.Column("function", sa.String(64), primary_key=True),
        sa.Column("phase", sa.String(24), primary_key=True),
        *([sa.Column("capacity", sa.String(16), primary_key=True)] if by_capacity else []),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("usd", sa.Float, nullable=False),
    )


def _rebuild(by_capacity: bool) -> None:
    keys = [_ledger.c.function, _ledger.c.phase, *([_ledger.c.capacity] if by_capacity else [])]
    sums = sa.select(
        *keys,
        sa.func.sum(_ledger.c.seconds),
        # The priced part only, as the totals have always kept it.
        sa.func.sum(sa.func.coalesce(_ledger.c.usd, 0.0)),
    ).group_by(*keys)
    columns = [key.name for key in keys] + ["seconds", "usd"]
    target = sa.table("node_seconds_totals", *(sa.column(name) for name in columns))
    op.execute(target.insert().from_select(columns, sums))


def upgrade() -> None:
    op.drop_table("node_seconds_totals")
    _totals_table(by_capacity=True)
    _rebuild(by_capacity=True)


def downgrade() -> None:
    op.drop_table("node_seconds_totals")
    _totals_table(by_capacity=False)
    _rebuild(by_capacity=False)
