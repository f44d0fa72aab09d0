"""What lets several gateway replicas on one database answer for each other's work: their
knobs, and the change poller that brings another replica's changes to this one's waiters.

The hub (changes/hub.py) fires at once for what this replica changes itself. An invocation
another replica's dispatcher moves (the one that runs it) changes only in the database, so
while someone here waits, the poller reads the (state, attempt) of every invocation waited on,
one query per interval for all of them, and wakes the waiters whose stamp moved. Nobody
waiting: no query. Why a poll and not PostgreSQL's LISTEN/NOTIFY: docs/high-availability.md."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass

from elasticityops.background import Background
from elasticityops.changes.hub import ChangeHub
from elasticityops.domain.clock import Clock
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.ports import InvocationStore
from elasticityops.knobs import knob

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReplicaSettings:
    change_poll_s: float = knob(
        0.5,
        env="EOPS_CHANGE_POLL_SECONDS",
        unit="seconds",
        gt=0,
        le=3600,
        help="While a ?wait, log follow or cancel waits here, how often one query reads the state "
        "of every invocation waited on, to see what another replica changed (the longest "
        "such a change takes to be noticed).",
    )
    functions_check_s: float = knob(
        1.0,
        env="EOPS_FUNCTIONS_CHECK_SECONDS",
        unit="seconds",
        ge=0,
        le=3600,
        help="How long a cached function spec is trusted before one read of the functions' "
        "generation checks for a deploy or delete made by another replica; 0: every use.",
    )
    clock_sync_s: float = knob(
        30.0,
        env="EOPS_CLOCK_SYNC_SECONDS",
        unit="seconds",
        ge=0,
        le=86_400,
        help="How often a replica on PostgreSQL measures its clock's offset to the database "
        "server's, on which every replica stamps milestones; 0: once, at start.",
    )
    cancel_wait_s: float = knob(
        5.0,
        env="EOPS_CANCEL_WAIT_SECONDS",
        unit="seconds",
        ge=0,
        le=3600,
        help="How long a cancel asked of a replica whose dispatcher does not run waits for the "
        "one that does to stop the job, before answering 202 with the request recorded.",
    )


def stamp(inv: Invocation) -> Hashable:
    """What the poller compares: an invocation moves on by its state, or by a new attempt
    (preempted and run again) even when the state reads the same."""
    return (inv.state, inv.attempt)


class ChangePoller:
    def __init__(self, store: InvocationStore, hub: ChangeHub, clock: Clock, interval_s: float) -> None:
        self._store = store
        self._hub = hub
        self._clock = clock
        self._interval_s = interval_s
        self._loop_task = Background("change poller")
        self.queries = 0  # reads made, for the bench and the tests

    def start(self) -> None:
        self._loop_task.start(self._loop)

    async def stop(self) -> None:
        await self._loop_task.stop()

    async def _loop(self) -> None:
        while True:
            await self._hub.until_someone_waits()
            await self._clock.sleep(self._interval_s)
            try:
                await self.poll()
            except Exception:
                # The database away for a moment: the waiters' own deadlines still hold.
                log.exception("change poll failed")

    async def poll(self) -> None:
        """One read for everything waited on now; wake those the store says moved on."""
        waited = self._hub.waited_on()
        if not waited:
            return
        self.queries += 1
        stamps = await self._store.change_stamps(list(waited))
        # Compared with what the waiters saw by now (they may have read again meanwhile): a
        # waiter that read something newer than this poll is woken once more, for nothing.
        for invocation_id, seen in self._hub.waited_on().items():
            now = stamps.get(invocation_id)
            current = None if now is None else (now[0], now[1])
            if any(s != current for s in seen):
                self._hub.changed(invocation_id)
