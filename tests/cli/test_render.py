"""How the CLI explains an invocation: pure functions over wire models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from elasticityops.cli import render, units
from elasticityops.domain.invocations import FailureReason, State
from elasticityops.wire import InvocationCostOut, InvocationOut, NoteOut, TimelineOut

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def inv(state: State, marks: dict[str, float], **kw: object) -> InvocationOut:
    timeline = TimelineOut(accepted=T0, **{k: at(v) for k, v in marks.items()})
    return InvocationOut(
        id="inv-1", function="hello", state=state, priority="normal", timeline=timeline, durations={}, **kw
    )


def test_a_finished_invocation_has_four_closed_phases() -> None:
    done = inv(State.succeeded, {"dispatched": 1, "capacity_ready": 31, "started": 33, "finished": 38})
    rows = render.phase_seconds(done, now=at(100))
    assert [(phase, spent, going) for phase, _, spent, going in rows] == [
        ("queue", 1.0, False),
        ("capacity", 30.0, False),
        ("start", 2.0, False),
        ("run", 5.0, False),
    ]


def test_a_waiting_invocation_counts_its_open_phase_up_to_now() -> None:
    waiting = inv(State.pending, {"dispatched": 2})
    rows = render.phase_seconds(waiting, now=at(14.5))
    assert [(phase, spent, going) for phase, _, spent, going in rows] == [
        ("queue", 2.0, False),
        ("capacity", 12.5, True),
    ]


def kueue_note(kind: str, seconds: float) -> NoteOut:
    return NoteOut(at=at(seconds), kind=kind, message=kind)


def test_through_kueue_the_wait_for_capacity_splits_at_kueues_admission() -> None:
    notes = [
        kueue_note("KueueQueued", 1.5),
        kueue_note("KueueQuotaReserved", 9),
        kueue_note("KueueAdmitted", 10),
    ]
    done = inv(
        State.succeeded,
        {"dispatched": 1, "capacity_ready": 31, "started": 33, "finished": 38},
        notes=notes,
    )
    rows = render.phase_seconds(done, now=at(100))
    assert [(phase, spent, going) for phase, _, spent, going in rows] == [
        ("queue", 1.0, False),
        ("kueue", 9.0, False),
        ("capacity", 21.0, False),
        ("start", 2.0, False),
        ("run", 5.0, False),
    ]


def test_an_invocation_in_kueues_queue_says_so_and_counts_up() -> None:
    waiting = inv(State.pending, {"dispatched": 2}, notes=[kueue_note("KueueQueued", 2.5)])
    rows = render.phase_seconds(waiting, now=at(14.5))
    assert [(phase, spent, going) for phase, _, spent, going in rows] == [
        ("queue", 2.0, False),
        ("kueue", 12.5, True),
    ]
    assert render.current_phase(waiting) == ("in Kueue's queue", at(2))
    admitted = inv(
        State.pending,
        {"dispatched": 2},
        notes=[kueue_note("KueueQueued", 2.5), kueue_note("KueueAdmitted", 8)],
    )
    assert render.current_phase(admitted) == ("waiting for a node", at(8))


def test_an_earlier_attempts_admission_does_not_count_for_the_current_one() -> None:
    notes = [kueue_note("KueueAdmitted", 3), kueue_note("KueueEvicted", 20), kueue_note("KueueQueued", 26)]
    requeued = inv(State.pending, {"dispatched": 25}, notes=notes)
    assert render.current_phase(requeued) == ("in Kueue's queue", at(25))


def test_a_cancelled_queued_invocation_shows_no_open_phase() -> None:
    cancelled = inv(State.cancelled, {"finished": 3})
    assert render.phase_seconds(cancelled, now=at(10)) == []


def test_the_timeline_shows_where_the_time_went() -> None:
    done = inv(
        State.failed,
        {"dispatched": 1, "capacity_ready": 31, "started": 33, "finished": 38},
        exit_code=3,
        failure_reason=FailureReason.exit_code,
        message="exited with 3",
        result={"partial": True},
        notes=[NoteOut(at=at(2), kind="SlotWarming", message="slot 0 is cold: provisioning")],
    )
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(done, now=at(40)))
    text = console.export_text()
    assert "capacity    30.0s  ████████████████████  waiting for a GPU" in text
    assert "run        5.000s  ███ " in text  # a sixth of the longest phase
    assert "exit code 3" in text
    assert "failure reason: exit_code" in text
    assert "message: exited with 3" in text
    assert "SlotWarming: slot 0 is cold: provisioning" in text
    assert '"partial": true' in text


@pytest.mark.parametrize(
    ("current", "says"),
    [
        pytest.param(
            inv(State.queued, {}),
            "in the queue, waiting for admission (a free GPU, the GPU budget, max_concurrency)",
            id="queued",
        ),
        pytest.param(inv(State.pending, {"dispatched": 1}), "waiting for a GPU slot", id="pending"),
        pytest.param(
            inv(State.pending, {"dispatched": 1, "capacity_ready": 2}, node="slot-1"),
            "GPU assigned on slot-1, starting",
            id="pending-assigned",
        ),
        pytest.param(
            inv(
                State.pending,
                {"dispatched": 1},
                notes=[NoteOut(at=at(1), kind="TriggeredScaleUp", message="a GPU node is being added")],
            ),
            "a GPU node is being added",
            id="pending-with-note",
        ),
        pytest.param(inv(State.running, {"started": 1}, node="slot-0"), "running on slot-0", id="running"),
    ],
)
def test_progress_explains_the_wait(current: InvocationOut, says: str) -> None:
    assert render.progress_line(current, 12.34).endswith(f": {says}")


@pytest.mark.parametrize(
    ("current", "line"),
    [
        pytest.param(inv(State.queued, {}), "queued 5.0s: in the queue", id="queued"),
        pytest.param(
            inv(State.pending, {"dispatched": 1}),
            "waiting for a GPU 4.0s (5.0s in all): waiting",
            id="pending",
        ),
        pytest.param(
            inv(State.pending, {"dispatched": 1, "capacity_ready": 3.5}),
            "starting 1.5s (5.0s in all): GPU assigned",
            id="starting",
        ),
        pytest.param(
            inv(State.running, {"dispatched": 0.1, "capacity_ready": 3.8, "started": 4}),
            "running 1.0s (5.0s in all): running",
            id="running",
        ),
    ],
)
def test_progress_names_the_phase_and_its_own_time(current: InvocationOut, line: str) -> None:
    # 5 s after it was accepted; a run that began 4 s in has run for 1 s, not 5.
    assert render.progress_line(current, 5.0).startswith(line)


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0.0123, "0.012s"), (12.34, "12.3s"), (754.0, "12m34s")],
)
def test_seconds(value: float | None, text: str) -> None:
    assert units.seconds(value) == text


def test_ids_are_never_cut_in_a_narrow_terminal() -> None:
    items = [
        inv(State.running, {"dispatched": 1, "started": 2}).model_copy(
            update={"id": "inv-01m8msz5t283r74t34ea7pdbjn", "function": "a-function-with-a-long-name"}
        )
    ]
    console = Console(width=60, record=True, color_system=None)
    console.print(render.invocations_table(items))
    assert "inv-01m8msz5t283r74t34ea7pdbjn" in console.export_text()


def test_a_queued_invocation_shows_its_queue_position_and_reason() -> None:
    reason = "the GPU budget for nvidia-tesla-t4 is full (5 of 5 in use)"
    queued = inv(State.queued, {}, queue_position=3, queue_reason=reason)
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(queued, now=at(5)))
    assert f"queue position 3: {reason}" in console.export_text()
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(inv(State.pending, {"dispatched": 1}), now=at(5)))
    assert "queue position" not in console.export_text()


def test_a_preempted_invocation_shows_its_attempt_and_when_it_was_preempted() -> None:
    note = NoteOut(at=at(4), kind="Preempted", message="preempted by inv-9; requeued as attempt 1")
    again = inv(State.queued, {"preempted": 4}, attempt=1, notes=[note], queue_position=1)
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(again, now=at(5)))
    text = console.export_text()
    assert "attempt 1" in text
    assert "last requeued" in text
    assert "Preempted: preempted by inv-9" in text
    first = Console(width=200, record=True, color_system=None)
    first.print(render.invocation_detail(inv(State.running, {"dispatched": 1, "started": 2}), now=at(5)))
    assert "attempt" not in first.export_text()
    assert "preempted" not in first.export_text()


def test_the_node_time_says_what_its_node_is_priced_as() -> None:
    cost = InvocationCostOut(node_seconds={"run": 60.0}, total_node_seconds=60.0, usd=0.004, open=True)
    on_spot = inv(
        State.running, {"dispatched": 1, "started": 2}, node="gpu-node-1", node_capacity="spot", cost=cost
    )
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(on_spot, now=at(62)))
    [line] = [ln for ln in console.export_text().splitlines() if ln.startswith("node time: ")]
    assert "node priced spot" in line
    unknown = on_spot.model_copy(update={"node": None, "node_capacity": None})
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(unknown, now=at(62)))
    assert "node priced" not in console.export_text(), "no node known: nothing said"


def test_the_worker_cluster_is_named_beside_the_node() -> None:
    there = inv(State.running, {"dispatched": 1, "started": 2}, node="gpu-node-1", cluster="worker-2")
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(there, now=at(5)))
    assert "on gpu-node-1, in cluster worker-2" in console.export_text()
    alone = there.model_copy(update={"cluster": None})
    console = Console(width=200, record=True, color_system=None)
    console.print(render.invocation_detail(alone, now=at(5)))
    assert "cluster" not in console.export_text()
