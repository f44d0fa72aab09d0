"""Client-side pacing of API requests: a token bucket (QPS and burst, as client-go) and the
back-off schedule of retries. Time comes from the injected clock."""

from __future__ import annotations

import asyncio
import random

from elasticityops.domain.clock import Clock


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up; `acquire` waits for one token.

    Waiters are served in arrival order (one lock), so a burst drains at exactly `rate`."""

    def __init__(self, rate: float, burst: int, clock: Clock) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._last = clock.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now

    async def acquire(self) -> None:
        async with self._lock:
            self._refill()
            if self._tokens < 1.0:
                await self._clock.sleep((1.0 - self._tokens) / self._rate)
                self._refill()
            self._tokens -= 1.0


def backoff_delay(
    attempt: int, base: float, cap: float, retry_after: float | None = None, rng: random.Random | None = None
) -> float:
    """Seconds to wait before retry number `attempt` (0-based): the server's Retry-After when it
    gave one, else exponential with "equal jitter" so a crowd of retries spreads out."""
    if retry_after is not None:
        return min(cap, max(0.0, retry_after))
    ceiling = min(cap, base * 2.0**attempt)
    jitter: float = (rng or random).random()
    return ceiling / 2 + jitter * ceiling / 2


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (the API server sends whole seconds; HTTP dates are not used)."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None
