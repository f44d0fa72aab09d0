"""The headroom controller against the real control plane and upstream's cluster-autoscaler
(issue 15): `eops serve --backend kubernetes --headroom warm:3` holds three warm T4 nodes, by
placeholder pods or by a CapacityBuffer, with a 30 s provisioning delay: once they are up,
three invocations start within seconds and the fourth waits for a node; the warm capacity comes
back; a restarted gateway adopts its objects and never doubles them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from elasticityops.backends.kubernetes.labels import COMPONENT_LABEL
from elasticityops.backends.kubernetes.warm_objects import BUFFER_API, WARM_COMPONENT
from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION
from elasticityops.ops.doctor.check_scheduling import backed_off_groups

from .cluster_support import deploy, ensure_priority_classes, invoke, start_k8s_gateway, wait_state

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("headroom")]

WARM = 3
PROVISION_S = 30
WARM_SELECTOR = f"{COMPONENT_LABEL}={WARM_COMPONENT}"
T4 = "cloud.google.com/gke-accelerator=nvidia-tesla-t4"


def _seconds(a: str, b: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def _warm_units(cluster: Any, ns: str, mechanism: str) -> int:
    """Warm units ready now: placeholder pods running, or (a buffer's pods being virtual) T4
    nodes that are Ready with their GPU allocatable and run none of our jobs (a new node has
    its GPU in allocatable before it is Ready)."""
    with cluster.api() as api:
        if mechanism == "placeholders":
            pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": WARM_SELECTOR})
            return sum(
                1
                for p in pods
                if (p.get("status") or {}).get("phase") == "Running"
                and not (p.get("metadata") or {}).get("deletionTimestamp")
            )
        nodes, _ = api.list("/api/v1/nodes", {"labelSelector": T4})
        pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": "app.kubernetes.io/managed-by"})
    used = {
        (p.get("spec") or {}).get("nodeName")
        for p in pods
        if (p.get("status") or {}).get("phase") in ("Pending", "Running")
    }
    return sum(
        1
        for n in nodes
        if n["metadata"]["name"] not in used
        and int((n.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu", "0")) > 0
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or ()
        )
        and not any(t.get("key", "").startswith("node.kubernetes.io/") for t in n["spec"].get("taints") or ())
        and not (n.get("metadata") or {}).get("deletionTimestamp")
    )


def _wait_warm(cluster: Any, ns: str, mechanism: str, timeout: float) -> float:
    start = time.monotonic()
    deadline = start + timeout
    while _warm_units(cluster, ns, mechanism) < WARM:
        assert time.monotonic() < deadline, f"never {WARM} warm units ({mechanism}) within {timeout}s"
        time.sleep(1)
    return time.monotonic() - start


def _warm_objects(cluster: Any, ns: str, mechanism: str) -> list[dict[str, Any]]:
    path = (
        f"/apis/{BUFFER_API}/namespaces/{ns}/capacitybuffers"
        if mechanism == "buffer"
        else f"/apis/apps/v1/namespaces/{ns}/deployments"
    )
    items: list[dict[str, Any]]
    with cluster.api() as api:
        items, _ = api.list(path, {"labelSelector": WARM_SELECTOR})
    return items


def _wait_for_baseline(cluster: Any, timeout: float = 900) -> None:
    """Until the autoscaler has removed the nodes earlier tests left (10 s scale-down here), so
    that what is warm is what this test's gateway asked for, and no T4 group is in back-off: an
    earlier test's stocked-out zones (the spillover test) leave them backed off for minutes
    (a minute or two with the session's back-off), and a backed-off group adds no warm node."""
    baseline = cluster.autoscaler_settings.baseline
    deadline = time.monotonic() + timeout
    while True:
        with cluster.api() as api:
            nodes, _ = api.list("/api/v1/nodes", {"labelSelector": T4})
        backed_off = [g for g, _ in backed_off_groups(cluster.autoscaler_status() or "") if "-t4-" in g]
        if len(nodes) <= baseline and not backed_off:
            return
        assert time.monotonic() < deadline, (
            f"{len(nodes)} T4 nodes (baseline {baseline}); T4 groups backed off: {backed_off}"
        )
        time.sleep(2)


@pytest.mark.parametrize("mechanism", ["placeholders", "buffer"])
def test_warm_nodes_start_invocations_at_once_and_come_back(
    dev_cluster: Any, dev_namespace: str, tmp_path: Any, mechanism: str
) -> None:
    ensure_priority_classes(dev_cluster)
    env = {"EOPS_HEADROOM": f"warm:{WARM}", "EOPS_HEADROOM_MECHANISM": mechanism, "EOPS_HEADROOM_SYNC": "2"}
    _wait_for_baseline(dev_cluster)
    with dev_cluster.knobs(provision_delay=f"fixed:{PROVISION_S}", driver_delay="fixed:0"):
        gw = start_k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw", env=env)
        try:
            deploy(gw, name="work", annotations={RUN_SECONDS_ANNOTATION: "40"}, max_concurrency=10)
            # The baseline's free nodes count; the rest come from the autoscaler (30 s GPU-pod
            # delay, then the 30 s boot).
            _wait_warm(dev_cluster, dev_namespace, mechanism, timeout=240)
            time.sleep(3)  # requests come to warm capacity, not at the second it turns ready
            ids = [invoke(gw, "work", {"i": i}) for i in range(WARM + 1)]
            started = [wait_state(gw, inv, {"running", "succeeded"}, timeout=240) for inv in ids]
            waits = [_seconds(s["timeline"]["accepted"], s["timeline"]["started"]) for s in started]
            notes = [{n["kind"] for n in s["notes"]} for s in started]
            # Three start at once on the warm nodes; the fourth waits for a node (one of the three
            # once its 40 s job ends, or a new one, whichever comes first). The earliest new node
            # is one ordered when the three took the warm ones: a boot (30 s) after the burst,
            # less the scan that ordered it; CI has seen 29.2 s. No node can come under 20 s.
            assert max(sorted(waits)[:WARM]) < 15, waits
            assert sorted(waits)[WARM] > 20, waits
            assert sum("WarmUnits" in k for k in notes) == WARM, notes
            last = notes[waits.index(max(waits))]
            assert "WarmUnits" not in last, notes
            assert {"NewNode", "BusyNode"} & last, notes
            # The warm capacity comes back: the consumed units are replaced by new nodes.
            _wait_warm(dev_cluster, dev_namespace, mechanism, timeout=240)
            objects = _warm_objects(dev_cluster, dev_namespace, mechanism)
            assert [o["spec"]["replicas"] for o in objects] == [WARM]
        finally:
            gw.stop()
        # A restarted gateway adopts its object: still one, still three units, never six.
        gw = start_k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw", env=env)
        try:
            time.sleep(6)  # a few syncs
            objects = _warm_objects(dev_cluster, dev_namespace, mechanism)
            assert [o["spec"]["replicas"] for o in objects] == [WARM]
            assert _warm_units(dev_cluster, dev_namespace, mechanism) >= WARM
            if mechanism == "placeholders":
                with dev_cluster.api() as api:
                    pods, _ = api.list(
                        f"/api/v1/namespaces/{dev_namespace}/pods", {"labelSelector": WARM_SELECTOR}
                    )
                live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
                assert len(live) == WARM, [p["metadata"]["name"] for p in live]
            for inv in ids:
                wait_state(gw, inv, {"succeeded"}, timeout=240)
        finally:
            gw.stop()
