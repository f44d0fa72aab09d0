"""Invocations get their own pod annotations (`eops.dev/` keys: hints for the dev cluster,
such as how long a simulated pod runs), a JSON object in a nullable column: rows from before
have none, and an older gateway still running against this database (a rolling update) inserts
rows without it, which read back as having none.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.add_column(sa.Column("annotations", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("annotations")
