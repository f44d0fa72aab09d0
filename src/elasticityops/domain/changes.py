"""Whether a requested transition (a `Change`) still applies to an invocation as it stands now,
and what it makes of it: the decision the store writes as one compare-and-set. Pure."""

from __future__ import annotations

from elasticityops.domain.errors import InvalidTransition
from elasticityops.domain.invocations import Invocation, add_note, advance
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
