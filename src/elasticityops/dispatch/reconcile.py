"""What the dispatcher does after a restart: a pure function from plain data to effects.

`plan_recovery` decides what happens to active invocations the backend has no trace of; the
dispatcher applies the plan. (What a backend event does is `domain.events.apply_event`, which
the store applies inside its write.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from elasticityops.domain.errors import Conflict
from elasticityops.domain.invocations import ACTIVE_STATES, FailureReason, Invocation, State
from elasticityops.domain.ports import Change


@dataclass(frozen=True)
class RecoveryPlan:
    relaunch: list[Invocation]  # pending, never launched: safe to launch (launch is idempotent)
    lose: list[Change]  # running, yet gone: it may have run, so it is failed, never run again


def plan_recovery(active: Sequence[Invocation], missing: Sequence[str], at: datetime) -> RecoveryPlan:
    gone = set(missing)
    relaunch: list[Invocation] = []
    lose: list[Change] = []
    for inv in active:
        if inv.id not in gone:
            continue
        if inv.state is State.pending:
            relaunch.append(inv)
        elif inv.state is State.running:
            lose.append(
                Change(
                    id=inv.id,
                    to=State.failed,
                    at=at,
                    from_states=frozenset({State.running}),
                    reason=FailureReason.lost,
                    message="the backend has no trace of this running job after a gateway restart; "
                    "it is not run again (it may have run); invoke it anew if it should",
                )
            )
    return RecoveryPlan(relaunch=relaunch, lose=lose)


@dataclass(frozen=True)
class CancelPlan:
    change: Change | None  # None: cancelled already, nothing to do
    stop_backend: bool = False  # ask the backend to stop the job first


def plan_cancel(inv: Invocation, at: datetime) -> CancelPlan:
    """The one decision of what a cancel does to `inv` as stored now. An invocation that ended
    otherwise cannot be cancelled (Conflict, named by its state: the API's 409)."""
    if inv.state is State.cancelled:
        return CancelPlan(change=None)
    if inv.state.terminal:
        raise Conflict(f"invocation {inv.id} already ended ({inv.state.value}); nothing to cancel")
    if inv.state is State.queued:
        queued = frozenset({State.queued})
        message = "cancelled before it started"
        change = Change(inv.id, State.cancelled, at, from_states=queued, message=message)
        return CancelPlan(change=change)
    change = Change(inv.id, State.cancelled, at, from_states=frozenset(ACTIVE_STATES), message="cancelled")
    return CancelPlan(change=change, stop_backend=True)


def callback_url(base_url: str | None, invocation_id: str) -> str | None:
    """Where the job POSTs its result (see the API's result callback)."""
    if not base_url:
        return None
    return f"{base_url.rstrip('/')}/v1/invocations/{invocation_id}/result"
