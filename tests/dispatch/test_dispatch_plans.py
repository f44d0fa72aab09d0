"""The dispatcher's decisions, as pure functions: cancel, restart recovery and one admission
cycle. (What a backend event does is tests/domain/test_events.py.)"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from elasticityops.dispatch.cycle import plan_cycle
from elasticityops.dispatch.reconcile import callback_url, plan_cancel, plan_recovery
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.errors import Conflict
from elasticityops.domain.functions import FunctionSpec, GpuSpec, Priority
from elasticityops.domain.invocations import FailureReason, Invocation, State, Timeline

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


def test_recovery_relaunches_pending_and_loses_running() -> None:
    active = [inv("a", State.pending), inv("b", State.running), inv("c", State.running)]
    plan = plan_recovery(active, ["a", "b"], AT)
    assert [i.id for i in plan.relaunch] == ["a"]
    assert [(c.id, c.to, c.reason) for c in plan.lose] == [("b", State.failed, FailureReason.lost)]
    assert plan.lose[0].from_states == frozenset({State.running})


@pytest.mark.parametrize(
    ("state", "from_states", "stop_backend"),
    [
        pytest.param(State.queued, {State.queued}, False, id="queued-never-runs"),
        pytest.param(State.pending, {State.pending, State.running}, True, id="pending-stops-its-job"),
        pytest.param(State.running, {State.pending, State.running}, True, id="running-stops-its-job"),
    ],
)
def test_cancel_of_an_active_or_queued_invocation(
    state: State, from_states: set[State], stop_backend: bool
) -> None:
    plan = plan_cancel(inv(state=state), AT)
    assert plan.change is not None
    assert (plan.change.to, plan.change.from_states) == (State.cancelled, frozenset(from_states))
    assert plan.stop_backend is stop_backend


def test_cancelling_a_cancelled_invocation_again_changes_nothing() -> None:
    plan = plan_cancel(inv(state=State.cancelled), AT)
    assert (plan.change, plan.stop_backend) == (None, False)


@pytest.mark.parametrize("state", [State.succeeded, State.failed, State.timed_out])
def test_an_invocation_that_ended_otherwise_cannot_be_cancelled(state: State) -> None:
    with pytest.raises(Conflict, match=f"already ended \\({state.value}\\)"):
        plan_cancel(inv(state=state), AT)


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
    # Active counts by function name alone mean version 1 of each; by (name, version), on the
    # spec's first GPU type (a row from before the type was kept).
    by_function: dict[str, int] = options.pop("active_by_function")  # type: ignore[assignment]
    options.setdefault("active", {(name, 1): n for name, n in by_function.items()})
    given: dict[tuple[str, ...], int] = options["active"]  # type: ignore[assignment]
    active = {(key[0], key[1], key[2] if len(key) > 2 else None): n for key, n in given.items()}
    options["active"] = active
    if "versions" not in options:  # each invocation asks for its function's current spec
        specs: dict[str, FunctionSpec] = options["functions"]  # type: ignore[assignment]
        keys = [(i.function, i.spec_version) for i in queued] + [(n, v) for n, v, _ in active]
        options["versions"] = {key: specs[key[0]] for key in keys if key[0] in specs}
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
    assert cycle(queued, active_by_function=running, gpu_budget=GpuBudget(total=3))[0] == ["0"]
    capped = {"fn": spec(max_concurrency=4)}
    assert cycle(queued, active_by_function=running, functions=capped)[0] == ["0", "1"]
    # A deleted function's running invocations still count against the budget.
    assert cycle(queued, active_by_function={"gone": 2}, gpu_budget=GpuBudget(total=3))[0] == ["0"]


def test_cycle_asks_for_the_gpus_of_the_version_each_invocation_was_accepted_with() -> None:
    queued = [inv("old", State.queued), replace(inv("new", State.queued), spec_version=2)]
    admitted, failed = cycle(
        queued,
        functions={"fn": spec(gpus=4)},
        versions={("fn", 1): spec(gpus=1), ("fn", 2): spec(gpus=4)},
        free_gpus=3,
        total_gpus=4,
    )
    assert (admitted, failed) == (["old"], [])


def test_cycle_fails_an_invocation_whose_version_was_never_kept() -> None:
    admitted, failed = cycle([inv("a", State.queued)], versions={})
    assert (admitted, failed) == ([], [("a", FailureReason.launch_error)])


def test_the_gpus_held_are_those_of_the_version_each_active_invocation_runs() -> None:
    queued = [inv("a", State.queued)]
    # Two running under version 1 (1 GPU each), none yet under the current version 2 (4 GPUs).
    versions = {("fn", 1): spec(gpus=1), ("fn", 2): spec(gpus=4)}
    admitted, _ = cycle(
        queued,
        functions={"fn": spec(gpus=4)},
        active={("fn", 1): 2},
        versions=versions,
        gpu_budget=GpuBudget(total=3),
    )
    assert admitted == ["a"], "2 GPUs held, not 8: the budget of 3 has room for the 1 that a needs"


T4, L4 = "nvidia-tesla-t4", "nvidia-l4"


def typed(name: str, kind: str, gpus: int = 1) -> FunctionSpec:
    return FunctionSpec(name=name, command=["true"], gpu=GpuSpec(count=gpus, written=kind))


def test_cycle_counts_gpus_in_use_per_type_and_a_full_type_blocks_only_itself() -> None:
    functions = {"t": typed("t", T4), "l": typed("l", L4)}
    queued = [inv("t1", State.queued, function="t"), inv("l1", State.queued, function="l")]
    queued += [inv("t2", State.queued, function="t"), inv("l2", State.queued, function="l")]
    budget = GpuBudget(per_type=((T4, 5), (L4, 2)))
    admitted, failed = cycle(queued, functions=functions, active={("t", 1): 5}, gpu_budget=budget)
    assert (admitted, failed) == (["l1", "l2"], [])
    admitted, _ = cycle(queued, functions=functions, active={("t", 1): 4, ("l", 1): 1}, gpu_budget=budget)
    assert admitted == ["l1", "t1"], "l has fewer running: its turn comes first (domain/admission.py)"


def test_headroom_held_for_a_type_counts_against_its_budget() -> None:
    functions = {"t": typed("t", T4)}
    queued = [inv(str(i), State.queued, function="t") for i in range(4)]
    budget = GpuBudget(per_type=((T4, 4),))
    assert cycle(queued, functions=functions, gpu_budget=budget)[0] == ["0", "1", "2", "3"]
    assert cycle(queued, functions=functions, gpu_budget=budget, headroom={T4: 3})[0] == ["0"]
    assert cycle(queued, functions=functions, gpu_budget=GpuBudget(total=4), headroom={L4: 2})[0] == [
        "0",
        "1",
    ]


def test_an_invocation_bigger_than_its_types_budget_fails_at_once() -> None:
    functions = {"big": typed("big", L4, gpus=4), "t": typed("t", T4, gpus=4)}
    queued = [inv("big", State.queued, function="big"), inv("t", State.queued, function="t")]
    admitted, failed = cycle(queued, functions=functions, gpu_budget=GpuBudget(per_type=((L4, 3),)))
    assert (admitted, failed) == (["t"], [("big", FailureReason.no_capacity)])
    plan = plan_cycle(
        queued=queued[:1],
        active={},
        functions=functions,
        versions={("big", 1): functions["big"]},
        free_gpus=None,
        total_gpus=None,
        gpu_budget=GpuBudget(per_type=((L4, 3),)),
        at=AT,
    )
    message = plan.fail[0].message
    assert message is not None
    assert "the GPU budget for nvidia-l4 allows at most 3 GPUs" in message
    assert "EOPS_GPU_BUDGET" in message


def test_the_plan_says_when_to_read_further_back_in_the_queue() -> None:
    functions = {"t": typed("t", T4)}
    queued = [inv(str(i), State.queued, function="t") for i in range(3)]
    budget = GpuBudget(per_type=((T4, 1),))

    def further(**kwargs: object) -> bool:
        plan = plan_cycle(
            queued=queued,
            active={},
            functions=functions,
            versions={("t", 1): functions["t"]},
            total_gpus=None,
            at=AT,
            **kwargs,  # type: ignore[arg-type]
        )
        return plan.look_further

    assert further(free_gpus=None, gpu_budget=budget), "T4 is full: another type may be behind"
    assert further(free_gpus=5, gpu_budget=budget)
    assert not further(free_gpus=1, gpu_budget=budget), "the one free slot is taken"
    assert not further(free_gpus=None, gpu_budget=None), "everything read was admitted"


def spilling(name: str, *kinds: str, gpus: int = 1) -> FunctionSpec:
    return FunctionSpec(name=name, command=["true"], gpu=GpuSpec(count=gpus, written=list(kinds)))


def test_the_plan_says_which_type_each_admitted_invocation_runs_on() -> None:
    functions = {"s": spilling("s", T4, L4)}
    queued = [inv(str(i), State.queued, function="s") for i in range(4)]
    plan = plan_cycle(
        queued=queued,
        active={("s", 1, T4): 1},
        functions=functions,
        versions={("s", 1): functions["s"]},
        free_gpus=None,
        total_gpus=None,
        gpu_budget=GpuBudget(per_type=((T4, 2), (L4, 2))),
        at=AT,
    )
    assert [(i.id, i.gpu_type) for i in plan.admit] == [("0", T4), ("1", L4), ("2", L4)]


def test_active_work_counts_under_the_type_it_was_admitted_on() -> None:
    functions = {"s": spilling("s", T4, L4), "t": typed("t", T4)}
    queued = [inv("t1", State.queued, function="t")]
    budget = GpuBudget(per_type=((T4, 2), (L4, 2)))
    # Two of "s" hold L4s, not T4s: the T4 budget still has room for t1.
    admitted, _ = cycle(queued, functions=functions, active={("s", 1, L4): 2}, gpu_budget=budget)
    assert admitted == ["t1"]
    admitted, _ = cycle(queued, functions=functions, active={("s", 1, T4): 2}, gpu_budget=budget)
    assert admitted == []
    # A row from before the type was kept counts under the spec's first type.
    admitted, _ = cycle(queued, functions=functions, active={("s", 1, None): 2}, gpu_budget=budget)
    assert admitted == []


def test_a_type_it_can_never_fit_is_skipped_and_one_fitting_none_fails() -> None:
    functions = {"s": spilling("s", T4, L4, gpus=4), "t": typed("t", T4)}
    queued = [inv("s1", State.queued, function="s"), inv("t1", State.queued, function="t")]
    budget = GpuBudget(per_type=((T4, 2), (L4, 4)))
    plan = plan_cycle(
        queued=queued,
        active={("s", 1, L4): 1},
        functions=functions,
        versions={("s", 1): functions["s"], ("t", 1): functions["t"]},
        free_gpus=None,
        total_gpus=None,
        gpu_budget=budget,
        at=AT,
    )
    # s1 waits for L4 (never T4, which holds 2): T4 is not held back for it.
    assert [(i.id, i.gpu_type) for i in plan.admit] == [("t1", T4)]
    _, failed = cycle(queued[:1], functions=functions, gpu_budget=GpuBudget(per_type=((T4, 2), (L4, 3))))
    assert failed == [("s1", FailureReason.no_capacity)]
    never = plan_cycle(
        queued=queued[:1],
        active={},
        functions=functions,
        versions={("s", 1): functions["s"]},
        free_gpus=None,
        total_gpus=None,
        gpu_budget=GpuBudget(per_type=((T4, 2), (L4, 3))),
        at=AT,
    )
    message = never.fail[0].message
    assert message is not None
    assert "the GPU budget for nvidia-tesla-t4 and nvidia-l4 allows at most 3 GPUs" in message
