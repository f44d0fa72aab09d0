"""The leader elector: campaigns for a Lease, renews it while leading, and says when this replica
starts and stops leading. Every decision is lease.py's; this is the loop and the I/O.

Failures of the Lease's store (a 409 from a lost race, a 404, a dropped connection, 429 and
5xx) are data for the next try, never a crash: a follower simply looks again, a leader that
cannot renew within the renew deadline steps down."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from elasticityops.background import Background, cancelled_and_done
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Conflict, EopsError
from elasticityops.domain.lease import (
    Create,
    LeaseRecord,
    Observed,
    Wait,
    Write,
    age,
    decide,
    lost_to_another,
    may_renew_blindly,
    observe,
    released,
    renewal_overdue,
)
from elasticityops.ha.settings import JITTER_FACTOR, LeaderElectionSettings

log = logging.getLogger(__name__)

Duty = Callable[[], Awaitable[None]]


class LeaseStore(Protocol):
    """Where the Lease lives. Errors are the domain's: Conflict for a 409 (a write at an old
    resourceVersion, or a create of one that exists), anything else EopsError."""

    async def get(self) -> LeaseRecord | None:
        """The record, or None when there is no Lease."""
        ...

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create the Lease; the record as written (with its resourceVersion)."""
        ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace the Lease if it is still at `record.resource_version`; as written."""
        ...


async def _nothing() -> None:
    return None


class LeaderElector:
    """`run()` campaigns and leads until cancelled; `on_started_leading` is started as a task
    when the lease is won (renewals go on meanwhile), `on_stopped_leading` is awaited as soon as
    it is lost (renew deadline passed, or another holds it), before campaigning again."""

    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        settings: LeaderElectionSettings,
        clock: Clock,
        *,
        on_started_leading: Duty = _nothing,
        on_stopped_leading: Duty = _nothing,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.identity = identity
        self.settings = settings
        self._clock = clock
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._rng = rng or random.Random()
        self._observed: Observed | None = None
        self._leading = False
        self._renewed_at = 0.0
        self._duty = Background("leader duties")
        self._election = Background(f"leader election {identity}")
        self._give_up = False
        self._duties_up = False  # from started until stopped duties (on_stopped done)
        self.last_error: str | None = None
        self.started_leading = asyncio.Event()
        """Set while leading; cleared when leading stops."""
        self.stopped_leading = asyncio.Event()
        """Set while not leading (from the start); cleared when leading starts."""
        self.stopped_leading.set()

    # --- what the rest of the gateway reads ---------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def leader(self) -> str:
        """The holder this replica last saw (empty: none seen, or released)."""
        return "" if self._observed is None else self._observed.record.holder

    def observed_age(self) -> float | None:
        """Seconds since this replica saw the Lease change (None: it has not read it yet)."""
        return None if self._observed is None else age(self._observed, self._clock.monotonic())

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Run the election in a task of its own."""
        self._election.start(self.run)

    async def stop(self, *, release: bool = True) -> None:
        """Stop campaigning, stop leading (the duties stopped first) and, with `release`, give
        the Lease up so a follower takes over at its next look."""
        await self._election.stop()
        await self._step_down("the gateway is stopping", level=logging.INFO)
        if release:
            await self.release()

    async def run(self) -> None:
        while True:
            await self._campaign()
            self._become_leader()
            if not await self._lead():
                # Released: leave the others a lease duration to take it before trying again.
                await self._clock.sleep(self.settings.lease_duration_s)

    async def release(self) -> bool:
        """Give the Lease up if we hold it as last seen (an old resourceVersion is refused: then
        someone else holds it already). False when it could not be written."""
        if self._observed is None or self._observed.record.holder != self.identity:
            return True
        record = released(self._observed.record, self._clock.now())
        written: LeaseRecord | None
        try:
            written = await self.store.update(record)
        except Conflict:
            # A renewal cut short by the stop may have landed without its answer being read: the
            # Lease is still ours at a newer resourceVersion. Read it, and release that.
            written = await self._release_as_read()
        except Exception as exc:  # a release that fails leaves the lease to expire
            log.warning("leader election: could not release the lease: %s", exc)
            return False
        if written is None:
            return False
        self._observed = Observed(written, self._clock.monotonic())
        log.info("leader election: %s released the lease", self.identity)
        return True

    async def _release_as_read(self) -> LeaseRecord | None:
        try:
            current = await self.store.get()
            if current is None or current.holder != self.identity:
                log.info("leader election: the lease is no longer %s's; nothing to release", self.identity)
                return None
            return await self.store.update(released(current, self._clock.now()))
        except Exception as exc:
            log.warning("leader election: could not release the lease: %s", exc)
            return None

    # --- campaigning and leading --------------------------------------------------------------

    async def _campaign(self) -> None:
        while True:
            if await self._bounded(self._try(), self.settings.renew_deadline_s):
                return
            jitter = 1.0 + JITTER_FACTOR * self._rng.random()
            await self._clock.sleep(self.settings.retry_period_s * jitter)

    def _become_leader(self) -> None:
        self._leading = True
        self._duties_up = True
        self.stopped_leading.clear()
        self.started_leading.set()
        log.info("leader election: %s leads (lease %s)", self.identity, self.settings.lease_name)
        self._duty.start(self._start_duties)

    async def _start_duties(self) -> None:
        try:
            await self._on_started()
        except Exception:
            # Leading without its duties would hold the lease and do nothing: step down, so
            # another replica (or this one, once it recovers) takes over.
            log.exception("leader election: starting the leader's duties failed; stepping down")
            self._give_up = True

    async def _lead(self) -> bool:
        """Renew until leading stops; False when it stopped because the duties failed."""
        while True:
            await self._clock.sleep(self.settings.retry_period_s)
            if self._give_up:
                self._give_up = False
                await self._step_down("its duties did not start")
                await self.release()
                return False
            started = self._clock.monotonic()
            left = self._renewed_at + self.settings.renew_deadline_s - started
            if left > 0 and await self._bounded(self._try(), left):
                continue
            now = self._clock.monotonic()
            other = lost_to_another(self._observed, self.identity, now)
            if other is not None:
                await self._step_down(f"the lease is held by {other}")
                return True
            if renewal_overdue(self._renewed_at, now, self.settings.renew_deadline_s):
                await self._step_down(
                    f"it could not renew the lease within {self.settings.renew_deadline_s:g} s"
                    + (f" ({self.last_error})" if self.last_error else "")
                )
                return True

    async def _step_down(self, why: str, level: int = logging.WARNING) -> None:
        """Stop leading at once: first the flag (readiness, metrics), then the duties. A step-down
        cut short (the gateway stopping meanwhile) is finished by the next call."""
        if self._leading:
            self._leading = False
            self.started_leading.clear()
            log.log(level, "leader election: %s stops leading: %s", self.identity, why)
        if not self._duties_up:
            return
        await self._duty.stop()
        try:
            await self._on_stopped()
        except Exception:
            # Logged, not raised: the election goes on (a crash here would leave the lease to
            # be renewed by nobody and the replica a follower that never campaigns again).
            log.exception("leader election: stopping the leader's duties failed")
        self._duties_up = False
        self.stopped_leading.set()

    # --- one try ------------------------------------------------------------------------------

    async def _try(self) -> bool:
        """One tryAcquireOrRenew; True when this replica holds the lease as written now."""
        now = self._clock.monotonic()
        at = self._clock.now()
        duration = self.settings.lease_duration_s
        if self._leading and may_renew_blindly(self._observed, self.identity, now):
            assert self._observed is not None
            step = decide(self._observed, self.identity, duration, now, at)
            if isinstance(step, Write) and await self._write(step.record, now, create=False):
                return True
        try:
            current = await self.store.get()
        except Exception as exc:  # data for the next try
            return self._failed("reading the lease", exc)
        if current is not None:
            self._observed = observe(self._observed, current, now)
        step = decide(self._observed if current is not None else None, self.identity, duration, now, at)
        match step:
            case Wait():
                return False
            case Create(record=record):
                return await self._write(record, now, create=True)
            case Write(record=record, takeover=takeover):
                if takeover:
                    log.info(
                        "leader election: %s takes over the lease from %r",
                        self.identity,
                        current.holder if current is not None else "",
                    )
                return await self._write(record, now, create=False)
        return False  # pragma: no cover - the match is exhaustive

    async def _write(self, record: LeaseRecord, now: float, *, create: bool) -> bool:
        try:
            written = await (self.store.create(record) if create else self.store.update(record))
        except Exception as exc:  # a lost race (409), a 5xx: data for the next try
            return self._failed("creating the lease" if create else "writing the lease", exc)
        self._observed = Observed(written, now)
        self._renewed_at = now
        self.last_error = None
        return True

    def _failed(self, what: str, exc: Exception) -> bool:
        self.last_error = f"{what}: {exc}"
        if isinstance(exc, EopsError):
            log.debug("leader election: %s", self.last_error)
        else:  # not the store's translated errors: a bug, worth its traceback, still no crash
            log.warning("leader election: %s", self.last_error, exc_info=exc)
        return False

    async def _bounded(self, attempt: Coroutine[Any, Any, bool], seconds: float) -> bool:
        """`attempt`'s answer, or False when it takes longer than `seconds` on the clock (a request
        that hangs must not keep a leader past its renew deadline)."""
        task = asyncio.ensure_future(attempt)
        timer = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not task.done():
                await cancelled_and_done([task])
        if task.cancelled():
            self.last_error = f"no answer from the lease's store within {seconds:g} s"
            return False
        return task.result()
