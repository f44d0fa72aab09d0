"""The empty-node pool of the planner's model: the scheduler's pick and the autoscaler's soft
taints (planner/model/empty_nodes.py), and what they do to scale-down in the whole model."""

from __future__ import annotations

import random

import pytest

from elasticityops.planner.distributions import parse_distribution
from elasticityops.planner.model import simulate
from elasticityops.planner.model.empty_nodes import EmptyNodes, feasible_to_find
from elasticityops.planner.settings import ClusterSettings


def _pool(nodes: int, seed: int = 0, pick: str = "random") -> tuple[EmptyNodes, list[float]]:
    since = [0.0] * nodes
    pool = EmptyNodes(random.Random(seed), since, pick)
    for nd in range(nodes):
        pool.add(nd, float(nd))
    return pool, since


def test_a_pod_takes_an_unmarked_node_while_there_is_one_and_a_marked_one_owes_an_unmarking() -> None:
    pool, _ = _pool(6)
    pool.update_taints(4)  # nothing owed: four of the six marked
    assert len(pool.marked) == 4
    assert len(pool.fresh) == 2
    unmarked = set(pool.fresh)
    assert {pool.take(), pool.take()} == unmarked
    assert pool.owed == []
    marked = pool.take()
    assert pool.owed == [marked]
    assert len(pool) == 3


def test_the_budget_lifts_owed_marks_first_and_marks_with_what_is_left() -> None:
    pool, _ = _pool(5)
    pool.update_taints(5)
    taken = [pool.take() for _ in range(3)]  # all marked: each owes an unmarking
    assert sorted(pool.owed) == sorted(taken)
    pool.update_taints(2)  # two lifted, one still owed, none marked
    assert len(pool.owed) == 1
    still = pool.owed[0]
    assert still == taken[2]
    for nd in taken:
        pool.add(nd, 10.0)
    # the two unmarked come back unmarked; the one still marked comes back marked, and once it
    # is empty again it is owed nothing (unneeded again, it keeps its mark)
    assert sorted(pool.fresh) == sorted(taken[:2])
    assert still in pool.marked
    assert len(pool.marked) == 3
    pool.update_taints(1)
    assert pool.owed == []
    assert len(pool.marked) == 4
    assert len(pool.fresh) == 1


def test_the_idle_order_skips_nodes_that_left_and_lists_what_goes_within_the_horizon() -> None:
    pool, _ = _pool(4)
    first = pool.oldest()
    assert first == 0
    pool.remove(0)
    pool.remove(2)
    assert pool.oldest() == 1
    # window 10 s at t = 12: node 1 (idle since 1) goes in 0 s (overdue), node 3 in 1 s
    assert pool.leaving_within(10.0, 12.0, 5.0) == (0.0, 1.0)
    assert pool.leaving_within(10.0, 12.0, 0.5) == (0.0,)
    nd = pool.take()
    pool.add(nd, 20.0)  # empty again: its old place in the order no longer counts
    assert pool.leaving_within(10.0, 12.0, 100.0)[-1] == 18.0
    assert len(pool.leaving_within(10.0, 12.0, 100.0)) == 2


def test_first_fit_takes_the_first_node_in_the_schedulers_order_unmarked_ones_first() -> None:
    since = [0.0] * 10
    pool = EmptyNodes(random.Random(0), since, "first-fit")
    for nd in (7, 2, 9, 4):  # the order they emptied in is no part of it
        pool.add(nd, 0.0)
    assert pool.take(10) == 2
    assert pool.take(10) == 4
    pool.add(2, 1.0)
    assert pool.take(10) == 2
    pool.update_taints(1)  # one of 7 and 9 marked
    (unmarked,) = pool.fresh
    (marked,) = pool.marked
    assert pool.take(10) == unmarked
    assert pool.owed == []
    assert pool.take(10) == marked  # only a marked one left: it owes an unmarking
    assert pool.owed == [marked]
    assert not pool


def test_first_fit_search_starts_where_the_last_stopped_once_more_nodes_are_free_than_it_looks_for() -> None:
    # 150 listed, all free: kube-scheduler stops at the 100th feasible node and the next search
    # starts after it
    pool, _ = _pool(150, pick="first-fit")
    assert pool.take(150) == 0  # the search found 0..99
    assert pool.take(150) == 100  # it found 100..149, then 1..50 (149 free left)
    assert pool.take(150) == 51  # 51..99, 101..149, 1, 2
    pool.remove(3)
    assert pool.take(150) == 4  # a removed node is out of the order
    # below 100 free, the search looks at every node and the start stays
    small, _ = _pool(50, pick="first-fit")
    assert [small.take(50) for _ in range(3)] == [0, 1, 2]
    small.add(0, 5.0)
    assert small.take(50) == 0


def test_first_fit_prefers_an_unmarked_node_only_among_those_its_search_finds() -> None:
    pool, _ = _pool(300, pick="first-fit")
    pool.update_taints(10_000)  # all marked
    pool.owed[:] = []
    for nd in range(290, 300):  # the last ten lose their mark, as if lifted
        pool.remove(nd)
        pool.add(nd, 1.0)
    # among 300 listed the search finds 144 (48%): the unmarked ones lie past them
    assert pool.take(300) == 0
    assert pool.owed == [0]
    assert pool.take(300) == 144  # 144..287: still none unmarked
    assert pool.take(300) == 290  # from 288 on they are among the first found


def test_how_many_feasible_nodes_kube_scheduler_looks_for() -> None:
    # pkg/scheduler/schedule_one.go numFeasibleNodesToFind, percentageOfNodesToScore unset
    assert feasible_to_find(60) == 60
    assert feasible_to_find(100) == 100
    assert feasible_to_find(400) == 188  # 50 - 400 // 125 = 47%
    assert feasible_to_find(1_000) == 420
    assert feasible_to_find(6_000) == 300  # the share bottoms out at 5%


def test_an_unknown_pick_is_refused() -> None:
    with pytest.raises(ValueError, match="first-fit"):
        EmptyNodes(random.Random(0), [], "best")


def test_first_fit_lets_the_nodes_at_the_end_of_the_list_go() -> None:
    # Without marks, a random pick keeps over twice the busy nodes (the test above); first-fit
    # keeps the stream on the first nodes and lets the rest idle out, marks or none.
    assert _steady(0, "first-fit") <= 50
    assert _steady(10, "first-fit") <= 50


def _steady(soft_taints: int, pick: str = "random") -> int:
    """Nodes alive at the end of a steady stream onto a big idle pool: 200 requests arrive at
    once (200 nodes made), then one 20 s request every 0.5 s for an hour (about 40 busy)."""
    arrivals = [0.0] * 200 + [600.0 + 0.5 * k for k in range(7200)]
    durations = [60.0] * 200 + [20.0] * 7200
    settings = ClusterSettings(
        provision_delay=parse_distribution("fixed:60"),
        scale_down_after_s=300.0,
        scale_down_delay_after_add_s=0.0,
        soft_taint_count=soft_taints,
        empty_node_pick=pick,
        horizon_s=4200.0,
    )
    result = simulate(arrivals, durations, settings)
    return sum(1 for d in result.node_deleted_s if d > 4150.0)


def test_soft_taints_let_an_idle_pool_go_that_spread_pods_keep_alive() -> None:
    # Without marks the stream lands on random empty nodes and resets their timers: over twice
    # the busy nodes stay (91). With upstream's 10 marks per loop the marked ones idle out, and
    # about the busy ones remain (40).
    spread = _steady(0)
    marked = _steady(10)
    assert spread > 80, spread
    assert marked <= 50, marked
