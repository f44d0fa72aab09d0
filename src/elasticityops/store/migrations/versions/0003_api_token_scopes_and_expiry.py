"""API tokens get a scope (`admin` or `invoke`) and an optional expiry. A token made before
scopes existed could do everything, so it keeps working as `admin`: the column's server default
fills it, and an older gateway still running against this database (a rolling update) inserts
`admin` tokens as it always meant to. A token's id is the head of its hash (domain/tokens.py),
so no id column is needed and old tokens have one too.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("scope", sa.String(16), nullable=False, server_default="admin"))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # An older gateway would treat every token as admin and none as expired: drop the tokens
    # that were narrower than that rather than widen them.
    op.execute("DELETE FROM api_tokens WHERE scope <> 'admin' OR expires_at IS NOT NULL")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("scope")
