"""Whether a requested transition still applies to the invocation as it stands: the decision the
store writes as one compare-and-set (store.apply)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.changes import apply_change, cancel_requested, preempting
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import FailureReason, Invocation, Note, State, Timeline, advance
from elasticityops.domain.ports import Change

T0 = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
AT = T0 + timedelta(seconds=5)
QUEUED = frozenset({State.queued})


def _queued(attempt: int = 0) -> Invocation:
    return Invocation("inv-c", "fn", State.queued, Priority.normal, Timeline(accepted=T0), attempt=attempt)


def test_a_change_from_the_state_it_names_moves_the_invocation() -> None:
    after = apply_change(_queued(), Change("inv-c", State.pending, AT, from_states=QUEUED, gpu_type="t4"))
    assert after is not None
    assert after.state is State.pending
    assert after.timeline.dispatched == AT
    assert after.gpu_type == "t4"
    assert after.notes == ()


def test_a_change_carries_its_note_with_the_transition() -> None:
    note = Note(AT, "Cancelled", "by the user")
    after = apply_change(_queued(), Change("inv-c", State.cancelled, AT, note=note))
    assert after is not None
    assert after.state is State.cancelled
    assert after.failure_reason is FailureReason.cancelled
    assert after.notes == (note,)


@pytest.mark.parametrize(
    ("before", "change"),
    [
        pytest.param(
            advance(_queued(), State.pending, T0),
            Change("inv-c", State.failed, AT, from_states=QUEUED),
            id="left-its-from-states",
        ),
        pytest.param(
            _queued(attempt=2),
            Change("inv-c", State.cancelled, AT, attempt=1),
            id="about-an-attempt-that-is-over",
        ),
        pytest.param(_queued(), Change("inv-c", State.running, AT), id="a-move-the-table-refuses"),
        pytest.param(
            advance(_queued(), State.cancelled, T0), Change("inv-c", State.cancelled, AT), id="ended-already"
        ),
    ],
)
def test_a_change_that_no_longer_applies_changes_nothing(before: Invocation, change: Change) -> None:
    assert apply_change(before, change) is None


def _pending() -> Invocation:
    after = apply_change(_queued(), Change("inv-c", State.pending, T0, from_states=QUEUED, gpu_type="t4"))
    assert after is not None
    return after


def test_preempting_marks_an_active_invocation_once_with_its_note() -> None:
    note = Note(AT, "Preempting", "for inv-high")
    marked = preempting(_pending(), "inv-high", note)
    assert marked is not None
    assert (marked.preempting_by, marked.notes) == ("inv-high", (note,))
    assert preempting(marked, "inv-other", note) is None, "already being preempted"
    assert preempting(_queued(), "inv-high", note) is None, "not running: nothing to stop"


def test_a_cancel_is_recorded_once_and_only_on_active_work() -> None:
    asked = cancel_requested(_pending(), AT)
    assert asked is not None
    assert asked.cancel_requested == AT
    assert cancel_requested(asked, AT + timedelta(seconds=1)) is None, "the first request stands"
    assert cancel_requested(_queued(), AT) is None, "a queued one is cancelled in place, not asked"
