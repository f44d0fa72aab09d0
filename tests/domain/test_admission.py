from __future__ import annotations

import pytest

from elasticityops.domain.admission import AdmissionSnapshot, QueuedItem, admission, admit, gpus_free
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.functions import FunctionSpec, GpuSpec, Priority
from elasticityops.domain.gpus_held import UNKNOWN_GPU_TYPE, gpus_held_by_cluster, gpus_held_by_type

N, H, L = Priority.normal, Priority.high, Priority.low


def snap(
    queued: list[QueuedItem],
    free: int | None = None,
    budget: int | None = None,
    active: dict[str, int] | None = None,
    limits: dict[str, int] | None = None,
    rooms: dict[str, int] | None = None,
) -> AdmissionSnapshot:
    return AdmissionSnapshot(
        queued=queued,
        free_gpus=free,
        gpu_budget_left=budget,
        active_by_function=active or {},
        max_concurrency=limits or {},
        type_room=rooms or {},
    )


T4, L4 = "nvidia-tesla-t4", "nvidia-l4"


def q(i: str, fn: str = "f", prio: Priority = N, gpus: int = 1, kind: str = T4) -> QueuedItem:
    return QueuedItem(id=i, function=fn, priority=prio, gpus=gpus, gpu_type=kind)


def test_fifo_within_free_slots() -> None:
    assert admit(snap([q("a"), q("b"), q("c")], free=2)) == ["a", "b"]


def test_priority_before_arrival() -> None:
    assert admit(snap([q("a", prio=L), q("b"), q("c", prio=H)], free=2)) == ["c", "b"]


def test_unbounded_backend_admits_everything() -> None:
    assert admit(snap([q("a"), q("b")])) == ["a", "b"]


def test_quota_budget_caps_an_unbounded_backend() -> None:
    assert admit(snap([q("a"), q("b"), q("c")], budget=1)) == ["a"]


def test_the_smaller_of_free_and_budget_wins() -> None:
    assert admit(snap([q("a"), q("b"), q("c")], free=3, budget=2)) == ["a", "b"]


def test_function_at_max_concurrency_is_skipped_not_blocking() -> None:
    got = admit(snap([q("a", "busy"), q("b", "other")], free=5, active={"busy": 2}, limits={"busy": 2}))
    assert got == ["b"]


def test_max_concurrency_counts_admissions_in_the_same_cycle() -> None:
    got = admit(snap([q("a"), q("b"), q("c")], free=5, limits={"f": 2}))
    assert got == ["a", "b"]


def test_a_big_job_at_the_head_is_not_overtaken() -> None:
    assert admit(snap([q("big", gpus=4), q("small")], free=2)) == []


def test_nothing_free_nothing_admitted() -> None:
    assert admit(snap([q("a")], free=0)) == []


def test_gpus_held_count_each_versions_gpus_and_one_for_a_version_not_kept() -> None:
    def spec(name: str, gpus: int) -> FunctionSpec:
        return FunctionSpec(name=name, command=["true"], gpu=GpuSpec(count=gpus))

    active: dict[tuple[str, int, str | None], int] = {
        ("a", 1, None): 3,
        ("b", 1, None): 2,
        ("b", 2, None): 1,
        ("gone", 1, None): 2,
    }
    versions = {("a", 1): spec("a", 1), ("b", 1): spec("b", 4), ("b", 2): spec("b", 2)}
    assert sum(gpus_held_by_type(active, versions).values()) == 3 + 8 + 2 + 2


def test_gpus_held_by_cluster_count_as_by_type_within_each_cluster() -> None:
    versions = {("a", 1): FunctionSpec(name="a", command=["true"], gpu=GpuSpec(count=2))}
    active = {
        ("worker-2", "a", 1, T4): 3,
        ("worker-1", "a", 1, "nvidia-l4"): 1,
        ("worker-1", "gone", 1, None): 2,
    }
    assert gpus_held_by_cluster(active, versions) == {
        "worker-1": {"nvidia-l4": 2, UNKNOWN_GPU_TYPE: 2},
        "worker-2": {T4: 6},
    }
    assert list(gpus_held_by_cluster(active, versions)) == ["worker-1", "worker-2"], "in name order"


