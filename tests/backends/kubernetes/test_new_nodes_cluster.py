"""The Kubernetes backend on GPU nodes the autoscaler adds for it, through the real gateway over
HTTP: with no static node free, an invocation's pod waits for a new node, and with every T4 zone
stocked out a function that lists L4 too spills there. Both change the cluster's static pool and
stockouts, so in a parallel run they run in the lane `nodes`, on a cluster of their own."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from elasticityops.devcluster.nodes import ZONES

from .cluster_support import (
    deploy,
    ensure_priority_classes,
    invoke,
    jobs_of,
    k8s_gateway,
    remove_empty_autoscaled_nodes,
    runs,
    status,
    wait_node_gone,
    wait_state,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("nodes")]


@pytest.fixture(scope="module")
def cluster(dev_cluster: Any) -> Any:
    ensure_priority_classes(dev_cluster)
    return dev_cluster


def test_invocation_runs_as_a_job_on_a_new_gpu_node(cluster: Any, dev_namespace: str, tmp_path: Path) -> None:
    with cluster.knobs(baseline=0), k8s_gateway(cluster, dev_namespace, tmp_path / "gw") as gw:
        remove_empty_autoscaled_nodes(cluster)  # no free node: the pod must wait for a new one
        deploy(gw, name="embed", annotations=runs(2), timeout_seconds=300, env={"MODEL": "clip"})
        inv = invoke(gw, "embed", {"image": "cat.png"})
        pending = wait_state(gw, inv, {"pending", "running"})
        assert pending["timeline"]["dispatched"] is not None
        [job] = jobs_of(cluster, dev_namespace, inv)
        pod_spec = job["spec"]["template"]["spec"]
        container = pod_spec["containers"][0]
        assert job["metadata"]["name"] == f"eops-{inv}"
        assert job["spec"]["backoffLimit"] == 0
        assert job["spec"]["activeDeadlineSeconds"] == 300
        assert job["spec"]["ttlSecondsAfterFinished"] == 3600
        assert pod_spec["restartPolicy"] == "Never"
        assert pod_spec["priorityClassName"] == "eops-normal"
        assert pod_spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod_spec[
            "tolerations"
        ]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
        annotations = job["spec"]["template"]["metadata"]["annotations"]
        assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
        env = {e["name"]: e for e in container["env"]}
        assert env["MODEL"]["value"] == "clip"
        assert env["EOPS_CALLBACK_URL"]["value"].endswith(f"/v1/invocations/{inv}/result")
        with cluster.api() as api:
            secret = api.get(f"/api/v1/namespaces/{dev_namespace}/secrets/eops-{inv}")
        assert secret["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]

        done = wait_state(gw, inv, {"succeeded"}, timeout=180)
        timeline = done["timeline"]
        for milestone in ("accepted", "dispatched", "capacity_ready", "started", "finished"):
            assert timeline[milestone] is not None, milestone
        assert (
            timeline["dispatched"]
            <= timeline["capacity_ready"]
            <= timeline["started"]
            <= timeline["finished"]
        )
        # A node the autoscaler added, not a baseline node (gke-eops-baseline-t4-<index>):
        # <group>-<5 random> in a group nap-t4-<zone> (the kwok provider's names).
        zones = "|".join(re.escape(zone) for zone in ZONES)
        assert re.fullmatch(rf"nap-t4-({zones})-[a-z0-9]{{5}}", done["node"]), done["node"]
        # With no baseline node the pod was unschedulable until the autoscaler added one.
        assert any(n["kind"] == "Unschedulable" for n in done["notes"]), done["notes"]
        assert done["exit_code"] == 0

        # Its node-seconds (issue 17): the new node is its own from the node's creation, and the
        # node's idle time after the pod's end is its own too, closed when the autoscaler removes
        # the node (10 s unneeded in the test session).
        charged = done["cost"]["node_seconds"]
        assert charged["provisioning"] > 0, done["cost"]
        assert charged["run"] == pytest.approx(done["durations"]["run"], abs=0.01)
        assert charged["idle_after"] == 0, "its node is still there"
        wait_node_gone(cluster, done["node"])
        deadline = time.monotonic() + 30
        while (after := status(gw, inv)["cost"])["node_seconds"]["idle_after"] == 0:
            assert time.monotonic() < deadline, after
            time.sleep(0.5)
        assert after["node_seconds"]["idle_after"] >= 5, after
        assert after["node_seconds"]["provisioning"] == charged["provisioning"]
        assert after["usd"] > done["cost"]["usd"]


def _t4_nodes(cluster: Any) -> list[str]:
    with cluster.api() as api:
        nodes, _ = api.list(
            "/api/v1/nodes", {"labelSelector": "cloud.google.com/gke-accelerator=nvidia-tesla-t4"}
        )
    return [n["metadata"]["name"] for n in nodes]


def test_a_stocked_out_t4_spills_a_function_listing_t4_then_l4_to_l4(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """Every T4 zone stocked out (the L4 group, in us-central1-a, is not): the T4 pods' scale-ups
    fail and the autoscaler backs the T4 groups off, its NotTriggerScaleUp (or the stockout) moves
    each invocation to L4 long before EOPS_SPILL_AFTER_SECONDS, and they run on L4 nodes."""
    stocked = tuple(f"{zone}/nvidia-tesla-t4" for zone in ZONES)
    with cluster.knobs(baseline=0, stockout_zones=stocked):
        # No idle T4 node left over from earlier tests for the pods to land on.
        deadline = time.monotonic() + 180
        while _t4_nodes(cluster):
            assert time.monotonic() < deadline, f"T4 nodes still up: {_t4_nodes(cluster)}"
            time.sleep(2)
        env = {"EOPS_SPILL_AFTER_SECONDS": "600"}
        with k8s_gateway(cluster, dev_namespace, tmp_path / "gw", env=env) as gw:
            deploy(
                gw,
                name="spill",
                annotations=runs(3),
                timeout_seconds=900,
                gpu={"type": ["nvidia-tesla-t4", "nvidia-l4"], "count": 1},
            )
            ids = [invoke(gw, "spill", {"i": i}) for i in range(2)]
            for inv in ids:
                assert wait_state(gw, inv, {"pending", "running"})["gpu_type"] == "nvidia-tesla-t4"
            finals = [wait_state(gw, inv, {"succeeded"}, timeout=600) for inv in ids]
            jobs = {
                job["metadata"]["labels"]["elasticityops.dev/invocation"]: job
                for job in jobs_of(cluster, dev_namespace)
            }
    for done in finals:
        assert done["gpu_type"] == "nvidia-l4"
        # A node of the L4 group (the kwok provider names nodes <group>-<5 random>).
        assert re.fullmatch(r"nap-l4-us-central1-a-[a-z0-9]{5}", done["node"]), done["node"]
        spills = [n for n in done["notes"] if n["kind"] == "Spilled"]
        assert len(spills) == 1, done["notes"]
        assert spills[0]["message"].startswith("spilled to nvidia-l4: "), spills
        assert "nvidia-tesla-t4" in spills[0]["message"]
        assert "EOPS_SPILL_AFTER_SECONDS" not in spills[0]["message"], "the cluster said why, not the clock"
        # One Job per invocation, now asking for L4 (the T4 one was withdrawn first).
        job = jobs[done["id"]]
        assert job["spec"]["template"]["spec"]["nodeSelector"] == {
            "cloud.google.com/gke-accelerator": "nvidia-l4"
        }
        assert job["metadata"]["labels"]["elasticityops.dev/gpu-type"] == "nvidia-l4"
