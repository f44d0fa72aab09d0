from __future__ import annotations

import pytest

from elasticityops.dispatch.cycle import UNKNOWN_GPU_TYPE, gpus_held_by_type
from elasticityops.domain.admission import AdmissionSnapshot, QueuedItem, admission, admit, gpus_free
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.functions import FunctionSpec, GpuSpec, Priority

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

    active = {("a", 1): 3, ("b", 1): 2, ("b", 2): 1, ("gone", 1): 2}
    versions = {("a", 1): spec("a", 1), ("b", 1): spec("b", 4), ("b", 2): spec("b", 2)}
    assert sum(gpus_held_by_type(active, versions).values()) == 3 + 8 + 2 + 2


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
        return FunctionSpec(name=name, command=["true"], gpu=GpuSpec(count=gpus, type=kind))

    active = {("a", 1): 3, ("b", 1): 2, ("gone", 1): 2}
    versions = {("a", 1): spec("a", 1, T4), ("b", 1): spec("b", 2, L4)}
    assert gpus_held_by_type(active, versions) == {T4: 3, L4: 4, UNKNOWN_GPU_TYPE: 2}


def test_admission_says_whether_work_further_back_could_still_fit() -> None:
    blocked_type = admission(snap([q("t1"), q("t2")], free=4, rooms={T4: 1}))
    assert (blocked_type.chosen, blocked_type.stopped) == (["t1"], False), "an L4 behind could fit"
    capped = admission(snap([q("a", "busy")], active={"busy": 1}, limits={"busy": 1}))
    assert (capped.chosen, capped.stopped) == ([], False)
    slots_out = admission(snap([q("a"), q("b", kind=L4)], free=1))
    assert (slots_out.chosen, slots_out.stopped) == (["a"], True)
    big_head = admission(snap([q("big", gpus=4), q("l", kind=L4)], free=2))
    assert (big_head.chosen, big_head.stopped) == ([], True), "strict order over shared slots"
