"""The leader's webhook deliverer: it reads the outbox for messages due, posts each (signed,
through the sender), and writes down how it went, as domain/webhook_delivery.py decides:
delivered, tried again after the back-off, or failed once the retry window is over.

Run by the replica that runs the dispatcher (server/app.py), so one gateway delivers a message
at a time; a new leader, or a restarted gateway, reads the pending messages back from the
outbox and goes on (at least once: a message whose attempt was cut short by the change is sent
again, with the same webhook-id). A message waits while an earlier one of its invocation is
pending, so each invocation's events arrive in order. At most `concurrency` attempts at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from elasticityops.background import Background, cancelled_and_done, wait_set
from elasticityops.domain.clock import Clock
from elasticityops.domain.ports import WebhookStore
from elasticityops.domain.webhook_delivery import AttemptResult, Delivery, DeliveryState, after_attempt
from elasticityops.domain.webhook_signing import signed_headers
from elasticityops.webhooks.sender import WebhookSender
from elasticityops.webhooks.settings import WebhookSettings

log = logging.getLogger(__name__)

# An attempt's outcome, as counted in /metrics: delivered, retry (failed, tried again later),
# failed (failed, and the retry window is over).
OutcomeObserver = Callable[[str], None]


def outcome_of(state: DeliveryState) -> str:
    if state.delivered_at is not None:
        return "delivered"
    return "failed" if state.failed_at is not None else "retry"


class WebhookDeliverer:
    def __init__(
        self,
        store: WebhookStore,
        clock: Clock,
        settings: WebhookSettings,
        on_outcome: OutcomeObserver | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self._policy = settings.policy()
        self._on_outcome = on_outcome
        self._loop = Background("eops-webhooks")
        self._wake = asyncio.Event()
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._sender: WebhookSender | None = None

    def wake(self) -> None:
        """Look for due messages now (a transition may have made one)."""
        self._wake.set()

    async def start(self) -> None:
        if self._loop.running:
            return
        self._sender = WebhookSender(
            allow_private=self._settings.allow_private,
            timeout_s=self._settings.timeout_s,
            concurrency=self._settings.concurrency,
        )
        self._loop.start(self._run)

    async def stop(self) -> None:
        """Stop looking and cut the attempts in flight short: their messages stay pending and
        are sent again by whoever delivers next (at least once)."""
        await self._loop.stop()
        tasks, self._in_flight = list(self._in_flight.values()), {}
        await cancelled_and_done(tasks)
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender.close()

    async def _run(self) -> None:
        while True:
            try:
                await self._start_due()
            except Exception:
                log.exception("webhook deliverer: reading the outbox failed; trying again")
            await wait_set(self._wake, self._settings.poll_s)
            self._wake.clear()

    async def _start_due(self) -> None:
        room = self._settings.concurrency - len(self._in_flight)
        if room <= 0:
            return
        due = await self._store.due_webhooks(self._clock.now(), room, list(self._in_flight))
        for delivery in due:
            task = asyncio.create_task(self._attempt(delivery), name=f"eops-webhook-{delivery.seq}")
            self._in_flight[delivery.seq] = task

    async def _attempt(self, delivery: Delivery) -> None:
        try:
            result = await self._send(delivery)
            state = after_attempt(delivery.state, result, self._clock.now(), self._policy)
            await self._store.record_webhook_attempt(delivery.seq, state)
            if self._on_outcome is not None:
                self._on_outcome(outcome_of(state))
            if not state.pending:
                self._wake.set()  # the next message of its invocation may go now
        except Exception:
            log.exception("webhook deliverer: message %s", delivery.message.webhook_id)
        finally:
            self._in_flight.pop(delivery.seq, None)

    async def _send(self, delivery: Delivery) -> AttemptResult:
        message = delivery.message
        secret = await self._store.webhook_secret(message.function)
        if secret is None:
            # A spec deployed by `eops serve --deploy FILE` gets none (it would be printed to the
            # log): the operator makes one with a rotation, and the retries go on meanwhile.
            return AttemptResult(
                None,
                f"function {message.function!r} has no webhook signing secret; make one with "
                f"POST /v1/functions/{message.function}/webhook-secret:rotate",
            )
        assert self._sender is not None
        timestamp = int(self._clock.now().timestamp())
        headers = {**message.headers, **signed_headers(secret, message.webhook_id, timestamp, message.body)}
        return await self._sender.send(message.url, message.body, headers)
