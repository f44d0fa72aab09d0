"""What the dispatcher does with what it observes: pure functions from plain data to effects.

`plan_event` turns a backend event into the store writes it implies; `plan_recovery` decides,
after a restart, what happens to active invocations the backend has no trace of. The dispatcher
applies these plans; it decides nothing itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from elasticityops.domain.invocations import ACTIVE_STATES, FailureReason, Invocation, Note, State
from elasticityops.domain.ports import BackendEvent, Change, EventKind

_ACTIVE = frozenset(ACTIVE_STATES)


@dataclass(frozen=True)
class EventPlan:
    """The store writes one backend event implies, in the order to apply them."""

    note: Note | None = None
    capacity_ready: tuple[datetime, str | None] | None = None
    result: bytes | None = None  # written before `change`, so whoever wakes on it sees the result
    change: Change | None = None
    frees_capacity: bool = False  # the job is over: wake the dispatcher to admit more


def plan_event(current: Invocation | None, event: BackendEvent) -> EventPlan:
    """`current`: the invocation as stored (None: unknown id, the event is dropped). Events are
    compare-and-set against the states they may move from, so a repeated or late event (say, a
    `finished` after a cancel already ended it) changes nothing."""
    if current is None:
        return EventPlan()
    if event.kind is EventKind.note:
        if current.state.terminal:
            return EventPlan()
        return EventPlan(note=Note(at=event.at, kind=event.note_kind or "Note", message=event.message))
    if event.kind is EventKind.capacity_ready:
        if current.state is not State.pending:
            return EventPlan()
        return EventPlan(capacity_ready=(event.at, event.node))
    if event.kind is EventKind.started:
        if current.state is not State.pending:
            return EventPlan()
        return EventPlan(
            change=Change(
                id=current.id,
                to=State.running,
                at=event.at,
                from_states=frozenset({State.pending}),
                node=event.node,
            )
        )
    # finished
    result = event.result if event.result is not None and current.result is None else None
    if current.state not in _ACTIVE:
        # Over already (cancelled while it ran, say); the slot is free now all the same.
        return EventPlan(frees_capacity=True)
    return EventPlan(
        result=result,
        change=Change(
            id=current.id,
            to=finished_state(event),
            at=event.at,
            from_states=_ACTIVE,
            exit_code=event.exit_code,
            reason=event.reason,
            message=event.message,
            node=event.node,
        ),
        frees_capacity=True,
    )


def finished_state(event: BackendEvent) -> State:
    if event.cancelled or event.reason is FailureReason.cancelled:
        return State.cancelled
    if event.timed_out or event.reason is FailureReason.timeout:
        return State.timed_out
    if event.reason is None and event.exit_code in (0, None):
        return State.succeeded
    return State.failed


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


def callback_url(base_url: str | None, invocation_id: str) -> str | None:
    """Where the job POSTs its result (see the API's result callback)."""
    if not base_url:
        return None
    return f"{base_url.rstrip('/')}/v1/invocations/{invocation_id}/result"
