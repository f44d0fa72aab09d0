"""Completion webhooks: what a function spec (or one invocation) asks to be told, and the
events a transition makes of it, each a message for the outbox with its stable id and body.

The outbox (store/webhook_outbox.py) is written in the transaction of the transition, so an
event exists exactly when its state change does; the leader delivers it (webhooks/)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

from elasticityops.domain.invocations import Invocation
from elasticityops.domain.webhook_spec import WebhookEvent, WebhookFormat, WebhookSpec

# CloudEvents' `type` is reverse-DNS by convention; its `source` a URI reference of the producer.
CLOUDEVENTS_TYPE_PREFIX = "dev.elasticityops."


def webhook_id(invocation_id: str, event: WebhookEvent, attempt: int) -> str:
    """The message's id, the same on every delivery attempt (receivers dedupe on it): one per
    attempt's start, one for the end."""
    if event is WebhookEvent.started:
        return f"{invocation_id}.started.{attempt}"
    return f"{invocation_id}.{event.value}"


def events_of(before: Invocation, after: Invocation) -> list[WebhookEvent]:
    """The events a change of `before` into `after` makes, in order. A start is the timeline's
    `started` being set (an invocation so short that it went from pending to its end starts
    and completes at once); a requeued attempt starts again."""
    made: list[WebhookEvent] = []
    started_again = after.attempt != before.attempt or before.timeline.started is None
    if after.timeline.started is not None and started_again:
        made.append(WebhookEvent.started)
    if after.state.terminal and not before.state.terminal:
        made.append(WebhookEvent.completed)
    return made


@dataclass(frozen=True)
class OutboxMessage:
    """One event to deliver, as the transition's transaction writes it."""

    webhook_id: str
    subject: str  # the invocation's id: messages of one subject are delivered in order
    function: str  # whose secret signs it
    message_type: str
    url: str
    body: bytes
    created_at: datetime
    headers: Mapping[str, str] = field(default_factory=dict)  # sent with it besides the signature's


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def event_data(event: WebhookEvent, inv: Invocation, include_result: bool) -> dict[str, object]:
    """What a message says of its invocation. A start says how it was when it started, also
    when its start and end were seen at once (a job so short that it went from pending to its
    end); the result is the stored strict JSON, embedded as it is."""
    tl = inv.timeline
    data: dict[str, object] = {
        "id": inv.id,
        "function": inv.function,
        "state": inv.state.value,
        "attempt": inv.attempt,
        "exit_code": inv.exit_code,
        "failure_reason": None if inv.failure_reason is None else inv.failure_reason.value,
        "message": inv.message,
        "accepted_at": _iso(tl.accepted),
        "started_at": _iso(tl.started),
        "finished_at": _iso(tl.finished),
    }
    if event is WebhookEvent.started:
        data.update(state="running", exit_code=None, failure_reason=None, message="", finished_at=None)
    if include_result and event is WebhookEvent.completed:
        data["result"] = None if inv.result is None else orjson.Fragment(inv.result)
    return data


def event_body(event: WebhookEvent, inv: Invocation, at: datetime, include_result: bool) -> bytes:
    """The JSON body, Standard Webhooks' shape: {type, timestamp, data}."""
    data = event_data(event, inv, include_result)
    return orjson.dumps({"type": event.message_type, "timestamp": _iso(at), "data": data})


def cloudevent(
    event: WebhookEvent, inv: Invocation, at: datetime, include_result: bool, webhook_id: str
) -> tuple[dict[str, str], bytes]:
    """CloudEvents 1.0's HTTP binding in binary mode: the attributes as ce-* headers (its id the
    webhook-id), the data as the body."""
    headers = {
        "ce-specversion": "1.0",
        "ce-id": webhook_id,
        "ce-source": f"/v1/functions/{inv.function}",
        "ce-type": CLOUDEVENTS_TYPE_PREFIX + event.message_type,
        "ce-subject": inv.id,
        "ce-time": _iso(at) or "",
        "content-type": "application/json",
    }
    return headers, orjson.dumps(event_data(event, inv, include_result))


def messages_of(before: Invocation, after: Invocation, hook: WebhookSpec | None) -> Sequence[OutboxMessage]:
    """The outbox messages of one change, for the webhook the invocation has (None: none), each
    stamped with the time of its milestone (the start, the end)."""
    if hook is None:
        return ()
    out = []
    for event in events_of(before, after):
        if not hook.wants(event):
            continue
        milestone = after.timeline.started if event is WebhookEvent.started else after.timeline.finished
        when = milestone or after.timeline.accepted
        message_id = webhook_id(after.id, event, after.attempt)
        headers: dict[str, str] = {}
        if hook.format is WebhookFormat.cloudevents:
            headers, body = cloudevent(event, after, when, hook.include_result, message_id)
        else:
            body = event_body(event, after, when, hook.include_result)
        out.append(
            OutboxMessage(
                webhook_id=message_id,
                subject=after.id,
                function=after.function,
                message_type=event.message_type,
                url=hook.url,
                body=body,
                created_at=when,
                headers=headers,
            )
        )
    return out


def batch_webhook_id(batch_id: str) -> str:
    return f"{batch_id}.completed"


def batch_message(
    batch_id: str,
    function: str,
    counts: Mapping[str, int],
    at: datetime,
    hook: WebhookSpec | None,
) -> OutboxMessage | None:
    """`batch.completed`, made by the change that ended the last invocation of a batch, for the
    webhook its invocations have (they share one: the request's). Its subject is the batch, so
    it never waits behind, nor holds up, an invocation's own messages."""
    if hook is None or not hook.wants(WebhookEvent.batch_completed):
        return None
    event = WebhookEvent.batch_completed
    message_id = batch_webhook_id(batch_id)
    data: dict[str, object] = {
        "id": batch_id,
        "function": function,
        "count": sum(counts.values()),
        "counts": dict(sorted(counts.items())),
        "finished_at": _iso(at),
    }
    headers: dict[str, str] = {}
    if hook.format is WebhookFormat.cloudevents:
        headers = {
            "ce-specversion": "1.0",
            "ce-id": message_id,
            "ce-source": f"/v1/functions/{function}",
            "ce-type": CLOUDEVENTS_TYPE_PREFIX + event.message_type,
            "ce-subject": batch_id,
            "ce-time": _iso(at) or "",
            "content-type": "application/json",
        }
        body = orjson.dumps(data)
    else:
        body = orjson.dumps({"type": event.message_type, "timestamp": _iso(at), "data": data})
    return OutboxMessage(
        webhook_id=message_id,
        subject=batch_id,
        function=function,
        message_type=event.message_type,
        url=hook.url,
        body=body,
        created_at=at,
        headers=headers,
    )
