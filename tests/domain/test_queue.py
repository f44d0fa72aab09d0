"""Queue position and reason: pure functions over the store's counts."""

from __future__ import annotations

from dataclasses import replace

from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.functions import FunctionSpec, GpuSpec
from elasticityops.domain.queue import WAITING, QueueFacts, queue_position, queue_reason

T4, L4 = "nvidia-tesla-t4", "nvidia-l4"


def spec(name: str, kind: str = T4, gpus: int = 1) -> FunctionSpec:
    return FunctionSpec(name=name, command=["true"], gpu=GpuSpec(written=kind, count=gpus))


def test_the_position_counts_only_those_ahead_for_the_same_gpu_type() -> None:
    versions = {("t", 1): spec("t"), ("t", 2): spec("t", L4), ("l", 1): spec("l", L4)}
    ahead = {("t", 1): 3, ("t", 2): 4, ("l", 1): 5, ("gone", 1): 7}
    assert queue_position(T4, ahead, versions) == 4
    assert queue_position(L4, ahead, versions) == 10
    assert queue_position(T4, {}, versions) == 1


FACTS = QueueFacts(
    function="f",
    gpu_type=T4,
    gpus=1,
    max_concurrency=10,
    function_active=2,
    in_use={T4: 5, L4: 1},
    budget=GpuBudget(per_type=((T4, 5),)),
    backend_free=None,
    backend_total=None,
)


def test_a_full_type_budget_is_named_with_its_numbers() -> None:
    assert queue_reason(FACTS) == "the GPU budget for nvidia-tesla-t4 is full (5 of 5 in use)"
    assert queue_reason(replace(FACTS, gpu_type=L4)) == WAITING, "L4 has no cap"
    roomy = replace(FACTS, in_use={T4: 3}, gpus=4)
    assert queue_reason(roomy) == (
        "the GPU budget for nvidia-tesla-t4 has room for 2 GPUs and it needs 4 (3 of 5 in use)"
    )
    held = replace(FACTS, in_use={T4: 3}, headroom={T4: 2})
    assert queue_reason(held) == "the GPU budget for nvidia-tesla-t4 is full (3 + 2 headroom of 5 in use)"


def test_the_overall_budget_and_the_backend() -> None:
    overall = replace(FACTS, budget=GpuBudget(total=6))
    assert queue_reason(overall) == "the GPU budget is full (6 of 6 in use)"
    slots = replace(FACTS, budget=None, backend_free=0, backend_total=4)
    assert queue_reason(slots) == "the backend's GPUs are all taken (4 of 4)"
    assert queue_reason(replace(slots, backend_free=1)) == WAITING


def test_max_concurrency_and_pause_come_first() -> None:
    capped = replace(FACTS, max_concurrency=2)
    assert queue_reason(capped) == "function f is at its max_concurrency (2)"
    assert "paused" in queue_reason(replace(capped, paused=True))
    assert queue_reason(replace(FACTS, budget=None, max_concurrency=None)) == WAITING


def test_a_function_listing_several_types_counts_those_ahead_on_any_of_them() -> None:
    versions = {("t", 1): spec("t"), ("l", 1): spec("l", L4), ("v", 1): spec("v", "nvidia-tesla-v100")}
    versions[("s", 1)] = FunctionSpec(name="s", command=["true"], gpu=GpuSpec(written=[L4, T4]))
    ahead = {("t", 1): 3, ("l", 1): 5, ("v", 1): 7, ("s", 1): 2}
    assert queue_position(T4, ahead, versions, spill_to=(L4,)) == 1 + 3 + 5 + 2
    assert queue_position(T4, ahead, versions) == 1 + 3 + 2, "a spilling one ahead competes for T4 too"


def test_a_function_that_can_spill_waits_on_a_budget_only_when_every_type_is_full() -> None:
    both = GpuBudget(per_type=((T4, 5), (L4, 2)))
    spilling = replace(FACTS, budget=both, spill_to=(L4,))
    assert queue_reason(spilling) == WAITING, "L4 has room: admission takes it there"
    full = replace(spilling, in_use={T4: 5, L4: 2})
    assert queue_reason(full) == (
        "the GPU budget for nvidia-tesla-t4 is full (5 of 5 in use); "
        "the GPU budget for nvidia-l4 is full (2 of 2 in use)"
    )
    assert queue_reason(replace(full, budget=GpuBudget(per_type=((T4, 5),)))) == WAITING, "L4 not capped"