@pytest.mark.parametrize(
    ("in_use", "budget", "backend", "free"),
    [
        pytest.param(3, None, None, None, id="no-limit-at-all"),
        pytest.param(3, 8, None, 5, id="budget-only"),
        pytest.param(9, 8, None, 0, id="over-budget-is-zero"),
        pytest.param(3, None, 2, 2, id="backend-only"),
        pytest.param(3, 8, 2, 2, id="backend-smaller"),
        pytest.param(7, 8, 2, 1, id="budget-smaller"),
    ],
)
def test_gpus_free_is_the_smaller_of_the_budgets_room_and_the_backends(
    in_use: int, budget: int | None, backend: int | None, free: int | None
) -> None:
    total = None if budget is None else GpuBudget(total=budget)
    assert gpus_free({T4: in_use}, total, backend) == free


def test_a_per_type_budget_leaves_the_total_to_the_backend_and_headroom_counts_overall() -> None:
    per_type = GpuBudget(per_type=((T4, 5),))
    assert gpus_free({T4: 5}, per_type, None) is None
    assert gpus_free({T4: 5}, per_type, 3) == 3
    assert gpus_free({T4: 2, L4: 1}, GpuBudget(total=8), None, headroom={L4: 2}) == 3


def test_a_full_t4_budget_does_not_block_l4_work() -> None:
    queued = [q("t1"), q("t2"), q("l1", kind=L4), q("t3"), q("l2", kind=L4)]
    assert admit(snap(queued, rooms={T4: 1, L4: 5})) == ["t1", "l1", "l2"]
    assert admit(snap(queued, rooms={T4: 0})) == ["l1", "l2"], "a type not capped takes all it needs"


def test_within_a_type_priority_then_arrival() -> None:
    queued = [q("a", prio=L), q("b"), q("l", kind=L4, prio=L), q("c", prio=H), q("d")]
    assert admit(snap(queued, rooms={T4: 2, L4: 0})) == ["c", "b"]


def test_a_big_job_at_the_head_of_its_type_is_not_overtaken_by_its_type_only() -> None:
    queued = [q("big", gpus=4), q("small"), q("l4", kind=L4)]
    assert admit(snap(queued, rooms={T4: 3, L4: 1})) == ["l4"]
    assert admit(snap(queued, rooms={T4: 4, L4: 1})) == ["big", "l4"]


def test_max_concurrency_is_skipped_without_blocking_its_type() -> None:
    queued = [q("a", "busy"), q("b", "other"), q("c", "other")]
    got = admit(snap(queued, rooms={T4: 5}, active={"busy": 1}, limits={"busy": 1, "other": 1}))
    assert got == ["b"]


def test_shared_slots_still_bound_every_type_together() -> None:
    queued = [q("t1"), q("l1", kind=L4), q("t2"), q("l2", kind=L4)]
    assert admit(snap(queued, free=3, rooms={T4: 1})) == ["t1", "l1", "l2"]
    assert admit(snap(queued, budget=2, rooms={T4: 5, L4: 5})) == ["t1", "l1"]


def test_gpus_held_per_type() -> None:
    def spec(name: str, gpus: int, kind: str) -> FunctionSpec:
        return FunctionSpec(name=name, command=["true"], gpu=GpuSpec(count=gpus, written=kind))

    active: dict[tuple[str, int, str | None], int] = {
        ("a", 1, None): 3,
        ("b", 1, None): 2,
        ("gone", 1, None): 2,
    }
    versions = {("a", 1): spec("a", 1, T4), ("b", 1): spec("b", 2, L4)}
    assert gpus_held_by_type(active, versions) == {T4: 3, L4: 4, UNKNOWN_GPU_TYPE: 2}


