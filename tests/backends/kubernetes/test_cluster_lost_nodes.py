"""A GPU node lost under a running pod, as a spot reclaim looks in the dev cluster: a node the
autoscaler added (a baseline node would be put back by the simulated cloud under the same name,
which no reclaimed spot VM is) shuts down and its Node object is deleted. The gateway requeues
the invocation as its next attempt while its function's retries last, else fails it `evicted`
naming the node. Both workloads: Jobs, and bare pods (EOPS_KUBE_WORKLOAD=pod), where the pod is
all there is and each attempt is a pod of its own.

The shutdown comes first as the `node.kubernetes.io/out-of-service` NoExecute taint (what a node
that has shut down is given; the taint manager then deletes its pods), and the Node is deleted
once its pods are gone. Deleting the Node alone would not do here: kwok plays the delayed
"finished" stage of a pod whose node it no longer knows, so the pod would succeed on a node that
is gone before the pod GC (about 40 s later) fails it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from elasticityops.devcluster.nodes import ROLE_LABEL
from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION

from .cluster_support import (
    deploy,
    ensure_priority_classes,
    invoke,
    jobs_of,
    k8s_gateway,
    pods_of,
    remove_empty_autoscaled_nodes,
    status,
    wait_state,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("nodes")]

RUN_S = 30  # long enough to be running when its node goes; its retry runs as long
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"


@pytest.fixture(scope="module")
def cluster(dev_cluster: Any) -> Any:
    ensure_priority_classes(dev_cluster)
    return dev_cluster


def _role(cluster: Any, node: str) -> str:
    with cluster.api() as api:
        found = api.get(f"/api/v1/nodes/{node}")
    return str(found["metadata"]["labels"].get(ROLE_LABEL, ""))


def _until(gw: Any, inv: str, ok: Any, what: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = status(gw, inv)
        if ok(current):
            return current
        assert time.monotonic() < deadline, f"{inv}: not {what}: {current}\n{gw.output()[-3000:]}"
        time.sleep(0.5)


def _live_pods(cluster: Any, namespace: str) -> list[str]:
    with cluster.api() as api:
        pods, _ = api.list(f"/api/v1/namespaces/{namespace}/pods")
    return [
        p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")
    ]


def _pods_on(cluster: Any, namespace: str, node: str) -> list[str]:
    with cluster.api() as api:
        pods, _ = api.list(f"/api/v1/namespaces/{namespace}/pods", {"fieldSelector": f"spec.nodeName={node}"})
    return [p["metadata"]["name"] for p in pods]


def _reclaim(cluster: Any, namespace: str, node: str) -> None:
    """The spot VM under `node` is reclaimed: the node shuts down, then it is deleted."""
    cluster.kubectl("taint", "node", node, OUT_OF_SERVICE)
    deadline = time.monotonic() + 60
    while _pods_on(cluster, namespace, node):
        assert time.monotonic() < deadline, f"pods still on {node}: {_pods_on(cluster, namespace, node)}"
        time.sleep(0.5)
    cluster.kubectl("delete", "node", node, "--wait=false")


@pytest.mark.parametrize("workload", ["job", "pod"])
def test_a_lost_node_is_retried_as_the_functions_retries_say(
    cluster: Any, dev_namespace: str, tmp_path: Path, workload: str
) -> None:
    runs = {RUN_SECONDS_ANNOTATION: str(RUN_S), EXIT_CODE_ANNOTATION: "0"}
    env = {"EOPS_KUBE_WORKLOAD": workload}
    with cluster.knobs(baseline=0), k8s_gateway(cluster, dev_namespace, tmp_path / "gw", env=env) as gw:
        # Only nodes the autoscaler adds, as spot VMs are: none the static pool would put back.
        cluster.set_baseline(0)  # waits until no baseline node is left
        # Both wait for new nodes, as in a cold cluster: on a free node an earlier test left,
        # one would run out its 30 s while the other waits for its node, before either is lost.
        remove_empty_autoscaled_nodes(cluster)
        deploy(gw, name="keeps", retries=1, annotations=runs)
        deploy(gw, name="once", retries=0, annotations=runs)
        keeps, once = invoke(gw, "keeps"), invoke(gw, "once")
        first = {inv: wait_state(gw, inv, {"running"}, timeout=240) for inv in (keeps, once)}
        nodes = {inv: current["node"] for inv, current in first.items()}
        assert nodes[keeps] != nodes[once], nodes  # one T4 each
        for node in nodes.values():
            assert _role(cluster, node) == "autoscaled", node
            _reclaim(cluster, dev_namespace, node)

        again = _until(gw, keeps, lambda s: s["attempt"] == 1, "requeued as attempt 1", timeout=120)
        lost = [n for n in again["notes"] if n["kind"] == "NodeLost"]
        assert lost, again["notes"]
        assert lost[-1]["message"].startswith(f"node lost: {nodes[keeps]} went away"), lost
        assert "requeued as attempt 1 (retry 1 of 1)" in lost[-1]["message"]
        assert again["timeline"]["preempted"] is not None

        failed = wait_state(gw, once, {"failed"}, timeout=120)
        assert failed["failure_reason"] == "evicted"
        assert failed["attempt"] == 0
        assert failed["message"].startswith(f"node lost: {nodes[once]} went away"), failed["message"]
        assert "no retry left (0 of its function's 0 used)" in failed["message"]

        done = wait_state(gw, keeps, {"succeeded"}, timeout=300)
        assert done["attempt"] == 1
        assert done["node"]
        assert done["node"] != nodes[keeps]
        if workload == "pod":
            # The lost pods went with their node (the taint manager deleted them); the retry's
            # pod is the only one left, under the attempt's name, and no Job was ever made.
            assert jobs_of(cluster, dev_namespace) == []
            pods = {p["metadata"]["name"]: p for p in pods_of(cluster, dev_namespace, keeps)}
            assert sorted(pods) == [f"eops-{keeps}-a1"], sorted(pods)
            assert pods[f"eops-{keeps}-a1"]["metadata"]["labels"]["elasticityops.dev/attempt"] == "1"
            return
        # Each attempt a Job of its own: the lost one (failed, kept for its TTL) and the retry.
        jobs = {j["metadata"]["name"]: j for j in jobs_of(cluster, dev_namespace, keeps)}
        assert sorted(jobs) == [f"eops-{keeps}", f"eops-{keeps}-a1"], sorted(jobs)
        assert jobs[f"eops-{keeps}-a1"]["metadata"]["labels"]["elasticityops.dev/attempt"] == "1"
        assert [j["metadata"]["name"] for j in jobs_of(cluster, dev_namespace, once)] == [f"eops-{once}"]
        # Nothing left running or waiting: the lost pods are gone, the retry's pod finished.
        deadline = time.monotonic() + 60
        while _live_pods(cluster, dev_namespace):
            assert time.monotonic() < deadline, _live_pods(cluster, dev_namespace)
            time.sleep(0.5)
        assert status(gw, keeps)["state"] == "succeeded"
        assert status(gw, once)["state"] == "failed"
