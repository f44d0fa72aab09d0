"""A backend event folded into its invocation (`apply_event`): the one place where an observation
becomes a state, and `Finished`, the one outcome both backends report."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.events import BackendEvent, Finished, apply_event, finished_event, note_event
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import FailureReason, Invocation, Note, State, Timeline, advance
from elasticityops.pricing.table import Capacity

AT = datetime(2026, 11, 29, 12, tzinfo=UTC)
LATER = AT + timedelta(seconds=30)


def inv(state: State = State.pending, result: bytes | None = None) -> Invocation:
    timeline = Timeline(accepted=AT, dispatched=AT if state is not State.queued else None)
    return Invocation(
        id="inv-1", function="fn", state=state, priority=Priority.normal, timeline=timeline, result=result
    )


ENDINGS = [
    pytest.param(Finished.succeeded(LATER), State.succeeded, None, id="success"),
    pytest.param(
        Finished.failed(LATER, FailureReason.exit_code, "exit code 2", exit_code=2),
        State.failed,
        FailureReason.exit_code,
        id="non-zero",
    ),
    pytest.param(
        Finished.failed(LATER, FailureReason.launch_error, "no such file"),
        State.failed,
        FailureReason.launch_error,
        id="launch-error",
    ),
    pytest.param(Finished.timed_out(LATER, "ran past"), State.timed_out, FailureReason.timeout, id="timeout"),
    pytest.param(Finished.cancelled(LATER), State.cancelled, FailureReason.cancelled, id="cancelled"),
    pytest.param(
        Finished.failed(LATER, FailureReason.evicted, "node gone"),
        State.failed,
        FailureReason.evicted,
        id="evicted",
    ),
]


@pytest.mark.parametrize(("end", "state", "reason"), ENDINGS)
@pytest.mark.parametrize("before", [State.pending, State.running])
def test_the_end_is_the_state_the_backend_reported(
    end: Finished, state: State, reason: FailureReason | None, before: State
) -> None:
    after = apply_event(inv(before), finished_event("inv-1", end, node="gpu-7"))
    assert after.state is state
    assert after.failure_reason is reason
    assert after.timeline.finished == LATER
    assert after.node == "gpu-7"
    assert after.message == end.message


@pytest.mark.parametrize("ended", [State.succeeded, State.failed, State.cancelled, State.timed_out])
def test_an_ended_invocation_is_left_as_it_is(ended: State) -> None:
    done = inv(ended)
    for event in (
        finished_event("inv-1", Finished.succeeded(LATER, result=b"late")),
        note_event("inv-1", LATER, "Unschedulable", "no node"),
        BackendEvent("inv-1", started=LATER),
    ):
        assert apply_event(done, event) is done


def test_a_result_the_job_posted_wins_over_its_result_file() -> None:
    file_only = apply_event(
        inv(State.running), finished_event("inv-1", Finished.succeeded(LATER, result=b"{}"))
    )
    assert file_only.result == b"{}"
    posted = inv(State.running, result=b"posted")
    after = apply_event(posted, finished_event("inv-1", Finished.succeeded(LATER, result=b"{}")))
    assert after.result == b"posted"


def test_a_short_job_seen_at_its_end_tells_every_milestone_in_one_event() -> None:
    event = BackendEvent(
        "inv-1",
        node="slot-0",
        capacity_ready=AT + timedelta(seconds=1),
        started=AT + timedelta(seconds=2),
        finished=Finished.succeeded(AT + timedelta(seconds=3)),
    )
    after = apply_event(inv(), event)
    assert after.state is State.succeeded
    timeline = after.timeline
    assert (timeline.capacity_ready, timeline.started, timeline.finished) == (
        AT + timedelta(seconds=1),
        AT + timedelta(seconds=2),
        AT + timedelta(seconds=3),
    )


def test_started_moves_pending_to_running_once() -> None:
    running = apply_event(inv(), BackendEvent("inv-1", node="slot-0", started=LATER))
    assert (running.state, running.node, running.timeline.started) == (State.running, "slot-0", LATER)
    assert apply_event(running, BackendEvent("inv-1", started=LATER + timedelta(seconds=9))) == running


def test_capacity_ready_only_while_pending() -> None:
    ready = apply_event(inv(), BackendEvent("inv-1", node="gpu-1", capacity_ready=LATER))
    assert (ready.state, ready.timeline.capacity_ready, ready.node) == (State.pending, LATER, "gpu-1")
    running = inv(State.running)
    assert apply_event(running, BackendEvent("inv-1", capacity_ready=LATER)) == running


def test_notes_are_kept_until_the_end() -> None:
    noted = apply_event(inv(State.queued), note_event("inv-1", LATER, "SlotWarming", "cold"))
    assert noted.notes == (Note(LATER, "SlotWarming", "cold"),)
    assert noted.state is State.queued


def test_a_note_its_kind_said_last_is_kept_once() -> None:
    """A relist after a restart tells a Workload's or pod's state again: the timeline keeps each
    step once, and a step that changes (or comes back after another) is kept again."""
    waiting = note_event("inv-1", AT, "KueueQueued", "Kueue: waiting: insufficient quota")
    admitted = note_event("inv-1", LATER, "KueueAdmitted", "Kueue: admitted by ClusterQueue eops")
    after = apply_event(
        apply_event(inv(), waiting),
        replace(waiting, note=Note(LATER, "KueueQueued", "Kueue: waiting: insufficient quota")),
    )
    assert [n.kind for n in after.notes] == ["KueueQueued"]
    after = apply_event(apply_event(after, admitted), admitted)
    assert [n.kind for n in after.notes] == ["KueueQueued", "KueueAdmitted"]
    requeued = note_event("inv-1", LATER, "KueueQueued", "Kueue: waiting: the ClusterQueue is stopped")
    assert [n.kind for n in apply_event(after, requeued).notes] == [
        "KueueQueued",
        "KueueAdmitted",
        "KueueQueued",
    ]


def test_a_dispatch_back_to_the_worker_multikueue_took_it_from_is_kept_again() -> None:
    """MultiKueue took the work back from worker-1 (a worker lost) and dispatched it there again:
    the timeline has both dispatches, around the note that took the first back."""
    there = "Kueue: MultiKueue runs it in cluster worker-1"
    dispatched = note_event("inv-1", AT, "KueueDispatched", there)
    left = note_event(
        "inv-1", LATER, "KueueLeftWorker", "Kueue: MultiKueue took it back from cluster worker-1"
    )
    after = apply_event(apply_event(apply_event(inv(), dispatched), dispatched), left)
    assert [n.kind for n in after.notes] == ["KueueDispatched", "KueueLeftWorker"]
    again = apply_event(after, replace(dispatched, note=Note(LATER, "KueueDispatched", there)))
    assert [n.kind for n in again.notes] == ["KueueDispatched", "KueueLeftWorker", "KueueDispatched"]


def test_a_nomination_of_the_same_worker_after_it_was_taken_back_is_kept_again() -> None:
    """The gateway nominated worker-1, MultiKueue took the work back from it, and the gateway
    nominates worker-1 again (the only one left): both nominations are in the timeline."""
    said = "Kueue: the gateway nominated cluster worker-1 to MultiKueue (0 of its workloads waiting there)"
    nominated = note_event("inv-1", AT, "KueueNominated", said)
    left = note_event(
        "inv-1", LATER, "KueueLeftWorker", "Kueue: MultiKueue took it back from cluster worker-1"
    )
    after = apply_event(apply_event(apply_event(inv(), nominated), left), nominated)
    assert [n.kind for n in after.notes] == ["KueueNominated", "KueueLeftWorker", "KueueNominated"]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        pytest.param(lambda: Finished(State.running, AT), "terminal", id="not-terminal"),
        pytest.param(lambda: Finished(State.failed, AT), "names its reason", id="failure-without-reason"),
        pytest.param(
            lambda: Finished(State.succeeded, AT, reason=FailureReason.exit_code),
            "no failure",
            id="success-with-reason",
        ),
        pytest.param(
            lambda: Finished(State.timed_out, AT, reason=FailureReason.exit_code),
            "timeout",
            id="timeout-mislabelled",
        ),
        pytest.param(lambda: Finished(State.cancelled, AT), "cancelled", id="cancel-without-reason"),
    ],
)
def test_an_outcome_that_contradicts_itself_is_refused(make: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("attempt", "seen", "counts"),
    [(0, None, True), (0, 0, True), (1, 1, True), (1, 0, False), (2, 1, False)],
    ids=["unknown-attempt", "same-0", "same-1", "older-attempt", "older-by-one"],
)
def test_only_news_of_the_current_attempt_counts(attempt: int, seen: int | None, counts: bool) -> None:
    current = replace(inv(State.running), attempt=attempt)
    event = BackendEvent("inv-1", finished=Finished.failed(LATER, FailureReason.exit_code, "x", exit_code=1))
    after = apply_event(current, replace(event, attempt=seen))
    assert (after.state is State.failed) is counts


def test_a_requeued_invocation_hears_nothing_of_its_stopped_job() -> None:
    between = replace(inv(State.queued), attempt=1)
    told = BackendEvent("inv-1", started=LATER, note=Note(LATER, "Killing", "stopping"))
    assert apply_event(between, told) is between


@pytest.mark.parametrize(
    ("end", "to"),
    [
        (Finished.cancelled(LATER), State.running),
        (Finished.failed(LATER, FailureReason.lost, "its Job was deleted"), State.running),
        (Finished.failed(LATER, FailureReason.exit_code, "killed", exit_code=143), State.running),
        (Finished.succeeded(LATER, result=b"1"), State.succeeded),
    ],
    ids=["cancelled", "lost", "killed", "a-success-still-counts"],
)
def test_while_being_preempted_only_a_success_ends_it(end: Finished, to: State) -> None:
    victim = replace(inv(State.running), preempting_by="inv-high")
    after = apply_event(victim, finished_event("inv-1", end))
    assert after.state is to
    if to is State.succeeded:
        assert after.preempting_by is None


def test_where_its_node_time_starts_is_kept_from_the_first_placement() -> None:
    placed = apply_event(
        inv(), BackendEvent("inv-1", node="n1", capacity_ready=LATER, node_since=AT, warm=False)
    )
    assert (placed.node_since, placed.warm) == (AT, False)
    relisted = apply_event(placed, BackendEvent("inv-1", node="n1", node_since=LATER, warm=True))
    assert (relisted.node_since, relisted.warm) == (AT, False), "a relist after a restart changes nothing"
    requeued = advance(placed, State.queued, LATER)
    assert (requeued.node_since, requeued.warm) == (None, False), "the next attempt has a node of its own"


def test_its_nodes_capacity_comes_with_the_placement_and_goes_with_the_attempt() -> None:
    placed = apply_event(
        inv(),
        BackendEvent("inv-1", node="n1", capacity_ready=LATER, node_since=AT, node_capacity=Capacity.spot),
    )
    assert placed.node_capacity is Capacity.spot
    relisted = apply_event(placed, BackendEvent("inv-1", node="n1", node_capacity=Capacity.on_demand))
    assert relisted.node_capacity is Capacity.spot, "the first word stands"
    requeued = advance(placed, State.queued, LATER)
    assert requeued.node_capacity is None, "the next attempt's node says its own"


def test_the_worker_cluster_is_recorded_the_latest_word_stands_and_it_goes_with_the_attempt() -> None:
    note = Note(at=AT, kind="KueueDispatched", message="Kueue: MultiKueue runs it in cluster worker-1")
    there = apply_event(inv(), BackendEvent("inv-1", note=note, cluster="worker-1"))
    assert there.cluster == "worker-1"
    assert there.notes[-1] == note
    # Evicted on its worker and admitted by another in the same attempt: it runs there now.
    moved = apply_event(there, BackendEvent("inv-1", cluster="worker-2"))
    assert moved.cluster == "worker-2"
    assert apply_event(moved, BackendEvent("inv-1", node="n1")).cluster == "worker-2"
    requeued = advance(moved, State.queued, LATER)
    assert requeued.cluster is None, "the next attempt's cluster says its own"