def test_gpus_held_count_under_the_type_each_was_admitted_on() -> None:
    spilling = FunctionSpec(name="s", command=["true"], gpu=GpuSpec(count=2, written=[T4, L4]))
    active = {("s", 1, T4): 3, ("s", 1, L4): 1, ("s", 1, None): 1, ("gone", 1, L4): 2}
    # A row from before the type was kept counts under its spec's first type; a version not
    # kept under the type it was admitted on, one GPU each.
    assert gpus_held_by_type(active, {("s", 1): spilling}) == {T4: 6 + 2, L4: 2 + 2}


def test_admission_says_whether_work_further_back_could_still_fit() -> None:
    blocked_type = admission(snap([q("t1"), q("t2")], free=4, rooms={T4: 1}))
    assert (blocked_type.chosen, blocked_type.stopped) == (["t1"], False), "an L4 behind could fit"
    capped = admission(snap([q("a", "busy")], active={"busy": 1}, limits={"busy": 1}))
    assert (capped.chosen, capped.stopped) == ([], False)
    slots_out = admission(snap([q("a"), q("b", kind=L4)], free=1))
    assert (slots_out.chosen, slots_out.stopped) == (["a"], True)
    big_head = admission(snap([q("big", gpus=4), q("l", kind=L4)], free=2))
    assert (big_head.chosen, big_head.stopped) == ([], True), "strict order over shared slots"


V100 = "nvidia-tesla-v100"


def sq(i: str, *kinds: str, fn: str = "f", prio: Priority = N, gpus: int = 1) -> QueuedItem:
    """A queued item of a function that lists `kinds` in order (T4 then L4 when none given)."""
    first, *rest = kinds or (T4, L4)
    return QueuedItem(id=i, function=fn, priority=prio, gpus=gpus, gpu_type=first, spill_to=tuple(rest))


def placed(snapshot: AdmissionSnapshot) -> list[tuple[str, str]]:
    decided = admission(snapshot)
    return [(i, decided.on_type[i]) for i in decided.chosen]


@pytest.mark.parametrize(
    ("queued", "rooms", "expected"),
    [
        pytest.param([sq("a")], {T4: 1, L4: 1}, [("a", T4)], id="first-type-when-it-has-room"),
        pytest.param([sq("a")], {T4: 0, L4: 1}, [("a", L4)], id="full-first-spills-to-second"),
        pytest.param([sq("a")], {T4: 0}, [("a", L4)], id="spills-to-an-uncapped-type"),
        pytest.param([sq("a")], {T4: 0, L4: 0}, [], id="all-full-waits"),
        pytest.param(
            [sq("a"), sq("b"), sq("c")],
            {T4: 1, L4: 1},
            [("a", T4), ("b", L4)],
            id="fills-first-then-second-in-order",
        ),
        pytest.param(
            [sq("a", T4, L4, V100), sq("b", T4, L4, V100)],
            {T4: 0, L4: 0, V100: 2},
            [("a", V100), ("b", V100)],
            id="third-choice",
        ),
        pytest.param(
            [sq("a", L4, T4)],
            {T4: 1, L4: 1},
            [("a", L4)],
            id="the-functions-order-not-a-fixed-one",
        ),
        pytest.param(
            [sq("big", gpus=2), sq("small")],
            {T4: 1, L4: 1},
            [],
            id="a-head-blocked-on-all-its-types-holds-them-all",
        ),
        pytest.param(
            [sq("big", T4, gpus=2), sq("small")],
            {T4: 1, L4: 1},
            [("small", L4)],
            id="spills-past-a-type-an-earlier-one-waits-on",
        ),
        pytest.param(
            [sq("big", T4, gpus=2), sq("t4-only", T4), sq("spill")],
            {T4: 1, L4: 1},
            [("spill", L4)],
            id="a-t4-only-one-stays-behind-the-t4-head",
        ),
        pytest.param(
            [sq("big", L4, gpus=2), sq("small")],
            {T4: 1, L4: 1},
            [("small", T4)],
            id="first-type-free-while-the-second-is-held",
        ),
        pytest.param(
            [sq("big", T4, gpus=2), sq("l4-big", L4, gpus=2), sq("small")],
            {T4: 1, L4: 1},
            [],
            id="both-types-held-by-earlier-heads",
        ),
        pytest.param(
            [sq("low", prio=L), sq("high", prio=H)],
            {T4: 1, L4: 0},
            [("high", T4)],
            id="priority-picks-who-gets-the-first-type",
        ),
        pytest.param(
            [sq("low", prio=L), sq("high", prio=H)],
            {T4: 1, L4: 1},
            [("high", T4), ("low", L4)],
            id="the-later-in-order-spills",
        ),
    ],
)
def test_admission_spills_to_the_next_listed_type_without_overtaking_a_waiting_head(
    queued: list[QueuedItem], rooms: dict[str, int], expected: list[tuple[str, str]]
) -> None:
    assert placed(snap(queued, rooms=rooms)) == expected


