"""The stuck-pod guard against the real control plane and kwok (issue 14).

A pod kwok honestly never starts: bound (through the binding subresource, as the scheduler
binds) to a Ready kwok-managed baseline node, after its status was given Ready=True while
Pending. No kwok stage matches such a pod (eops-pod-ready wants Ready != True, the completion
stages want Running, pod-delete a deletionTimestamp), so kwok leaves it Pending: the same
observable state as the fault, made on purpose. The guard must name it; a pod that kwok starts
must not be named; and deleting the pod (kwok's pod-delete stage) clears it before the test
ends, so the plugin's own guard passes for this test.

The guard looks at the whole cluster, and the lease probe adds and removes a node: in a parallel
run these tests run in the lane `faults`, on a cluster no other lane's tests use.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import pytest

from cli.runner import Eops
from elasticityops.devcluster.nodes import ROLE_BASELINE, ROLE_LABEL, node_ready
from elasticityops.devcluster.pytest_plugin import stuck_pod_report
from elasticityops.devcluster.stuck import LEASES, kwok_gates_pods_on_its_lease_cache, list_bound_pending
from elasticityops.domain.errors import NotFound

from .helpers import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_lane("faults")]


def _pod(name: str, scheduler: str = "default-scheduler") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"eops.dev/run-seconds": "3600"}},
        "spec": {
            "schedulerName": scheduler,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def _bind(api: Any, ns: str, name: str, node: str) -> None:
    api.create(
        f"/api/v1/namespaces/{ns}/pods/{name}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )


def _baseline_node(api: Any) -> str:
    nodes: list[dict[str, Any]]
    nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_BASELINE}"})
    ready: list[str] = [n["metadata"]["name"] for n in nodes if node_ready(n)]
    assert ready, "the session's cluster has Ready baseline nodes"
    return ready[0]


def _gone(api: Any, path: str) -> bool:
    try:
        api.get(path)
    except NotFound:
        return True
    return False


def test_guard_names_a_pod_kwok_never_starts_and_not_one_it_starts(
    dev_cluster: Any, dev_namespace: str
) -> None:
    ns = dev_namespace
    stuck_name = f"never-{secrets.token_hex(3)}"
    ok_name = f"starts-{secrets.token_hex(3)}"
    with dev_cluster.api() as api:
        node = _baseline_node(api)
        # Unbound and ignored by the scheduler until we bind it ourselves.
        api.create(f"/api/v1/namespaces/{ns}/pods", _pod(stuck_name, scheduler="eops-nobody"))
        api.patch(
            f"/api/v1/namespaces/{ns}/pods/{stuck_name}/status",
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        )
        _bind(api, ns, stuck_name, node)
        api.create(f"/api/v1/namespaces/{ns}/pods", _pod(ok_name, scheduler="eops-nobody"))
        _bind(api, ns, ok_name, node)
        wait_for(
            lambda: api.get(f"/api/v1/namespaces/{ns}/pods/{ok_name}")["status"].get("phase") == "Running",
            timeout=30,
            what="kwok starts the ordinary pod",
        )
        bound = api.get(f"/api/v1/namespaces/{ns}/pods/{stuck_name}")
        assert bound["spec"]["nodeName"] == node
        assert any(
            c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"]
        )

        # Fresh: below a 2 s bound at first; the guard waits for it to pass its own bound.
        started = time.monotonic()
        report = stuck_pod_report(dev_cluster, bound_seconds=2.0, cap_seconds=10.0)
        waited = time.monotonic() - started
        assert f"{ns}/{stuck_name} on {node}" in report, report
        assert ok_name not in report
        assert waited < 10.0

        # Still Pending: kwok did not start it meanwhile (what makes it a reproduction).
        assert api.get(f"/api/v1/namespaces/{ns}/pods/{stuck_name}")["status"]["phase"] == "Pending"
        found = {p.key: p for p in list_bound_pending(api)}
        assert found[f"{ns}/{stuck_name}"].node == node
        assert f"{ns}/{ok_name}" not in found

        # `eops dev-cluster status` shows it, in its JSON too.
        shown = Eops(None)(
            "dev-cluster", "status", "--state-dir", str(dev_cluster.state_dir), "--json", "--stuck-after", "1"
        )
        assert shown.code == 0, shown.output
        keys = {f"{p['namespace']}/{p['name']}": p for p in json.loads(shown.stdout)["stuck_pods"]}
        assert keys[f"{ns}/{stuck_name}"]["node"] == node
        assert keys[f"{ns}/{stuck_name}"]["seconds"] > 1
        assert f"{ns}/{ok_name}" not in keys
        table = Eops(None)(
            "dev-cluster", "status", "--state-dir", str(dev_cluster.state_dir), "--stuck-after", "1"
        )
        assert stuck_name in table.output, table.output
        assert "stuck pod" in table.output

        # A deleting pod is not stuck: once deleted the guard passes (one listing, no wait).
        api.delete(f"/api/v1/namespaces/{ns}/pods/{stuck_name}")
        api.delete(f"/api/v1/namespaces/{ns}/pods/{ok_name}")
        wait_for(
            lambda: _gone(api, f"/api/v1/namespaces/{ns}/pods/{stuck_name}"), timeout=30, what="pod deleted"
        )
        started = time.monotonic()
        assert stuck_pod_report(dev_cluster, bound_seconds=2.0) == ""
        assert time.monotonic() - started < 2.0


def test_kwok_keeps_no_node_leases_and_plays_a_pod_whatever_a_lease_says(
    dev_cluster: Any, dev_namespace: str
) -> None:
    """The fix of issue 14. kwok 0.8.0 with node Leases skipped, on some of its starts (its
    pod controller created after its node controller, Go map order), any pod whose event came
    while its lease cache said another holder had the node's Lease, and never replayed it
    (docs/dev-cluster.md; `bench/devcluster_stuck_loop.py --kwok-node-leases 240 --gated-only`
    shows it). The dev cluster runs kwok without Leases, where kwok's pod controller has no such
    check on any start: kwok makes no Lease for its nodes, and a pod bound to a node whose Lease
    another holder has (made here, renewed for 10 min) starts at once."""
    ns = dev_namespace
    with dev_cluster.api() as api:
        baseline = [
            n["metadata"]["name"]
            for n in api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_BASELINE}"})[0]
        ]
        assert baseline
        assert not {le["metadata"]["name"] for le in _leases(api)} & set(baseline)
        assert kwok_gates_pods_on_its_lease_cache(api, ns, kwok_leases=False, wait=5.0) is False
        # The probe cleaned up after itself: no node, Lease or pod of it left.
        assert not [n for n in api.list("/api/v1/nodes")[0] if "gate-probe" in n["metadata"]["name"]]
        assert not [le for le in _leases(api) if "gate-probe" in le["metadata"]["name"]]
        wait_for(
            lambda: not [p for p in api.list(f"/api/v1/namespaces/{ns}/pods")[0]],
            timeout=30,
            what="the probe's pod deleted",
        )


def _leases(api: Any) -> list[dict[str, Any]]:
    leases: list[dict[str, Any]]
    leases, _ = api.list(LEASES)
    return leases
