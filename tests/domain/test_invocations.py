from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.errors import InvalidTransition
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import (
    TRANSITIONS,
    FailureReason,
    Invocation,
    State,
    Timeline,
    advance,
    callback_token,
    check_callback_token,
    mark_capacity_ready,
    new_invocation_id,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def fresh() -> Invocation:
    return Invocation(
        id="inv-1", function="f", state=State.queued, priority=Priority.normal, timeline=Timeline(accepted=T0)
    )


def test_happy_path_fills_the_timeline() -> None:
    inv = advance(fresh(), State.pending, at(2))
    inv = mark_capacity_ready(inv, at(40), node="slot-0")
    inv = advance(inv, State.running, at(45))
    inv = advance(inv, State.succeeded, at(60), exit_code=0)
    tl = inv.timeline
    assert (tl.dispatched, tl.capacity_ready, tl.started, tl.finished) == (at(2), at(40), at(45), at(60))
    assert inv.node == "slot-0"
    d = tl.durations()
    assert d == {
        "queue": 2.0,
        "capacity": 38.0,
        "start": 5.0,
        "run": 15.0,
        "time_to_start": 45.0,
        "total": 60.0,
    }


def test_terminal_states_have_no_way_out() -> None:
    for state in State:
        if state.terminal:
            assert TRANSITIONS[state] == frozenset()
            with pytest.raises(InvalidTransition):
                advance(
                    Invocation(
                        id="x",
                        function="f",
                        state=state,
                        priority=Priority.low,
                        timeline=Timeline(accepted=T0),
                    ),
                    State.running,
                    at(1),
                )


@pytest.mark.parametrize(
    ("start", "to"),
    [
        (State.queued, State.running),  # must be dispatched first
        (State.queued, State.succeeded),
        (State.running, State.pending),
        (State.succeeded, State.queued),  # only an active one is requeued (preemption)
        (State.pending, State.pending),
    ],
    ids=lambda v: str(v),
)
def test_invalid_transitions_are_refused(start: State, to: State) -> None:
    inv = Invocation(id="x", function="f", state=start, priority=Priority.low, timeline=Timeline(accepted=T0))
    with pytest.raises(InvalidTransition):
        advance(inv, to, at(1))


def test_cancel_and_timeout_set_their_reason() -> None:
    assert advance(fresh(), State.cancelled, at(1)).failure_reason is FailureReason.cancelled
    pending = advance(fresh(), State.pending, at(1))
    timed = advance(pending, State.timed_out, at(5))
    assert timed.failure_reason is FailureReason.timeout
    assert timed.timeline.finished == at(5)


def test_short_job_seen_only_at_its_end_still_has_a_start() -> None:
    inv = advance(advance(fresh(), State.pending, at(1)), State.succeeded, at(3), exit_code=0)
    assert inv.timeline.started == at(3)


def test_ids_sort_by_time_and_are_dns_safe() -> None:
    a = new_invocation_id(1_000_000_000_000_000_000)
    b = new_invocation_id(1_000_000_000_001_000_000)
    assert a < b
    assert len(a) <= 63
    assert a == a.lower()
    assert a.replace("-", "").isalnum()


def test_callback_tokens_are_per_invocation_and_checked() -> None:
    secret = b"s" * 32
    token = callback_token(secret, "inv-a")
    assert token == callback_token(secret, "inv-a")
    assert token != callback_token(secret, "inv-b")
    assert check_callback_token(secret, "inv-a", token)
    assert not check_callback_token(secret, "inv-b", token)
    assert not check_callback_token(b"t" * 32, "inv-a", token)


def test_milestones_never_go_backwards() -> None:
    # Kubernetes stamps a container's start and end in whole seconds: a pod that started 0.4 s
    # after dispatch can say it started 0.3 s before.
    inv = advance(fresh(), State.pending, at(10.3))
    inv = mark_capacity_ready(inv, at(10.0), node="gke-t4-1")
    inv = advance(inv, State.running, at(10.0))
    inv = advance(inv, State.failed, at(9.0), exit_code=1)
    tl = inv.timeline
    assert (tl.dispatched, tl.capacity_ready, tl.started, tl.finished) == (at(10.3),) * 4
    early = advance(advance(fresh(), State.pending, at(-1)), State.succeeded, at(-2))
    assert early.timeline.dispatched == T0, "not before it was accepted"
    assert early.timeline.started == early.timeline.finished == T0
