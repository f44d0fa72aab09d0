"""One reason vocabulary for both backends: a Kubernetes Job's DeadlineExceeded was stored as
`deadline_exceeded`, the local backend's killed process as `timeout`; both are `timeout` now
(domain.invocations.FailureReason), so the stored rows say the same.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute("UPDATE invocations SET failure_reason = 'timeout' WHERE failure_reason = 'deadline_exceeded'")


def downgrade() -> None:
    # Which timeouts were a Job's deadline is not kept: the rows stay `timeout`.
    pass
