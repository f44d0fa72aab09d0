"""A list reads no result whole (issue 37).

invocations.result_head: the first 800 bytes of the result (domain/results.py PREVIEW_BYTES, what
a list's preview is made from), written with the result, so a list page reads each row's head and
the result's length, never the result. Rows from before get their head here; a row a gateway of
an earlier release writes meanwhile has none, and a list cuts its head from the result then.

On SQLite the table is also rebuilt with the two large values, result and payload, last in each
row. SQLite keeps a row's columns in one record, a large value's tail on a chain of overflow
pages, and reaching a column after it walks that chain: every column added since 0001 came after
them, so reading a row's attempt or annotations walked its 1 MiB result and payload page by page
(60 such rows made a list page take 70 ms after the result itself was no longer read). A column
added later must go before them again (docs/migrations.md; tests/store/test_migrations.py checks
the order). PostgreSQL keeps large values out of line (TOAST) and is left as it is.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None

_HEAD_BYTES = 800  # PREVIEW_BYTES when this was written; the live code may change its own
_LARGE_LAST = (
    "id",
    "function",
    "spec_version",
    "priority",
    "state",
    "idempotency_key",
    "accepted_at",
    "dispatched_at",
    "capacity_ready_at",
    "started_at",
    "finished_at",
    "exit_code",
    "failure_reason",
    "message",
    "node",
    "notes",
    "annotations",
    "gpu_type",
    "attempt",
    "preempted_at",
    "preempting_by",
    "cancel_requested_at",
    "node_since_at",
    "warm_pick",
    "node_capacity",
    "result_head",
    "result",
    "payload",
)
_invocations = sa.table(
    "invocations", sa.column("result", sa.LargeBinary), sa.column("result_head", sa.LargeBinary)
)


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "invocations",
        recreate="always" if sqlite else "auto",
        partial_reordering=[_LARGE_LAST] if sqlite else None,
    ) as batch:
        batch.add_column(sa.Column("result_head", sa.LargeBinary, nullable=True))
    op.execute(
        _invocations.update()
        .where(_invocations.c.result.is_not(None))
        .values(result_head=sa.func.substr(_invocations.c.result, 1, _HEAD_BYTES, type_=sa.LargeBinary))
    )


def downgrade() -> None:
    with op.batch_alter_table("invocations") as batch:
        batch.drop_column("result_head")
