"""What bench/peak_replicas.py reads from its watches: the milestones, the share of each pod's
wait that follows its node, and the uids per name that would show a duplicate Job."""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import Any

import pytest

from helpers.bench import load_bench


@pytest.fixture(scope="module")
def peak() -> ModuleType:
    return load_bench("peak_replicas")


def _pod(name: str, phase: str = "Pending", node: str = "") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"u-{name}"},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def _node(name: str, gpus: str, tainted: bool = False) -> dict[str, Any]:
    taints = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}] if tainted else []
    return {
        "metadata": {"name": name},
        "spec": {"taints": taints},
        "status": {
            "allocatable": {"nvidia.com/gpu": gpus},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_the_milestones_and_each_pods_share_after_its_node(peak: ModuleType, monkeypatch: Any) -> None:
    now = [100.0]
    monkeypatch.setattr(peak.time, "monotonic", lambda: now[0])
    seen = peak.Peak(n=2, workload="job")
    seen.t0 = 100.0

    def at(t: float, coro: Any) -> None:
        now[0] = 100.0 + t
        asyncio.run(coro)

    at(1, seen.on_job("ADDED", {"metadata": {"name": "a", "uid": "1"}}))
    at(2, seen.on_job("ADDED", {"metadata": {"name": "b", "uid": "2"}}))
    at(3, seen.on_pod("ADDED", _pod("a")))
    at(4, seen.on_pod("ADDED", _pod("b")))
    at(10, seen.on_node("ADDED", _node("n1", "0")))  # registered, its GPU not allocatable yet
    at(20, seen.on_node("MODIFIED", _node("n1", "1")))
    at(21, seen.on_pod("MODIFIED", _pod("a", "Running", "n1")))
    at(25, seen.on_node("ADDED", _node("n2", "1", tainted=True)))  # Ready, the taint still on
    at(30, seen.on_node("MODIFIED", _node("n2", "1")))
    at(35, seen.on_pod("MODIFIED", _pod("b", "Running", "n2")))
    at(60, seen.on_pod("MODIFIED", _pod("a", "Succeeded", "n1")))
    at(70, seen.on_pod("MODIFIED", _pod("b", "Succeeded", "n2")))
    at(80, seen.on_node("DELETED", _node("n1", "1")))
    at(90, seen.on_node("DELETED", _node("n2", "1")))
    out = seen.summary()
    assert out["all_jobs_created"] == 2.0
    assert out["jobs_per_s"] == 1.0
    assert out["all_pods_created"] == 4.0
    assert out["all_pods_running"] == 35.0
    assert out["all_pods_succeeded"] == 70.0
    assert out["all_nodes_removed"] == 90.0
    assert out["nodes_added"] == 2
    assert out["last_node_gpu_ready"] == 25.0
    # From the first pod (3 s) to the last node Ready with its GPU (25 s).
    assert out["autoscaler_provisioning_s"] == 22.0
    # n1 had no taint when Ready (0 s); n2's was lifted 5 s after it was Ready.
    assert out["last_node_untainted"] == 30.0
    assert (out["taint_lift_p50_s"], out["taint_lift_max_s"]) == (5.0, 5.0)
    # a: 21 - max(3, 20) = 1; b: 35 - max(4, 25) = 10
    assert (out["after_node_p50_s"], out["after_node_max_s"]) == (10.0, 10.0)
    assert out["last_pod_node_gpu_ready"] == 25.0
    assert out["most_uids_per_name"] == 1


def test_a_name_seen_with_two_uids_is_a_duplicate(peak: ModuleType) -> None:
    seen = peak.Peak(n=1, workload="pod")
    seen.t0 = 1.0
    asyncio.run(seen.on_pod("ADDED", _pod("a")))
    asyncio.run(seen.on_pod("DELETED", _pod("a")))
    asyncio.run(seen.on_pod("ADDED", {**_pod("a"), "metadata": {"name": "a", "uid": "again"}}))
    assert seen.summary()["most_uids_per_name"] == 2
