"""What happens to an outbox message after a delivery attempt: delivered, tried again after an
exponential back-off, or given up once it has been tried for the whole retry window.

Pure: the deliverer (webhooks/deliverer.py) makes the attempt and writes what this decides."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from elasticityops.domain.webhooks import OutboxMessage

MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class RetryPolicy:
    """The back-off: the first retry `initial_s` after a failure, each next one twice as long,
    at most `max_s` apart; tried until `give_up_after_s` after the event, then failed."""

    initial_s: float
    max_s: float
    give_up_after_s: float

    def delay(self, failures: int) -> float:
        """Seconds until the next try after the `failures`-th failed attempt (1, 2, ...)."""
        exponent = min(max(failures - 1, 0), 60)  # 2**60 is past any cap; no float overflow
        return float(min(self.initial_s * 2**exponent, self.max_s))


@dataclass(frozen=True)
class AttemptResult:
    """How one attempt went: the receiver's status (None: no answer), and the error."""

    status: int | None
    error: str | None = None

    @property
    def delivered(self) -> bool:
        # A redirect is not followed (where it points is not checked), so a 3xx is a failure.
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True)
class DeliveryState:
    """A message's delivery record, as the outbox keeps it."""

    attempts: int
    created_at: datetime
    next_attempt_at: datetime | None  # None: nothing more to do (delivered or failed)
    last_status: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None
    failed_at: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.next_attempt_at is not None


def after_attempt(
    state: DeliveryState, result: AttemptResult, now: datetime, policy: RetryPolicy
) -> DeliveryState:
    """The record once `result` is in: delivered; else retried after the back-off while the
    retry window lasts (every retry is due before the window's end, so the last one is made
    within it), failed after."""
    attempts = state.attempts + 1
    error = None if result.error is None else result.error[:MAX_ERROR_CHARS]
    if result.delivered:
        return DeliveryState(
            attempts, state.created_at, None, result.status, None, delivered_at=now, failed_at=None
        )
    window_end = state.created_at + timedelta(seconds=policy.give_up_after_s)
    if now >= window_end:
        return DeliveryState(attempts, state.created_at, None, result.status, error, None, failed_at=now)
    retry_at = min(now + timedelta(seconds=policy.delay(attempts)), window_end)
    return DeliveryState(attempts, state.created_at, retry_at, result.status, error)


@dataclass(frozen=True)
class Delivery:
    """An outbox row as read back: its order (`seq`), the message and its delivery record."""

    seq: int
    message: OutboxMessage
    state: DeliveryState
