"""The emulator's decisions, as pure functions: matrices over plain data, no cluster."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from elasticityops.devcluster.autoscaler import (
    Backoff,
    EmulatorState,
    NodeOrder,
    NodeView,
    PendingPod,
    Snapshot,
    decide,
    eligible_pending,
)
from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_BASELINE, baseline_node_name

NOW = 10_000.0
S = AutoscalerSettings(
    baseline=0, max_nodes=10, gpu_pod_delay=30, provision_delay="fixed:120", scale_down_after=600
)


def pod(i: int, *, age: float = 60.0, gpus: int = 1, priority: int = 0) -> PendingPod:
    return PendingPod(f"ns/p{i}", gpus, NOW - age, priority)


def node(
    name: str, *, requested: int = 0, role: str = ROLE_AUTOSCALED, pool: str = "nap-t4-us-central1-a-0"
) -> NodeView:
    return NodeView(name, pool, role, 1, requested, True)


def run(snap: Snapshot, state: EmulatorState | None = None, s: AutoscalerSettings = S, seed: int = 1):
    return decide(snap, state or EmulatorState(), s, random.Random(seed))


@pytest.mark.parametrize(
    ("pending", "expected"),
    [
        pytest.param([pod(1)], 1, id="one-old-gpu-pod"),
        pytest.param([pod(1, age=5)], 0, id="too-young-for-gpu-delay"),
        pytest.param([pod(1, priority=-11)], 0, id="expendable-below-cutoff"),
        pytest.param([pod(1, priority=-10)], 1, id="placeholder-at-cutoff-counts"),
        pytest.param([pod(1, gpus=2)], 0, id="two-gpus-never-fit-a-t4-node"),
        pytest.param([pod(1, gpus=0)], 0, id="cpu-pod-ignored"),
    ],
)
def test_eligibility(pending: list[PendingPod], expected: int) -> None:
    snap = Snapshot(NOW, (), tuple(pending))
    assert len(eligible_pending(snap, S)) == expected
    actions, state = run(snap)
    assert len(actions.ordered) == expected
    assert len(state.in_flight) == expected


def test_order_becomes_node_after_delay() -> None:
    actions, state = run(Snapshot(NOW, (), (pod(1),)))
    (order,) = actions.ordered
    assert order.ready_at == NOW + 120
    # Still pending a cycle later: the node on its way covers the pod, nothing more is ordered.
    actions2, state2 = run(Snapshot(NOW + 10, (), (pod(1),)), state)
    assert actions2.ordered == ()
    assert actions2.create == ()
    actions3, state3 = run(Snapshot(NOW + 121, (), (pod(1),)), state2)
    assert actions3.create == (order,)
    assert state3.in_flight == ()


def test_free_gpu_on_existing_node_covers_pending_pod() -> None:
    actions, _ = run(Snapshot(NOW, (node("n1"),), (pod(1), pod(2))))
    assert len(actions.ordered) == 1


@pytest.mark.parametrize(
    ("max_nodes", "baseline_nodes", "pending", "expected"),
    [
        pytest.param(10, 0, 15, 10, id="quota-caps-scale-up"),
        pytest.param(10, 4, 15, 6, id="baseline-counts-against-quota"),
        pytest.param(3, 3, 5, 0, id="quota-used-by-baseline"),
    ],
)
def test_quota(max_nodes: int, baseline_nodes: int, pending: int, expected: int) -> None:
    nodes = tuple(node(baseline_node_name(i), requested=1, role=ROLE_BASELINE) for i in range(baseline_nodes))
    s = replace(S, max_nodes=max_nodes, baseline=baseline_nodes)
    actions, _ = run(Snapshot(NOW, nodes, tuple(pod(i) for i in range(pending))), s=s)
    assert len(actions.ordered) == expected


def test_pools_fill_zones_evenly_and_respect_pool_size_limit() -> None:
    s = replace(S, max_nodes=100, pool_size_limit=5)
    actions, _ = run(Snapshot(NOW, (), tuple(pod(i) for i in range(30))), s=s)
    pools: dict[str, int] = {}
    for o in actions.ordered:
        pools[o.pool] = pools.get(o.pool, 0) + 1
    assert max(pools.values()) <= 5
    assert sum(pools.values()) == 30
    assert {p for p in pools if p.endswith("-0")} == {
        f"nap-t4-{z}-0" for z in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")
    }


def test_stockout_backs_off_pool_and_doubles() -> None:
    s = replace(S, stockout_probability=1.0, backoff_initial=300, backoff_max=1000)
    actions, state = run(Snapshot(NOW, (), (pod(1),)), s=s)
    assert actions.ordered == ()
    assert actions.stockouts == ("nap-t4-us-central1-a-0",)
    assert state.backoff["nap-t4-us-central1-a-0"] == Backoff(NOW + 300, 300)
    # Next cycle another zone's pool is tried, and fails too.
    actions2, state2 = run(Snapshot(NOW + 1, (), (pod(1),)), state, s=s)
    assert actions2.stockouts == ("nap-t4-us-central1-b-0",)
    # After its back-off the first pool is tried again and fails: back-off doubles, then caps.
    actions3, st = run(Snapshot(NOW + 301, (), (pod(1),)), state2, s=s)
    assert actions3.stockouts == ("nap-t4-us-central1-a-0",)
    assert st.backoff["nap-t4-us-central1-a-0"] == Backoff(NOW + 301 + 600, 600)
    _, st = run(Snapshot(NOW + 301 + 601, (), (pod(1),)), st, s=s)
    assert st.backoff["nap-t4-us-central1-a-0"].last == 1000


def test_success_resets_backoff() -> None:
    state = EmulatorState(backoff={"nap-t4-us-central1-a-0": Backoff(NOW - 1, 600)})
    actions, st = run(Snapshot(NOW, (), (pod(1),)), state)
    assert actions.ordered[0].pool == "nap-t4-us-central1-a-0"
    assert "nap-t4-us-central1-a-0" not in st.backoff


def test_scale_down_after_window_with_parallelism_limit() -> None:
    s = replace(S, scale_down_after=600, max_scale_down_parallelism=2)
    nodes = (*tuple(node(f"n{i}") for i in range(5)), node("busy", requested=1))
    actions, st = run(Snapshot(NOW, nodes, ()), s=s)
    assert actions.delete == ()
    assert set(st.unneeded_since) == {f"n{i}" for i in range(5)}
    actions, st = run(Snapshot(NOW + 599, nodes, ()), st, s=s)
    assert actions.delete == ()
    actions, st = run(Snapshot(NOW + 600, nodes, ()), st, s=s)
    assert len(actions.delete) == 2
    assert "busy" not in actions.delete


def test_node_that_gets_work_is_no_longer_unneeded() -> None:
    _, st = run(Snapshot(NOW, (node("n1"),), ()))
    _, st = run(Snapshot(NOW + 300, (node("n1", requested=1),), ()), st)
    assert st.unneeded_since == {}
    actions, st = run(Snapshot(NOW + 700, (node("n1"),), ()), st)
    assert actions.delete == ()
    assert st.unneeded_since == {"n1": NOW + 700}


def test_baseline_nodes_are_never_scaled_down_but_reconciled() -> None:
    s = replace(S, baseline=2, scale_down_after=0)
    actions, _ = run(Snapshot(NOW, (node(baseline_node_name(0), role=ROLE_BASELINE),), ()), s=s)
    assert actions.create_baseline == (baseline_node_name(1),)
    assert actions.delete == ()
    nodes = tuple(node(baseline_node_name(i), role=ROLE_BASELINE) for i in range(4))
    actions, _ = run(Snapshot(NOW, nodes, ()), s=s)
    assert actions.delete == (baseline_node_name(2), baseline_node_name(3))


def test_idle_nodes_kept_for_pending_pods() -> None:
    s = replace(S, scale_down_after=0, gpu_pod_delay=0)
    actions, _ = run(Snapshot(NOW, (node("n1"), node("n2")), (pod(1),)), s=s)
    assert len(actions.delete) == 1
    assert actions.ordered == ()


def test_disabled_emulator_only_reconciles_baseline() -> None:
    s = replace(S, enabled=False, baseline=1, scale_down_after=0)
    actions, _ = run(Snapshot(NOW, (node("n1"),), (pod(1),)), s=s)
    assert actions.ordered == ()
    assert actions.delete == ()
    assert actions.create_baseline == (baseline_node_name(0),)


def test_in_flight_orders_count_against_quota() -> None:
    s = replace(S, max_nodes=2)
    state = EmulatorState(in_flight=(NodeOrder("x", "nap-t4-us-central1-a-0", "us-central1-a", NOW + 50),))
    actions, _ = run(Snapshot(NOW, (), tuple(pod(i) for i in range(5))), state, s=s)
    assert len(actions.ordered) == 1


def test_lognormal_delays_are_sampled_per_node() -> None:
    s = replace(S, provision_delay="lognormal:median=240,p95=420", max_nodes=100)
    actions, _ = run(Snapshot(NOW, (), tuple(pod(i) for i in range(50))), s=s)
    delays = sorted(o.ready_at - NOW for o in actions.ordered)
    assert len(set(delays)) == 50
    assert 150 < delays[25] < 350
