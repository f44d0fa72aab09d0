"""api/auth.py TokenChecker on a stand-in store and a manual clock: a cached token is trusted
for CACHE_SECONDS at most, never past its expiry, and not at all once forgotten (revoked here);
whoever holds a request open with it hears (`until_invalid`) of each of those ends."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from elasticityops.api.auth import CACHE_SECONDS, RECHECK_SECONDS, TokenChecker, hash_token
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import TemporaryError
from elasticityops.domain.tokens import ApiToken, Scope, token_id

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Tokens:
    """The two store methods the checker calls, counting the reads."""

    def __init__(self) -> None:
        self.rows: dict[str, ApiToken] = {}
        self.reads = 0
        self.gate: asyncio.Event | None = None
        self.away = False  # the store is unavailable

    def add(self, token: bytes, expires_at: datetime | None = None) -> ApiToken:
        digest = hash_token(token)
        self.rows[digest] = ApiToken(token_id(digest), "t", Scope.invoke, T0, expires_at)
        return self.rows[digest]

    async def check_api_token(self, token_hash: str) -> ApiToken | None:
        self.reads += 1
        if self.away:
            raise TemporaryError("the database is restarting")
        found = self.rows.get(token_hash)
        if self.gate is not None:
            await self.gate.wait()
        return found


def _checker(tokens: Tokens, clock: ManualClock) -> TokenChecker:
    return TokenChecker(tokens, clock)  # type: ignore[arg-type]


def test_a_token_revoked_elsewhere_stops_working_after_the_cache_lifetime() -> None:
    tokens, clock = Tokens(), ManualClock(T0)
    checker = _checker(tokens, clock)
    tokens.add(b"eops_a")

    async def body() -> None:
        assert await checker.check(b"eops_a") is not None
        assert await checker.check(b"eops_a") is not None
        assert tokens.reads == 1, "a hit needs no read"
        tokens.rows.clear()  # another process revoked it
        clock.advance(CACHE_SECONDS - 0.5)
        assert await checker.check(b"eops_a") is not None, "still within the cache's lifetime"
        clock.advance(1.0)
        assert await checker.check(b"eops_a") is None

    asyncio.run(body())


def test_a_token_revoked_in_this_process_stops_working_at_once() -> None:
    tokens, clock = Tokens(), ManualClock(T0)
    checker = _checker(tokens, clock)
    record = tokens.add(b"eops_a")

    async def body() -> None:
        assert await checker.check(b"eops_a") is not None
        del tokens.rows[hash_token(b"eops_a")]
        checker.forget(record.id)
        assert await checker.check(b"eops_a") is None

    asyncio.run(body())


def test_a_read_that_raced_a_revocation_is_not_cached() -> None:
    tokens, clock = Tokens(), ManualClock(T0)
    checker = _checker(tokens, clock)
    record = tokens.add(b"eops_a")

    async def body() -> None:
        tokens.gate = asyncio.Event()
        reading = asyncio.create_task(checker.check(b"eops_a"))
        await asyncio.sleep(0)  # the read has the row, not yet the answer
        del tokens.rows[hash_token(b"eops_a")]
        checker.forget(record.id)
        tokens.gate.set()
        await reading
        tokens.gate = None
        assert await checker.check(b"eops_a") is None, "the raced read was cached"

    asyncio.run(body())


def test_a_cached_token_expires_on_time() -> None:
    tokens, clock = Tokens(), ManualClock(T0)
    checker = _checker(tokens, clock)
    tokens.add(b"eops_a", expires_at=T0 + timedelta(seconds=2))

    async def body() -> None:
        assert await checker.check(b"eops_a") is not None
        clock.advance(1.9)
        assert await checker.check(b"eops_a") is not None
        clock.advance(0.2)
        assert await checker.check(b"eops_a") is None

    asyncio.run(body())


def test_requests_arriving_together_when_the_cache_runs_out_share_one_read() -> None:
    # 64 requests in flight with one token: when its cached check runs out, one store read
    # serves them all (each queueing a read of its own stalled the loop ~150 ms every 5 s).
    tokens, clock = Tokens(), ManualClock(T0)
    checker = _checker(tokens, clock)
    tokens.add(b"eops_a")

    async def body() -> None:
        assert await checker.check(b"eops_a") is not None
        clock.advance(CACHE_SECONDS + 1)
        tokens.gate = asyncio.Event()
        waiting = [asyncio.create_task(checker.check(b"eops_a")) for _ in range(64)]
        await asyncio.sleep(0.01)
        tokens.gate.set()
        assert all(found is not None for found in await asyncio.gather(*waiting))
        assert tokens.reads == 2, f"{tokens.reads - 1} reads for 64 requests"

    asyncio.run(body())


async def _still_held(task: asyncio.Task[None]) -> bool:
    """Whether `until_invalid` still holds after a look of its own (RECHECK_SECONDS, real time)."""
    await asyncio.wait((task,), timeout=RECHECK_SECONDS * 1.5)
    return not task.done()


def test_a_holder_hears_of_a_revoke_here_of_an_expiry_and_of_a_revoke_elsewhere() -> None:
    tokens, clock = Tokens(), ManualClock(T0)
    checker = _checker(tokens, clock)
    here = tokens.add(b"eops_here")
    tokens.add(b"eops_expiring", expires_at=T0 + timedelta(seconds=30))
    tokens.add(b"eops_elsewhere")

    async def body() -> None:
        held = {
            name: asyncio.create_task(checker.until_invalid(hash_token(name)))
            for name in (b"eops_here", b"eops_expiring", b"eops_elsewhere")
        }
        assert all([await _still_held(task) for task in held.values()]), "valid tokens hold"
        del tokens.rows[hash_token(b"eops_here")]
        checker.forget(here.id)
        await held[b"eops_here"]  # woken by the forget, not at its next look
        del tokens.rows[hash_token(b"eops_elsewhere")]  # another process revoked it
        assert await _still_held(held[b"eops_elsewhere"]), "trusted for the cache's lifetime"
        clock.advance(CACHE_SECONDS + 1)
        await held[b"eops_elsewhere"]
        assert await _still_held(held[b"eops_expiring"])
        clock.advance(30)
        await held[b"eops_expiring"]

    asyncio.run(body())


def test_a_store_away_ends_no_hold() -> None:
    tokens, clock = Tokens(), ManualClock(T0)
    checker = _checker(tokens, clock)
    tokens.add(b"eops_a")

    async def body() -> None:
        held = asyncio.create_task(checker.until_invalid(hash_token(b"eops_a")))
        assert await _still_held(held)
        tokens.away = True
        clock.advance(CACHE_SECONDS + 1)  # its next look reads the store
        assert await _still_held(held), "an outage is no revoke"
        tokens.away = False
        del tokens.rows[hash_token(b"eops_a")]
        await held

    asyncio.run(body())
