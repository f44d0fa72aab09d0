"""Moving a pending invocation to another GPU type (spillover), in one place, so that a general
relaunch mechanism (requeue: pending -> queued with an attempt counter and a Job name per
attempt) can replace it whole.

What `relaunch_on` does today, in this order:
1. records the move in the store (`Store.spill`: the new gpu_type and the note saying why, as a
   compare-and-set on "pending on the old type, no node yet"; a lost race ends it here);
2. asks the backend to withdraw the Job it has (`withdraw`: delete it and its payload Secret
   and wait until both are gone, reporting no end for them; the backend fails the invocation
   itself when they do not go);
3. launches it again as at admission: the same Job name (the old one is gone, so it is never
   two), now asking for the new type, and only if it is still pending (a cancel may have come).

A gateway that dies between 1 and 3 finds on restart a pending invocation whose container has
not started and launches it as usual: on the new type when the old Job had gone, else the old
Job (409: the same name) is kept. A backend without `withdraw` (the local one starts work only
on a free slot, so nothing waits there for a type) is never asked."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from elasticityops.domain.clock import Clock
from elasticityops.domain.invocations import Invocation, State
from elasticityops.domain.ports import Backend, InvocationRecords
from elasticityops.domain.spillover import Spill

log = logging.getLogger(__name__)


@runtime_checkable
class Withdraws(Protocol):
    async def withdraw(self, invocation: Invocation) -> bool:
        """Take back its Job (on `invocation.gpu_type`), waiting until it is gone; False when it
        did not go (the backend has then reported the invocation's end)."""
        ...


def can_relaunch(backend: Backend) -> bool:
    return isinstance(backend, Withdraws)


@dataclass(frozen=True)
class Relauncher:
    store: InvocationRecords
    backend: Backend
    clock: Clock
    launch: Callable[[Invocation], Awaitable[None]]
    """Launch as admission does (payload, callback URL and token)."""

    async def relaunch_on(self, invocation: Invocation, gpu_type: str, reason: str) -> Invocation | None:
        """Move `invocation` (pending on `invocation.gpu_type`) to `gpu_type` because of
        `reason`; the invocation as moved, or None when it was not (see the module docstring)."""
        backend = self.backend
        current = invocation.gpu_type
        if current is None or not isinstance(backend, Withdraws):
            return None
        moved = await self.store.spill(invocation.id, current, Spill(gpu_type, reason), self.clock.now())
        if moved is None:
            return None
        log.info("%s: spilled from %s to %s: %s", invocation.id, current, gpu_type, reason)
        if not await backend.withdraw(invocation):
            return None
        latest = await self.store.get_invocation(invocation.id)
        if latest is None or latest.state is not State.pending or latest.gpu_type != gpu_type:
            return None  # cancelled (or ended) while its Job was being withdrawn
        await self.launch(latest)
        return latest
