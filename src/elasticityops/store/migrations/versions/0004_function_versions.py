"""Every version of a function's spec is kept: an invocation runs the spec version it was
accepted with, not whatever was deployed since. A new table `function_versions` (name, version,
spec), filled from each function's current spec (earlier versions were never kept, so only the
current one can be), and a tombstone column `functions.deleted_at`, so that a name deployed
again after `fn rm` goes on counting its versions instead of restarting at 1.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "function_versions",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("functions") as batch:
        batch.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "INSERT INTO function_versions (name, version, spec, created_at) "
        "SELECT name, version, spec, updated_at FROM functions"
    )


def downgrade() -> None:
    # A tombstoned name is gone in the older schema, as a deleted one was.
    op.execute("DELETE FROM functions WHERE deleted_at IS NOT NULL")
    with op.batch_alter_table("functions") as batch:
        batch.drop_column("deleted_at")
    op.drop_table("function_versions")
