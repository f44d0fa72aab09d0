"""invocations.gpu_type: the GPU type an invocation was admitted on (a function may list
several, `gpu.type: [nvidia-tesla-t4, nvidia-l4]`, and spill over to the next). Nullable: queued
invocations have none yet, and rows from before count under their spec's first type.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.add_column(sa.Column("gpu_type", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("gpu_type")
