"""The dispatcher's decisions, as pure functions: events to store writes, restart recovery and
one admission cycle."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from elasticityops.dispatch.cycle import plan_cycle
from elasticityops.dispatch.reconcile import callback_url, plan_event, plan_recovery
from elasticityops.domain.functions import FunctionSpec, GpuSpec, Priority
from elasticityops.domain.invocations import FailureReason, Invocation, State, Timeline
from elasticityops.domain.ports import BackendEvent, EventKind

AT = datetime(2026, 1, 1, tzinfo=UTC)


def inv(
    inv_id: str = "inv-1",
    state: State = State.pending,
    function: str = "fn",
    priority: Priority = Priority.normal,
    result: bytes | None = None,
) -> Invocation:
    return Invocation(
        id=inv_id, function=function, state=state, priority=priority, timeline=Timeline(AT), result=result
    )


def event(kind: EventKind, **fields: object) -> BackendEvent:
    return BackendEvent("inv-1", kind, AT, **fields)  # type: ignore[arg-type]


FINISHED_CASES = [
    pytest.param({"exit_code": 0}, State.succeeded, id="success"),
    pytest.param({"exit_code": 2, "reason": FailureReason.exit_code}, State.failed, id="non-zero"),
    pytest.param({"reason": FailureReason.launch_error}, State.failed, id="launch-error"),
    pytest.param({"timed_out": True, "reason": FailureReason.timeout}, State.timed_out, id="timeout"),
    pytest.param({"cancelled": True, "reason": FailureReason.cancelled}, State.cancelled, id="cancelled"),
    pytest.param({"reason": FailureReason.lost}, State.failed, id="lost"),
]


@pytest.mark.parametrize(("fields", "to"), FINISHED_CASES)
@pytest.mark.parametrize("state", [State.pending, State.running])
def test_finished_becomes_its_terminal_state(fields: dict[str, object], to: State, state: State) -> None:
    plan = plan_event(inv(state=state), event(EventKind.finished, **fields))
    assert plan.change is not None
    assert plan.change.to is to
    assert plan.change.from_states == frozenset({State.pending, State.running})
    assert plan.frees_capacity


def test_finished_after_the_invocation_ended_only_frees_capacity() -> None:
    plan = plan_event(inv(state=State.cancelled), event(EventKind.finished, exit_code=143, cancelled=True))
    assert plan.change is None
    assert plan.result is None
    assert plan.frees_capacity


def test_result_file_is_kept_unless_the_job_posted_one() -> None:
    fresh = plan_event(inv(state=State.running), event(EventKind.finished, exit_code=0, result=b"{}"))
    assert fresh.result == b"{}"
    posted = plan_event(
        inv(state=State.running, result=b"posted"), event(EventKind.finished, exit_code=0, result=b"{}")
    )
    assert posted.result is None


def test_started_moves_pending_to_running_once() -> None:
    plan = plan_event(inv(), event(EventKind.started, node="slot-0"))
    assert plan.change is not None
    assert (plan.change.to, plan.change.node) == (State.running, "slot-0")
    assert plan_event(inv(state=State.running), event(EventKind.started)).change is None


def test_capacity_ready_and_notes() -> None:
    assert plan_event(inv(), event(EventKind.capacity_ready, node="slot-1")).capacity_ready == (AT, "slot-1")
    assert plan_event(inv(state=State.running), event(EventKind.capacity_ready)).capacity_ready is None
    note = plan_event(inv(), event(EventKind.note, note_kind="SlotWarming", message="cold")).note
    assert note is not None
    assert (note.kind, note.message) == ("SlotWarming", "cold")
    assert plan_event(inv(state=State.failed), event(EventKind.note, note_kind="X")).note is None


def test_unknown_invocation_is_ignored() -> None:
    plan = plan_event(None, event(EventKind.finished, exit_code=0))
    assert plan.change is None
    assert not plan.frees_capacity


def test_recovery_relaunches_pending_and_loses_running() -> None:
    active = [inv("a", State.pending), inv("b", State.running), inv("c", State.running)]
    plan = plan_recovery(active, ["a", "b"], AT)
    assert [i.id for i in plan.relaunch] == ["a"]
    assert [(c.id, c.to, c.reason) for c in plan.lose] == [("b", State.failed, FailureReason.lost)]
    assert plan.lose[0].from_states == frozenset({State.running})


def test_callback_url() -> None:
    assert (
        callback_url("http://127.0.0.1:8080/", "inv-1") == "http://127.0.0.1:8080/v1/invocations/inv-1/result"
    )
    assert callback_url(None, "inv-1") is None


def spec(name: str = "fn", gpus: int = 1, max_concurrency: int = 500) -> FunctionSpec:
    return FunctionSpec(name=name, command=["true"], gpu=GpuSpec(count=gpus), max_concurrency=max_concurrency)


def cycle(
    queued: list[Invocation], **kwargs: object
) -> tuple[list[str], list[tuple[str, FailureReason | None]]]:
    options: dict[str, object] = {
        "active_by_function": {},
        "functions": {"fn": spec()},
        "free_gpus": 10,
        "total_gpus": 10,
        "gpu_budget": None,
        "at": AT,
        **kwargs,
    }
    plan = plan_cycle(queued=queued, **options)  # type: ignore[arg-type]
    return [i.id for i in plan.admit], [(c.id, c.reason) for c in plan.fail]


def test_cycle_orders_by_priority_then_arrival_within_free_gpus() -> None:
    queued = [
        inv("a", State.queued, priority=Priority.low),
        inv("b", State.queued),
        inv("c", State.queued, priority=Priority.high),
        inv("d", State.queued),
    ]
    assert cycle(queued, free_gpus=3) == (["c", "b", "d"], [])


def test_cycle_fails_deleted_functions_and_impossible_gpu_counts() -> None:
    queued = [
        inv("a", State.queued, function="gone"),
        inv("b", State.queued, function="big"),
        inv("c", State.queued),
    ]
    admitted, failed = cycle(queued, functions={"fn": spec(), "big": spec("big", gpus=4)}, total_gpus=2)
    assert admitted == ["c"]
    assert failed == [("a", FailureReason.function_deleted), ("b", FailureReason.no_capacity)]


def test_cycle_respects_the_gpu_budget_and_max_concurrency() -> None:
    queued = [inv(str(i), State.queued) for i in range(5)]
    running = {"fn": 2}
    assert cycle(queued, active_by_function=running, gpu_budget=3)[0] == ["0"]
    capped = {"fn": spec(max_concurrency=4)}
    assert cycle(queued, active_by_function=running, functions=capped)[0] == ["0", "1"]
    # A deleted function's running invocations still count against the budget.
    assert cycle(queued, active_by_function={"gone": 2}, gpu_budget=3)[0] == ["0"]
