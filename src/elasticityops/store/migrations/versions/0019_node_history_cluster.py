"""Several clusters (issue 40, MultiKueue): `gpu_node_history.cluster`, the worker cluster whose
GPU node a record is ("" for the gateway's own cluster), part of the key, so that the gateway
keeps the node records of every worker it watches across a restart, and two clusters' nodes of
one name stay apart. The table is made again with the new key (a few rows: one per GPU node),
its rows kept as the gateway's own cluster's; down, only those are kept.

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

_COLUMNS = (
    "name",
    "gpu_type",
    "capacity",
    "created_at",
    "unused",
    "last_invocation",
    "last_attempt",
    "last_function",
    "last_gpu_type",
    "last_ended_at",
)


def _table(name: str, by_cluster: bool) -> None:
    op.create_table(
        name,
        *([sa.Column("cluster", sa.String(256), primary_key=True)] if by_cluster else []),
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


def _move(by_cluster: bool) -> None:
    """gpu_node_history made again (with or without the cluster), its rows of the gateway's own
    cluster copied over."""
    _table("gpu_node_history_new", by_cluster)
    old = sa.table(
        "gpu_node_history", *(sa.column(c) for c in (*_COLUMNS, *([] if by_cluster else ["cluster"])))
    )
    rows = sa.select(*(old.c[c] for c in _COLUMNS))
    if by_cluster:
        rows = sa.select(sa.literal("").label("cluster"), *(old.c[c] for c in _COLUMNS))
        columns = ["cluster", *_COLUMNS]
    else:
        rows = rows.where(old.c.cluster == "")
        columns = list(_COLUMNS)
    new = sa.table("gpu_node_history_new", *(sa.column(c) for c in columns))
    op.execute(new.insert().from_select(columns, rows))
    op.drop_table("gpu_node_history")
    op.rename_table("gpu_node_history_new", "gpu_node_history")


def upgrade() -> None:
    _move(by_cluster=True)


def downgrade() -> None:
    _move(by_cluster=False)
