"""The webhook outbox in the store, on SQLite and PostgreSQL: events written with the
transitions that make them (and only with them: a lost compare-and-set writes none), each
invocation's next message held back until the one before is done, the secret issued once per
URL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from elasticityops.domain.invocations import State, new_invocation_id
from elasticityops.domain.ports import Change, NewInvocation
from elasticityops.domain.webhook_delivery import AttemptResult, RetryPolicy, after_attempt
from elasticityops.domain.webhook_spec import WebhookEvent, WebhookSpec
from elasticityops.store.sql import SqlStore

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
HOOK = WebhookSpec(url="https://example.com/h", events=[WebhookEvent.started, WebhookEvent.completed])
POLICY = RetryPolicy(1.0, 10.0, 3600.0)


async def _accepted(store: SqlStore, hook: WebhookSpec | None) -> str:
    new = NewInvocation(
        id=new_invocation_id(at=T0),
        function="f",
        spec_version=1,
        priority_rank=1,
        accepted_at=T0,
        payload=b"null",
        webhook=hook,
    )
    inv, _ = await store.create_invocation(new)
    return inv.id


async def _run_to_end(store: SqlStore, invocation_id: str) -> None:
    for seconds, state in enumerate((State.pending, State.running, State.succeeded), start=1):
        assert await store.apply(Change(id=invocation_id, to=state, at=T0 + timedelta(seconds=seconds)))


def test_events_are_written_with_their_transitions_and_delivered_in_order(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def scenario() -> None:
        hooked = await _accepted(store, HOOK)
        silent = await _accepted(store, None)
        await _run_to_end(store, hooked)
        await _run_to_end(store, silent)
        # A transition that loses its compare-and-set (ended already) writes no event.
        assert await store.apply(Change(id=hooked, to=State.cancelled, at=T0 + timedelta(seconds=9))) is None
        later = T0 + timedelta(hours=1)
        messages = await store.webhook_deliveries(hooked)
        assert [d.message.webhook_id for d in messages] == [f"{hooked}.started.0", f"{hooked}.completed"]
        assert await store.webhook_deliveries(silent) == []
        assert await store.webhooks_pending() == 2
        # The end waits for the start, also while the start is between attempts.
        (first,) = await store.due_webhooks(later, 10, [])
        assert first.message.webhook_id == f"{hooked}.started.0"
        assert await store.due_webhooks(later, 10, [first.seq]) == []
        retry = after_attempt(first.state, AttemptResult(503, "answered 503"), later, POLICY)
        await store.record_webhook_attempt(first.seq, retry)
        assert await store.due_webhooks(later, 10, []) == []
        again = later + timedelta(seconds=5)
        (first,) = await store.due_webhooks(again, 10, [])
        await store.record_webhook_attempt(
            first.seq, after_attempt(first.state, AttemptResult(200), again, POLICY)
        )
        (second,) = await store.due_webhooks(again, 10, [])
        assert second.message.webhook_id == f"{hooked}.completed"
        assert await store.webhooks_pending() == 1
        (started, _) = await store.webhook_deliveries(hooked)
        assert (started.state.attempts, started.state.last_status, started.state.delivered_at) == (
            2,
            200,
            again,
        )

    run.run(scenario())


def test_a_secret_is_issued_once_per_url_and_rotated(store: SqlStore, run: asyncio.Runner) -> None:
    async def scenario() -> None:
        assert await store.issue_webhook_secret("f", "https://a.example/h", "whsec_one", T0) == "whsec_one"
        assert await store.issue_webhook_secret("f", "https://a.example/h", "whsec_two", T0) is None
        assert await store.webhook_secret("f") == "whsec_one"
        assert (
            await store.issue_webhook_secret("f", "https://b.example/h", "whsec_three", T0) == "whsec_three"
        )
        await store.rotate_webhook_secret("f", "whsec_four", T0)
        assert await store.webhook_secret("f") == "whsec_four"
        # The webhook removed: the secret stays (messages may wait), and setting a URL again
        # issues a new one.
        assert await store.issue_webhook_secret("f", None, "whsec_five", T0) is None
        assert await store.webhook_secret("f") == "whsec_four"
        assert await store.issue_webhook_secret("f", "https://b.example/h", "whsec_six", T0) == "whsec_six"
        await store.rotate_webhook_secret("g", "whsec_seven", T0)
        assert await store.webhook_secret("g") == "whsec_seven"

    run.run(scenario())
