"""The budget clamp gives whole turns in one step (issue 37: one turn a unit made warm:100000
under a budget of a million take over a second on the event loop, at every headroom sync). The
split is the one a unit-per-turn clamp makes, for any asks, budgets and GPUs in use."""

from __future__ import annotations

import time
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.headroom.warm_units import WarmShape, clamp_to_budget

TYPES = ("nvidia-l4", "nvidia-tesla-t4", "nvidia-a100-80gb")
SHAPES = [WarmShape(kind, count) for kind in TYPES for count in (1, 2, 8)]


def _one_unit_a_turn(
    wanted: Mapping[WarmShape, int], budget: GpuBudget | None, in_use: Mapping[str, int]
) -> dict[WarmShape, int]:
    """The clamp as it was written first: the specification the fast one must match."""
    held = {shape: 0 for shape in wanted}
    type_left = {kind: max(0, cap - in_use.get(kind, 0)) for kind, cap in budget.per_type} if budget else {}
    total_left = (
        None if budget is None or budget.total is None else max(0, budget.total - sum(in_use.values()))
    )
    for shape in wanted:
        if shape.gpu_type not in type_left and total_left is None:
            held[shape] = max(0, wanted[shape])
    order = sorted(
        (s for s in wanted if wanted[s] > 0 and held[s] < wanted[s]), key=lambda s: (-wanted[s], s)
    )
    progressed = True
    while progressed:
        progressed = False
        for shape in order:
            if held[shape] >= wanted[shape]:
                continue
            room = type_left.get(shape.gpu_type)
            if (room is not None and room < shape.gpu_count) or (
                total_left is not None and total_left < shape.gpu_count
            ):
                continue
            held[shape] += 1
            if room is not None:
                type_left[shape.gpu_type] = room - shape.gpu_count
            if total_left is not None:
                total_left -= shape.gpu_count
            progressed = True
    return held


budgets = st.one_of(
    st.none(),
    st.builds(lambda total: GpuBudget(total=total), st.integers(0, 300)),
    st.dictionaries(st.sampled_from(TYPES), st.integers(0, 300), min_size=1).map(
        lambda caps: GpuBudget(per_type=tuple(sorted(caps.items())))
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    wanted=st.dictionaries(st.sampled_from(SHAPES), st.integers(-2, 200), max_size=6),
    budget=budgets,
    in_use=st.dictionaries(st.sampled_from(TYPES), st.integers(0, 100)),
)
def test_whole_turns_split_as_one_unit_a_turn_does(
    wanted: dict[WarmShape, int], budget: GpuBudget | None, in_use: dict[str, int]
) -> None:
    assert clamp_to_budget(wanted, budget, in_use) == _one_unit_a_turn(wanted, budget, in_use)


def test_a_large_ask_under_a_large_budget_is_clamped_at_once() -> None:
    wanted = {
        WarmShape("nvidia-l4"): 100_000,
        WarmShape("nvidia-tesla-t4"): 100_000,
        WarmShape("nvidia-l4", 2): 100_000,
    }
    for budget, each in ((GpuBudget(total=1_000_000), 100_000), (GpuBudget(total=150_000), 37_500)):
        started = time.perf_counter()
        held = clamp_to_budget(wanted, budget, {})
        assert time.perf_counter() - started < 0.05
        assert set(held.values()) == {each}
