"""Waiting on an invocation in a request: `?wait`, a cancel's wait, a follow's start and end.
Each wakes on the change hub (or the replica poller), rereads the row, and ends at its deadline,
or at once when the hold on the request lets go (the gateway stopping, the token going)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from elasticityops.api.held_open import Hold
from elasticityops.api.runtime import Runtime
from elasticityops.changes.replicas import stamp
from elasticityops.domain.errors import NotFound
from elasticityops.domain.invocations import Invocation, State


async def get_or_404(rt: Runtime, invocation_id: str) -> Invocation:
    inv = await rt.store.get_invocation(invocation_id)
    if inv is None:
        raise NotFound(f"no invocation {invocation_id!r}; list them with GET /v1/invocations (eops ls)")
    return inv


def ended(inv: Invocation) -> bool:
    return inv.state.terminal


def started_or_ended(inv: Invocation) -> bool:
    return inv.state not in (State.queued, State.pending)


async def held_wait(rt: Runtime, digest: str, inv: Invocation, seconds: float) -> Invocation:
    """`?wait`: the invocation once it has ended or the wait is over; at once, as it stands,
    when the gateway begins to stop; 401 when the token goes meanwhile."""
    async with Hold(rt.stopping, rt.tokens, digest) as hold:
        inv = await wait_for_end(rt, inv, seconds, hold=hold)
        hold.check_token()
    return inv


async def wait_for_end(
    rt: Runtime,
    inv: Invocation,
    seconds: float,
    done: Callable[[Invocation], bool] = ended,
    hold: Hold | None = None,
) -> Invocation:
    """Subscribe, re-read, then sleep until a change, the deadline or the hold's let-go (see
    ChangeHub.watch). The invocation is read once more after a let-go: as it stands then."""
    deadline = rt.clock.monotonic() + seconds
    while not done(inv):
        remaining = deadline - rt.clock.monotonic()
        with rt.hub.watch(inv.id) as changed:
            current = await rt.store.get_invocation(inv.id)
            if current is None:
                return inv
            inv = current
            changed.saw(stamp(inv))  # another replica's change is then noticed by the poller
            if done(inv) or remaining <= 0 or (hold is not None and hold.let_go.done()):
                return inv
            woken = asyncio.ensure_future(changed.wait())
            try:
                waits = (woken,) if hold is None else (woken, hold.let_go)
                await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
    return inv
