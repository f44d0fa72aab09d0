from __future__ import annotations

import pytest

from elasticityops.dispatch.cycle import gpus_held
from elasticityops.domain.admission import AdmissionSnapshot, QueuedItem, admit, gpus_free
from elasticityops.domain.functions import FunctionSpec, GpuSpec, Priority

N, H, L = Priority.normal, Priority.high, Priority.low


def snap(
    queued: list[QueuedItem],
    free: int | None = None,
    budget: int | None = None,
    active: dict[str, int] | None = None,
    limits: dict[str, int] | None = None,
) -> AdmissionSnapshot:
    return AdmissionSnapshot(
        queued=queued,
        free_gpus=free,
        gpu_budget_left=budget,
        active_by_function=active or {},
        max_concurrency=limits or {},
    )


def q(i: str, fn: str = "f", prio: Priority = N, gpus: int = 1) -> QueuedItem:
    return QueuedItem(id=i, function=fn, priority=prio, gpus=gpus)


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
    assert gpus_held(active, versions) == 3 + 8 + 2 + 2


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
    assert gpus_free(in_use, budget, backend) == free
