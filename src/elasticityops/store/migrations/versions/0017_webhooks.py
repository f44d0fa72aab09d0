"""Completion webhooks (issue 41): each function's signing secret (webhook_secrets), the webhook
each invocation was accepted with (invocation_webhooks), and the outbox of events to deliver
(webhook_outbox), written in the transaction of the transition that makes each event. New
tables only: a gateway of the release before goes on working beside them.

Revision ID: 0017
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None

_PENDING = "next_attempt_at IS NOT NULL"


def upgrade() -> None:
    op.create_table(
        "webhook_secrets",
        sa.Column("function", sa.String(64), primary_key=True),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "invocation_webhooks",
        sa.Column("invocation_id", sa.String(40), primary_key=True),
        sa.Column("webhook", sa.Text, nullable=False),
    )
    op.create_table(
        "webhook_outbox",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("webhook_id", sa.String(128), nullable=False),
        sa.Column("subject", sa.String(40), nullable=False),
        sa.Column("function", sa.String(64), nullable=False),
        sa.Column("message_type", sa.String(64), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("headers", sa.Text, nullable=True),
        sa.Column("body", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_webhook_outbox_subject_seq", "webhook_outbox", ["subject", "seq"])
    op.create_index(
        "ix_webhook_outbox_pending",
        "webhook_outbox",
        ["next_attempt_at"],
        sqlite_where=sa.text(_PENDING),
        postgresql_where=sa.text(_PENDING),
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_outbox_pending", table_name="webhook_outbox")
    op.drop_index("ix_webhook_outbox_subject_seq", table_name="webhook_outbox")
    op.drop_table("webhook_outbox")
    op.drop_table("invocation_webhooks")
    op.drop_table("webhook_secrets")
