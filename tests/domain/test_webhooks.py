"""The pure parts of completion webhooks: the back-off and the retry window, the signature (as
a Standard Webhooks library checks it), which addresses are refused, and the events a
transition makes."""

from __future__ import annotations

import ipaddress
import json
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import Invocation, State, Timeline, advance
from elasticityops.domain.webhook_addresses import address_refusal, url_problem
from elasticityops.domain.webhook_delivery import AttemptResult, DeliveryState, after_attempt
from elasticityops.domain.webhook_signing import new_secret, signed_headers
from elasticityops.domain.webhook_spec import WebhookEvent, WebhookSpec
from elasticityops.domain.webhooks import events_of, messages_of
from elasticityops.webhooks.settings import WebhookSettings

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
DEFAULTS = WebhookSettings().policy()  # the gateway's, as `eops serve` starts without flags


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_back_off_doubles_from_the_first_retry_up_to_the_cap() -> None:
    assert [DEFAULTS.delay(n) for n in range(1, 6)] == [5.0, 10.0, 20.0, 40.0, 80.0]
    assert DEFAULTS.delay(11) == 3600.0
    assert DEFAULTS.delay(10_000) == 3600.0  # no overflow however many failures


def test_a_failed_message_is_retried_within_10_s_and_for_24_hours_then_failed() -> None:
    state = DeliveryState(attempts=0, created_at=T0, next_attempt_at=T0)
    now = T0
    failed = AttemptResult(500, "answered 500")
    state = after_attempt(state, failed, now, DEFAULTS)
    assert state.next_attempt_at is not None
    assert state.next_attempt_at - now <= timedelta(seconds=10)
    while state.pending:
        assert state.next_attempt_at is not None
        now = state.next_attempt_at
        state = after_attempt(state, failed, now, DEFAULTS)
    assert state.failed_at == now
    assert now >= at(86_400)
    assert now <= at(86_400)  # the last retry is due at the window's end, not an hour past it
    assert state.attempts < 60
    assert state.last_error == "answered 500"


def test_a_2xx_is_delivered_and_a_redirect_is_not() -> None:
    state = DeliveryState(attempts=2, created_at=T0, next_attempt_at=T0)
    done = after_attempt(state, AttemptResult(204), at(1), DEFAULTS)
    assert (done.attempts, done.delivered_at, done.next_attempt_at, done.last_error) == (3, at(1), None, None)
    moved = after_attempt(state, AttemptResult(302, "a redirect"), at(1), DEFAULTS)
    assert moved.pending
    assert moved.delivered_at is None
    assert moved.last_status == 302


def test_the_signature_verifies_with_a_standard_webhooks_library() -> None:
    secret = new_secret(bytes(range(32)))
    assert secret.startswith("whsec_")
    body = json.dumps({"type": "invocation.completed", "data": {"id": "inv-1"}}).encode()
    timestamp = int(datetime.now(UTC).timestamp())
    headers = signed_headers(secret, "inv-1.completed", timestamp, body)
    assert Webhook(secret).verify(body, headers)["data"]["id"] == "inv-1"
    with pytest.raises(Exception, match="signature"):
        Webhook(secret).verify(body + b" ", headers)


def test_a_secret_needs_24_random_bytes() -> None:
    with pytest.raises(ValueError, match="24"):
        new_secret(b"short")


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.251", "multicast"),
        ("100.64.0.1", "not publicly routable"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_addresses_are_classified(address: str, kind: str | None) -> None:
    assert address_refusal(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(
    ("url", "allow_private", "refused"),
    [
        ("https://example.com/hook", False, False),
        ("http://example.com:8080/hook?a=1", False, False),
        ("http://localhost/hook", False, False),  # a name: checked when a delivery resolves it
        ("http://127.0.0.1:9000/hook", False, True),
        ("http://127.0.0.1:9000/hook", True, False),
        ("http://[::1]/hook", False, True),
        ("file:///etc/passwd", True, True),
        ("https://a:b@example.com", True, True),
        ("https://example.com:99999/", True, True),
        ("https://exa mple.com/", True, True),
        ("https://", True, True),
    ],
)
def test_urls_are_checked(url: str, allow_private: bool, refused: bool) -> None:
    assert (url_problem(url, allow_private=allow_private) is not None) == refused


def _invocation() -> Invocation:
    return Invocation(
        id="inv-1", function="f", state=State.queued, priority=Priority.normal, timeline=Timeline(accepted=T0)
    )


def test_a_run_makes_a_start_then_an_end_and_a_requeue_starts_again() -> None:
    queued = _invocation()
    pending = advance(queued, State.pending, at(1))
    running = advance(pending, State.running, at(2))
    assert events_of(queued, pending) == []
    assert events_of(pending, running) == [WebhookEvent.started]
    requeued = advance(running, State.queued, at(3))
    assert events_of(running, requeued) == []
    again = advance(advance(requeued, State.pending, at(4)), State.running, at(5))
    assert events_of(requeued, again) == [WebhookEvent.started]
    done = advance(again, State.succeeded, at(6))
    assert events_of(again, done) == [WebhookEvent.completed]
    # So short that only its end was seen: it starts and ends at once, in that order.
    assert events_of(pending, advance(pending, State.succeeded, at(2))) == [
        WebhookEvent.started,
        WebhookEvent.completed,
    ]
    assert events_of(queued, advance(queued, State.cancelled, at(1))) == [WebhookEvent.completed]


def test_messages_have_stable_ids_and_only_the_events_asked_for() -> None:
    pending = advance(_invocation(), State.pending, at(1))
    done = advance(pending, State.succeeded, at(2))
    done = Invocation(**{**done.__dict__, "result": b'{"x": [1, 2]}'})
    hook = WebhookSpec(url="https://example.com/h", include_result=True)
    (message,) = messages_of(pending, done, hook)
    assert message.webhook_id == "inv-1.completed"
    assert message.created_at == at(2)
    body = json.loads(message.body)
    assert body["type"] == "invocation.completed"
    assert body["timestamp"] == "2026-12-06T12:00:02Z"
    assert body["data"]["result"] == {"x": [1, 2]}
    assert body["data"]["state"] == "succeeded"
    both = WebhookSpec(url="https://example.com/h", events=[WebhookEvent.started, WebhookEvent.completed])
    ids = [m.webhook_id for m in messages_of(pending, done, both)]
    assert ids == ["inv-1.started.0", "inv-1.completed"]
    assert "result" not in json.loads(messages_of(pending, done, both)[1].body)["data"]
    # Its start and end seen at once: the start still says how it was when it started.
    started = json.loads(messages_of(pending, done, both)[0].body)["data"]
    assert (started["state"], started["finished_at"], started["started_at"]) == (
        "running",
        None,
        "2026-12-06T12:00:02Z",
    )
    assert messages_of(pending, done, None) == ()
