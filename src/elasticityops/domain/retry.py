"""Another attempt, or the end: what becomes of an invocation whose attempt was taken away
through no fault of its own — stopped for higher-priority work (domain.preemption), or its node
lost under it (a spot preemption, a deleted node). The one owner of "requeue as the next
attempt": its function's `retries` say how many times, and each attempt is a job of its own
(the backend names it by attempt, so no job name is used twice). Pure."""

from __future__ import annotations

from datetime import datetime

from elasticityops.domain.events import Finished
from elasticityops.domain.invocations import ACTIVE_STATES, FailureReason, Invocation, Note, State
from elasticityops.domain.ports import Change

NODE_LOST = "NodeLost"  # note kind of a lost node's outcome
PREEMPTED_OUTSIDE = "PreemptedOutside"  # note kind of a preemption by Kueue


def next_attempt_or_fail(
    inv: Invocation,
    retries: int,
    at: datetime,
    *,
    cause: str,
    kind: str,
    reason: FailureReason,
    exit_code: int | None = None,
) -> Change:
    """`inv` back in the queue as its next attempt while it has retries left, else failed with
    `reason`; `cause` (what took the attempt away) leads the message and the note of `kind`. A
    compare-and-set on the active states and on this attempt: an invocation that ended, or moved
    on to another attempt, meanwhile is left as it is."""
    active = frozenset(ACTIVE_STATES)
    if inv.attempt < retries:
        attempt = inv.attempt + 1
        message = f"{cause}; requeued as attempt {attempt} (retry {attempt} of {retries})"
        note = Note(at, kind, message)
        return Change(
            inv.id, State.queued, at, from_states=active, message=message, note=note, attempt=inv.attempt
        )
    message = (
        f"{cause}; no retry left ({inv.attempt} of its function's {retries} used): "
        "raise the function's retries to requeue it instead, or invoke it again"
    )
    return Change(
        inv.id,
        State.failed,
        at,
        from_states=active,
        exit_code=exit_code,
        reason=reason,
        message=message,
        note=Note(at, kind, message),
        attempt=inv.attempt,
    )


def end_of_lost_node(inv: Invocation, finished: Finished, retries: int, at: datetime) -> Change | None:
    """What a job's end that says its node was lost (`finished.lost_node`) or that something
    outside the gateway preempted it (`finished.preempted_by`) does to `inv`: its next attempt
    while `retries` last, else failed `evicted` naming the node (`preempted` naming who
    preempted it). None where the end is neither, or is not about `inv` as it stands (ended,
    between attempts, being preempted: the usual fold of the event decides those)."""
    if inv.state not in ACTIVE_STATES or inv.preempting_by is not None:
        return None
    if finished.preempted_by is not None:
        return next_attempt_or_fail(
            inv,
            retries,
            at,
            cause=finished.message or f"preempted by {finished.preempted_by}",
            kind=PREEMPTED_OUTSIDE,
            reason=FailureReason.preempted,
            exit_code=finished.exit_code,
        )
    if finished.lost_node is None:
        return None
    cause = f"node lost: {finished.message}" if finished.message else f"node lost: {finished.lost_node}"
    return next_attempt_or_fail(
        inv,
        retries,
        at,
        cause=cause,
        kind=NODE_LOST,
        reason=FailureReason.evicted,
        exit_code=finished.exit_code,
    )
