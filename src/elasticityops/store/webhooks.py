"""Completion webhooks in SQL: each function's signing secret, and the outbox as the deliverer
reads and updates it (the transitions write it: webhook_outbox.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, and_, exists, func, insert, select, update

from elasticityops.domain.webhook_delivery import Delivery, DeliveryState
from elasticityops.store.database import Database
from elasticityops.store.tables import webhook_outbox, webhook_secrets
from elasticityops.store.webhook_outbox import delivery_from_row


class SqlWebhooks(Database):
    """The WebhookStore of the port (domain/ports/store.py)."""

    async def issue_webhook_secret(
        self, function: str, url: str | None, candidate: str, at: datetime
    ) -> str | None:
        def run(conn: Connection) -> str | None:
            query = select(webhook_secrets).where(webhook_secrets.c.function == function)
            row = conn.execute(query).mappings().first()
            if url is None:
                if row is not None and row["url"]:
                    conn.execute(
                        update(webhook_secrets).where(webhook_secrets.c.function == function).values(url="")
                    )
                return None
            if row is not None and row["url"] == url:
                return None
            values = {"secret": candidate, "url": url, "created_at": at}
            if row is None:
                conn.execute(insert(webhook_secrets).values(function=function, **values))
            else:
                conn.execute(
                    update(webhook_secrets).where(webhook_secrets.c.function == function).values(**values)
                )
            return candidate

        issued: str | None = await self._write(run)
        return issued

    async def rotate_webhook_secret(self, function: str, candidate: str, at: datetime) -> None:
        def run(conn: Connection) -> None:
            changed = conn.execute(
                update(webhook_secrets)
                .where(webhook_secrets.c.function == function)
                .values(secret=candidate, created_at=at)
            ).rowcount
            if not changed:
                conn.execute(
                    insert(webhook_secrets).values(function=function, secret=candidate, url="", created_at=at)
                )

        await self._write(run)

    async def webhook_secret(self, function: str) -> str | None:
        def run(conn: Connection) -> str | None:
            query = select(webhook_secrets.c.secret).where(webhook_secrets.c.function == function)
            secret: str | None = conn.execute(query).scalar()
            return secret

        return await self._read(run)

    async def due_webhooks(self, now: datetime, limit: int, busy: Sequence[int]) -> list[Delivery]:
        def run(conn: Connection) -> list[Delivery]:
            o = webhook_outbox.alias("o")
            earlier = webhook_outbox.alias("earlier")
            before_it = exists().where(
                and_(
                    earlier.c.subject == o.c.subject,
                    earlier.c.seq < o.c.seq,
                    earlier.c.next_attempt_at.is_not(None),
                )
            )
            query = (
                select(o)
                .where(o.c.next_attempt_at.is_not(None), o.c.next_attempt_at <= now, ~before_it)
                .order_by(o.c.next_attempt_at, o.c.seq)
                .limit(limit)
            )
            if busy:
                query = query.where(o.c.seq.not_in(list(busy)))
            return [delivery_from_row(row) for row in conn.execute(query).mappings()]

        return await self._read(run)

    async def record_webhook_attempt(self, seq: int, state: DeliveryState) -> None:
        def run(conn: Connection) -> None:
            conn.execute(
                update(webhook_outbox)
                .where(webhook_outbox.c.seq == seq)
                .values(
                    attempts=state.attempts,
                    next_attempt_at=state.next_attempt_at,
                    last_status=state.last_status,
                    last_error=state.last_error,
                    delivered_at=state.delivered_at,
                    failed_at=state.failed_at,
                )
            )

        await self._write(run)

    async def webhook_deliveries(self, invocation_id: str) -> list[Delivery]:
        def run(conn: Connection) -> list[Delivery]:
            query = (
                select(webhook_outbox)
                .where(webhook_outbox.c.subject == invocation_id)
                .order_by(webhook_outbox.c.seq)
            )
            return [delivery_from_row(row) for row in conn.execute(query).mappings()]

        return await self._read(run)

    async def webhooks_pending(self) -> int:
        def run(conn: Connection) -> int:
            query = (
                select(func.count())
                .select_from(webhook_outbox)
                .where(webhook_outbox.c.next_attempt_at.is_not(None))
            )
            return int(conn.execute(query).scalar() or 0)

        return await self._read(run)