def test_a_spilled_admission_takes_the_room_of_the_type_it_lands_on() -> None:
    queued = [sq("a"), sq("l4", L4), sq("l4-2", L4)]
    assert placed(snap(queued, rooms={T4: 0, L4: 2})) == [("a", L4), ("l4", L4)]


def test_spilling_still_draws_on_what_all_types_share() -> None:
    decided = admission(snap([sq("a"), sq("b"), sq("c")], free=2, rooms={T4: 0, L4: 5}))
    assert (decided.chosen, decided.stopped) == (["a", "b"], True)
    capped = admission(snap([sq("a"), sq("b")], rooms={T4: 0, L4: 5}, active={"f": 1}, limits={"f": 2}))
    assert capped.chosen == ["a"], "max_concurrency counts spilled admissions too"


def test_one_waiting_on_all_its_types_lets_other_types_through() -> None:
    decided = admission(snap([sq("a", gpus=2), sq("v", V100)], rooms={T4: 1, L4: 1, V100: 1}))
    assert (placed(snap([sq("a", gpus=2), sq("v", V100)], rooms={T4: 1, L4: 1, V100: 1}))) == [("v", V100)]
    assert decided.stopped is False


def test_functions_of_one_priority_take_turns() -> None:
    """A batch queued for one function holds back another function's next invocation by one
    turn, not by the whole batch; each function keeps its own acceptance order."""
    queued = [q(f"a{i}", "a") for i in range(300)] + [q("b0", "b"), q("c0", "c"), q("b1", "b")]
    assert admit(snap(queued, free=4)) == ["a0", "b0", "c0", "a1"]
    assert admit(snap(queued, free=6)) == ["a0", "b0", "c0", "a1", "b1", "a2"]


def test_turns_are_within_a_priority_and_a_single_function_keeps_fifo() -> None:
    queued = [q("a0", "a"), q("a1", "a"), q("l0", "l", prio=L), q("b0", "b"), q("h0", "h", prio=H)]
    assert admit(snap(queued, free=5)) == ["h0", "a0", "b0", "a1", "l0"]
    assert admit(snap([q("x"), q("y"), q("z")], free=2)) == ["x", "y"]


def test_a_function_with_fewer_running_goes_first() -> None:
    """The turn counts what each function has pending or running: another function's first
    invocation goes before the next of a batch two of which run already."""
    queued = [q(f"a{i}", "a") for i in range(2, 300)] + [q("b0", "b")]
    assert admit(snap(queued, free=1, active={"a": 2})) == ["b0"]
    assert admit(snap(queued, free=3, active={"a": 2, "b": 5})) == ["a2", "a3", "a4"]
