"""The webhook outbox inside the writer's transactions: the webhook an invocation is accepted
with, stored beside its row, and the messages its transitions make, stored in the transaction
of the transition (so an event is in the outbox exactly when its state change is committed)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, func, insert, select

from elasticityops.domain.invocations import Invocation, State
from elasticityops.domain.ports import NewInvocation
from elasticityops.domain.webhook_delivery import Delivery, DeliveryState
from elasticityops.domain.webhook_spec import WebhookEvent, WebhookSpec
from elasticityops.domain.webhooks import (
    OutboxMessage,
    batch_message,
    batch_webhook_id,
    events_of,
    messages_of,
)
from elasticityops.store.selects import id_batches
from elasticityops.store.tables import invocation_webhooks, invocations, webhook_outbox


def write_subscriptions(conn: Connection, news: Sequence[NewInvocation]) -> None:
    """The webhooks of newly inserted invocations (those that have one)."""
    rows = [
        {"invocation_id": new.id, "webhook": new.webhook.model_dump_json()}
        for new in news
        if new.webhook is not None
    ]
    if rows:
        conn.execute(insert(invocation_webhooks), rows)


def write_events(conn: Connection, updates: Sequence[tuple[Invocation, Invocation]]) -> None:
    """The outbox messages of these committed-together changes. Most changes make no event
    (an admission, a note); only those that do read their invocations' webhooks."""
    eventful = [(before, after) for before, after in updates if events_of(before, after)]
    if not eventful:
        return
    hooks = _webhooks_of(conn, [after.id for _, after in eventful])
    if not hooks:
        return
    messages = [m for before, after in eventful for m in messages_of(before, after, hooks.get(after.id))]
    messages += _batches_completed(conn, eventful, hooks)
    if messages:
        conn.execute(insert(webhook_outbox), [_message_row(m) for m in messages])


def _batches_completed(
    conn: Connection, eventful: Sequence[tuple[Invocation, Invocation]], hooks: Mapping[str, WebhookSpec]
) -> list[OutboxMessage]:
    """`batch.completed` for each batch whose last live invocation this change ended. The
    writer runs one transaction at a time and this one has written its updates already, so the
    count is of the batch as committed with them; the message's stable id keeps it to one."""
    ending: dict[str, Invocation] = {}
    for before, after in eventful:
        hook = hooks.get(after.id)
        if (
            after.batch_id is not None
            and after.state.terminal
            and not before.state.terminal
            and hook is not None
            and hook.wants(WebhookEvent.batch_completed)
        ):
            ending[after.batch_id] = after
    made: list[OutboxMessage] = []
    c = invocations.c
    for batch_id, last in ending.items():
        counts = {
            str(state): n
            for state, n in conn.execute(
                select(c.state, func.count()).where(c.batch_id == batch_id).group_by(c.state)
            )
        }
        if any(not State(state).terminal for state in counts):
            continue
        already = conn.execute(  # the batch is the message's subject: indexed
            select(webhook_outbox.c.seq).where(
                webhook_outbox.c.subject == batch_id,
                webhook_outbox.c.webhook_id == batch_webhook_id(batch_id),
            )
        ).first()
        if already is not None:
            continue
        at = last.timeline.finished or last.timeline.accepted
        message = batch_message(batch_id, last.function, counts, at, hooks[last.id])
        if message is not None:
            made.append(message)
    return made


def _webhooks_of(conn: Connection, ids: Sequence[str]) -> dict[str, WebhookSpec]:
    found: dict[str, WebhookSpec] = {}
    for batch in id_batches(list(dict.fromkeys(ids))):
        query = select(invocation_webhooks).where(invocation_webhooks.c.invocation_id.in_(batch))
        for row in conn.execute(query).mappings():
            found[row["invocation_id"]] = WebhookSpec.model_validate_json(row["webhook"])
    return found


def _message_row(message: OutboxMessage) -> dict[str, Any]:
    return {
        "webhook_id": message.webhook_id,
        "subject": message.subject,
        "function": message.function,
        "message_type": message.message_type,
        "url": message.url,
        "created_at": message.created_at,
        "attempts": 0,
        "next_attempt_at": message.created_at,  # due at once
        "headers": json.dumps(dict(message.headers)) if message.headers else None,
        "body": message.body,
    }


def delivery_from_row(row: Mapping[Any, Any]) -> Delivery:
    return Delivery(
        seq=row["seq"],
        message=OutboxMessage(
            webhook_id=row["webhook_id"],
            subject=row["subject"],
            function=row["function"],
            message_type=row["message_type"],
            url=row["url"],
            body=bytes(row["body"]),
            created_at=row["created_at"],
            headers=json.loads(row["headers"]) if row["headers"] else {},
        ),
        state=DeliveryState(
            attempts=row["attempts"],
            created_at=row["created_at"],
            next_attempt_at=row["next_attempt_at"],
            last_status=row["last_status"],
            last_error=row["last_error"],
            delivered_at=row["delivered_at"],
            failed_at=row["failed_at"],
        ),
    )
