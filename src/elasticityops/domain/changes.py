"""Whether a requested change still applies to an invocation as it stands now, and what it makes
of it: the decisions the store writes, each as one compare-and-set. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from elasticityops.domain.errors import InvalidTransition
from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, Note, add_note, advance
from elasticityops.domain.ports import Change


def apply_change(before: Invocation, change: Change) -> Invocation | None:
    """`before` moved as `change` asks, with its note; None when it no longer applies: the
    invocation left `change.from_states`, is on another attempt, or the table refuses the move."""
    if change.from_states is not None and before.state not in change.from_states:
        return None
    if change.attempt is not None and before.attempt != change.attempt:
        return None  # about an attempt that is over: the one running now is not its to change
    try:
        after = advance(
            before,
            change.to,
            change.at,
            exit_code=change.exit_code,
            reason=change.reason,
            message=change.message,
            node=change.node,
            gpu_type=change.gpu_type,
        )
    except InvalidTransition:
        return None  # the state moved on: a lost race, not an error
    return after if change.note is None else add_note(after, change.note)


def preempting(before: Invocation, by: str, note: Note) -> Invocation | None:
    """`before` marked as being preempted for `by`, with the note that says so; None when it is
    no longer pending or running, or is being preempted already."""
    if before.state not in ACTIVE_STATES or before.preempting_by is not None:
        return None
    return add_note(replace(before, preempting_by=by), note)


def cancel_requested(before: Invocation, at: datetime) -> Invocation | None:
    """`before` with a cancel recorded for the dispatcher that runs it; None when it is not
    pending or running, or has one recorded already."""
    if before.state not in ACTIVE_STATES or before.cancel_requested is not None:
        return None
    return replace(before, cancel_requested=at)
