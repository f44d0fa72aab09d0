"""Baseline: the schema as the releases before migrations made it (`metadata.create_all`).

Written out here rather than imported from tables.py, which goes on changing: this file must
create the same tables for as long as there are databases to build from scratch.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "functions",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "invocations",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("function", sa.String(64), nullable=False),
        sa.Column("spec_version", sa.Integer, nullable=False),
        sa.Column("priority", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("capacity_ready_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("failure_reason", sa.String(32), nullable=True),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("node", sa.String(256), nullable=True),
        sa.Column("notes", sa.Text, nullable=False),
        sa.Column("result", sa.LargeBinary, nullable=True),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        sa.UniqueConstraint("function", "idempotency_key", name="uq_invocation_idempotency"),
    )
    op.create_index("ix_invocations_state_id", "invocations", ["state", "id"])
    op.create_index("ix_invocations_function_id", "invocations", ["function", "id"])
    op.create_table(
        "api_tokens",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
    op.drop_index("ix_invocations_function_id", table_name="invocations")
    op.drop_index("ix_invocations_state_id", table_name="invocations")
    op.drop_table("invocations")
    op.drop_table("functions")
