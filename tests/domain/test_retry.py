"""Requeue as the next attempt, or fail: one decision for preemption and for a lost node."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.events import Finished
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import FailureReason, Invocation, State, Timeline, advance
from elasticityops.domain.preemption import PREEMPTED, end_of_preemption
from elasticityops.domain.retry import NODE_LOST, PREEMPTED_OUTSIDE, end_of_lost_node

T0 = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
AT = T0 + timedelta(seconds=30)
GONE = "gke-eops-t4-7 went away: its node disappeared (spot preemption or node deleted)"
LOST = Finished.failed(AT, FailureReason.evicted, GONE, exit_code=143, lost_node="gke-eops-t4-7")


def _running(attempt: int = 0) -> Invocation:
    inv = Invocation("inv-l", "fn", State.queued, Priority.normal, Timeline(accepted=T0), attempt=attempt)
    inv = advance(inv, State.pending, T0 + timedelta(seconds=1))
    return advance(inv, State.running, T0 + timedelta(seconds=2), node="gke-eops-t4-7")


@pytest.mark.parametrize(
    ("attempt", "retries", "to", "says"),
    [
        pytest.param(0, 1, State.queued, "requeued as attempt 1 (retry 1 of 1)", id="retry-left-requeues"),
        pytest.param(1, 3, State.queued, "requeued as attempt 2 (retry 2 of 3)", id="second-retry-requeues"),
        pytest.param(0, 0, State.failed, "no retry left (0 of its function's 0 used)", id="no-retries-fails"),
        pytest.param(
            1, 1, State.failed, "no retry left (1 of its function's 1 used)", id="retries-used-fails"
        ),
    ],
)
def test_a_lost_node_requeues_while_retries_last(attempt: int, retries: int, to: State, says: str) -> None:
    inv = _running(attempt)
    change = end_of_lost_node(inv, LOST, retries, AT)
    assert change is not None
    assert (change.to, change.attempt) == (to, attempt)
    assert change.from_states == frozenset({State.pending, State.running})
    assert change.message is not None
    assert change.message.startswith(f"node lost: {GONE}")
    assert says in change.message
    assert change.note is not None
    assert (change.note.kind, change.note.message) == (NODE_LOST, change.message)
    after = advance(
        inv, change.to, AT, reason=change.reason, message=change.message, exit_code=change.exit_code
    )
    if to is State.queued:
        assert (after.attempt, after.node, after.failure_reason) == (attempt + 1, None, None)
        assert after.timeline == Timeline(accepted=T0, preempted=AT)
    else:
        assert (after.failure_reason, after.exit_code, after.attempt) == (FailureReason.evicted, 143, attempt)
        assert "gke-eops-t4-7" in after.message


@pytest.mark.parametrize(
    ("inv", "finished"),
    [
        pytest.param(
            _running(),
            Finished.failed(AT, FailureReason.evicted, "The node was low on resource: memory."),
            id="eviction-that-kept-its-node",
        ),
        pytest.param(advance(_running(), State.cancelled, AT), LOST, id="ended-meanwhile"),
        pytest.param(replace(_running(), preempting_by="inv-h"), LOST, id="being-preempted"),
        pytest.param(advance(_running(), State.queued, AT), LOST, id="between-attempts"),
    ],
)
def test_only_a_lost_node_of_the_running_attempt_is_retried(inv: Invocation, finished: Finished) -> None:
    assert end_of_lost_node(inv, finished, 5, AT) is None


def test_preemption_and_a_lost_node_share_the_requeue() -> None:
    victim = replace(_running(), preempting_by="inv-h")
    preempted = end_of_preemption(victim, 1, AT)
    lost = end_of_lost_node(_running(), LOST, 1, AT)
    assert lost is not None
    assert lost.note is not None
    assert preempted.note is not None
    assert (preempted.to, preempted.attempt) == (lost.to, lost.attempt) == (State.queued, 0)
    assert (preempted.note.kind, lost.note.kind) == (PREEMPTED, NODE_LOST)
    assert preempted.message == "preempted by inv-h; requeued as attempt 1 (retry 1 of 1)"


def test_a_lost_node_is_an_eviction() -> None:
    with pytest.raises(ValueError, match="a lost node is an eviction"):
        Finished.failed(AT, FailureReason.exit_code, "exit code 1", lost_node="n")


KUEUE_SAID = (
    "Kueue preempted it: Preempted: Preempted to accommodate a workload (UID: 1) due to prioritization"
)


@pytest.mark.parametrize(
    ("retries", "to", "reason"),
    [
        pytest.param(1, State.queued, None, id="retry-left-requeues"),
        pytest.param(0, State.failed, FailureReason.preempted, id="no-retries-fails-preempted"),
    ],
)
def test_a_preemption_by_kueue_is_retried_as_the_gateways_own(
    retries: int, to: State, reason: FailureReason | None
) -> None:
    """Kueue owns admission with --admission kueue: its preemption of a running attempt is
    counted against the function's retries exactly as the gateway's own preemption is."""
    by_kueue = Finished(
        State.failed, AT, reason=FailureReason.preempted, message=KUEUE_SAID, preempted_by="Kueue"
    )
    change = end_of_lost_node(_running(), by_kueue, retries, AT)
    assert change is not None
    assert (change.to, change.reason, change.attempt) == (to, reason, 0)
    assert change.note is not None
    assert change.note.kind == PREEMPTED_OUTSIDE
    assert change.message is not None
    assert change.message.startswith(KUEUE_SAID)
    # Being preempted by the gateway itself already: the gateway's preemption decides.
    assert end_of_lost_node(replace(_running(), preempting_by="inv-h"), by_kueue, 1, AT) is None


def test_a_preemption_from_outside_carries_reason_preempted() -> None:
    with pytest.raises(ValueError, match="a preemption carries reason preempted"):
        Finished(State.failed, AT, reason=FailureReason.evicted, message="x", preempted_by="Kueue")
