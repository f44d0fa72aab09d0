"""Upstream's cluster-autoscaler (kwok provider) in a small dev cluster of its own: scale-up after
the boot and driver delays, scale-down, the quota, a stocked-out zone, its status and events.

Its own cluster because these tests need autoscaler flags the session's cluster does not have
(quota 4 with one static node, a short back-off), and flags are fixed at `up`. Upstream waits a
fixed 30 s before it acts on a pending GPU pod; each test waits that out.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import psutil
import pytest

from elasticityops.backends.kubernetes.labels import ZONE_LABEL
from elasticityops.backends.kubernetes.objects import epoch
from elasticityops.devcluster.build import ensure_built
from elasticityops.devcluster.cluster import DevCluster
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.errors import DevClusterError
from elasticityops.devcluster.kwok_provider import group_names, t4_group
from elasticityops.devcluster.node_stages import BOOTED_REASON, DRIVER_REASON, STOCKOUT_REASON
from elasticityops.devcluster.nodes import (
    POOL_LABEL,
    ROLE_AUTOSCALED,
    ROLE_BASELINE,
    ROLE_LABEL,
    ZONES,
)
from elasticityops.devcluster.workloads import gpu_job
from elasticityops.domain.errors import NotFound
from helpers.server import EOPS

from .helpers import job_condition, job_pods, phase_of, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("autoscaler")]

KNOBS = AutoscalerSettings(
    baseline=1,
    max_nodes=4,
    scan_interval=2.0,
    provision_delay="fixed:4",
    driver_delay="fixed:3",
    scale_down_after=10.0,
    max_node_provision_time=60.0,
    backoff_initial=60.0,
    backoff_max=120.0,
    seed=7,
)
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"
HEARTBEAT_S = 4  # kwok posts node status this often (no node Leases: issue 14)
DRIVER_WAIT_S = 14  # the scale-up test's driver delay: long enough for heartbeats during it


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    try:
        tc = ensure_built(allow_build=False, autoscaler="required")
        cfg = ClusterConfig(
            state_dir=tmp_path_factory.mktemp("small-cluster"),
            autoscaler=KNOBS,
            node_heartbeat_seconds=HEARTBEAT_S,
        )
        cluster = DevCluster.start(cfg, tc)
    except DevClusterError as exc:
        pytest.fail(f"dev cluster with the autoscaler did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def namespace(small_cluster: DevCluster) -> Iterator[str]:
    name = f"ca-{secrets.token_hex(4)}"
    with small_cluster.api() as api:
        api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        wait_for(lambda: api.ok(f"/api/v1/namespaces/{name}/serviceaccounts/default"), what="service account")
        # Each test starts from no autoscaled node (an earlier test's go after the 10 s window).
        wait_for(lambda: _group_nodes(api) == [], timeout=240, interval=1.0, what="no autoscaled node left")
        yield name
        api.delete(f"/api/v1/namespaces/{name}")


def _group_nodes(api: Any) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]]
    nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_AUTOSCALED}"})
    return nodes


def _events(api: Any, ns: str, reason: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]]
    events, _ = api.list(f"/api/v1/namespaces/{ns}/events", {"fieldSelector": f"reason={reason}"})
    return events


def test_it_runs_beside_kwok_with_its_config(small_cluster: DevCluster) -> None:
    alive = small_cluster.processes_alive()
    assert alive["cluster-autoscaler"]
    assert alive["kwok"]
    rec = next(p for p in small_cluster.state.processes if p.name == "cluster-autoscaler")
    assert "--cloud-provider=kwok" in rec.argv
    assert f"--address=127.0.0.1:{small_cluster.state.ports.autoscaler_metrics}" in rec.argv
    with small_cluster.api() as api:
        for name in ("kwok-provider-config", "kwok-provider-templates"):
            api.get(f"/api/v1/namespaces/kube-system/configmaps/{name}")
        for crd in ("provisioningrequests", "capacitybuffers"):
            api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}.autoscaling.x-k8s.io")
        # Its own status ConfigMap, what users read on GKE too.
        wait_for(
            lambda: api.ok("/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status"),
            timeout=60,
            what="cluster-autoscaler-status",
        )
        # "Initializing" in its first loops, then "Running".
        wait_for(
            lambda: "autoscalerStatus: Running" in (small_cluster.autoscaler_status() or ""),
            timeout=90,
            what="its status text to say Running",
        )
        # The baseline pool belongs to no node group: never a candidate for scale-down.
        assert _group_nodes(api) == []
        # kwok keeps no node Leases (issue 14) and posts each node's status instead.
        assert api.list("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")[0] == []
        static = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_BASELINE}"})[0][0]
        first, since = _ready_heartbeat(static)
        path = f"/api/v1/nodes/{static['metadata']['name']}"
        wait_for(
            lambda: _ready_heartbeat(api.get(path))[0] != first,
            timeout=4 * HEARTBEAT_S,
            what="a heartbeat of a static node",
        )
        assert _ready_heartbeat(api.get(path))[1] == since  # its Ready transition kept
    rss = psutil.Process(rec.pid).memory_info().rss
    assert rss < 1 << 30
    # `eops dev-cluster status` shows upstream's own status text.
    done = subprocess.run(
        [EOPS, "dev-cluster", "status", "--state-dir", str(small_cluster.state_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["processes"]["cluster-autoscaler"] is True
    assert "autoscalerStatus: Running" in shown["cluster_autoscaler"]


def _node_events(api: Any, node: str) -> dict[str, float]:
    events, _ = api.list("/api/v1/events", {"fieldSelector": f"involvedObject.name={node}"})
    return {e["reason"]: _epoch(e.get("lastTimestamp") or e.get("eventTime")) for e in events}


def _epoch(stamp: str | None) -> float:
    at = epoch(stamp)
    assert at is not None, f"an event without a time: {stamp!r}"
    return at


def _pods(api: Any, ns: str) -> list[dict[str, Any]]:
    pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": "job-name"})
    return [p for p in pods if p["metadata"]["labels"]["job-name"].startswith("q")]


def _running(api: Any, ns: str, job: str) -> bool:
    return phase_of(api, ns, job) == "Running"


def _hold_baseline(cluster: DevCluster, api: Any, ns: str) -> list[str]:
    """Occupy every static node, so that the next GPU Job needs a new one."""
    held = [f"hold{i}" for i in range(cluster.node_counts()[ROLE_BASELINE])]
    for job in held:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job(job, run_seconds=900))
    for job in held:
        wait_for(partial(_running, api, ns, job), timeout=60, what="the baseline taken")
    return held


def _ready_heartbeat(node: dict[str, Any]) -> tuple[str, str]:
    cond = next(c for c in node["status"].get("conditions") or [] if c["type"] == "Ready")
    return cond.get("lastHeartbeatTime", ""), cond.get("lastTransitionTime", "")


def test_pending_gpu_job_scales_a_group_up_boots_installs_the_driver_runs_and_the_node_goes(
    small_cluster: DevCluster, namespace: str
) -> None:
    ns = namespace
    small_cluster.configure_cloud(driver_delay=f"fixed:{DRIVER_WAIT_S}")
    try:
        _scale_up_timeline(small_cluster, ns)
    finally:
        small_cluster.configure_cloud(driver_delay=KNOBS.driver_delay)


def _scale_up_timeline(small_cluster: DevCluster, ns: str) -> None:
    with small_cluster.api() as api:
        held = _hold_baseline(small_cluster, api, ns)
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("up", run_seconds=3))
        pod = wait_for(lambda: next(iter(job_pods(api, ns, "up")), None), what="the Job's pod")
        name = pod["metadata"]["name"]
        # Pending and unschedulable first: no node has a free GPU.
        assert pod["status"]["phase"] == "Pending"
        wait_for(
            lambda: any(
                c.get("reason") == "Unschedulable"
                for c in api.get(f"/api/v1/namespaces/{ns}/pods/{name}")["status"].get("conditions", [])
            ),
            what="PodScheduled=False/Unschedulable",
        )
        # GKE's toleration, added by ExtendedResourceToleration admission.
        assert any(t.get("key") == "nvidia.com/gpu" for t in pod["spec"]["tolerations"])

        # Upstream holds GPU pods 30 s before it acts on them (unschedulablePodWithGpuTimeBuffer).
        scaled = wait_for(
            lambda: [e for e in _events(api, ns, "TriggeredScaleUp") if e["involvedObject"]["name"] == name],
            timeout=120,
            what="TriggeredScaleUp on the pod",
        )
        assert "nap-" in scaled[0]["message"]
        node = wait_for(lambda: next(iter(_group_nodes(api)), None), timeout=60, what="the new node")
        labels = node["metadata"]["labels"]
        assert labels[POOL_LABEL] in group_names()
        assert labels["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
        # skipTaint: no kwok-provider=true:NoSchedule taint that no Job tolerates.
        assert all(t["key"] != "kwok-provider" for t in node["spec"]["taints"])

        node_name = node["metadata"]["name"]
        # Sampled until the Job is done: the node's Ready heartbeats (without Leases a node
        # stays Ready only by posting status, also while its driver installs, as a kubelet does).
        beats: dict[str, str] = {}
        deadline = time.monotonic() + 120
        while job_condition(api, ns, "up") is None:
            assert time.monotonic() < deadline, "the Job not done within 120 s"
            with contextlib.suppress(StopIteration, KeyError):
                beat, since = _ready_heartbeat(api.get(f"/api/v1/nodes/{node_name}"))
                beats[beat] = since
            time.sleep(0.5)
        assert job_condition(api, ns, "up") == "Complete"
        ran = job_pods(api, ns, "up")[0]
        assert ran["spec"]["nodeName"] == node_name
        # The node booted (NotReady) for the provision delay, then had no GPU for the driver
        # delay; the pod started only after that (event times are whole seconds).
        seen = _node_events(api, node_name)
        created = _epoch(node["metadata"]["creationTimestamp"])
        assert seen[BOOTED_REASON] - created >= 4 - 1
        assert DRIVER_WAIT_S - 1 <= seen[DRIVER_REASON] - seen[BOOTED_REASON] <= DRIVER_WAIT_S + 2
        assert _epoch(ran["status"]["startTime"]) >= seen[DRIVER_REASON] - 1
        # Heartbeats while it waited for the driver (every 4-4.4 s over 14 s), and none of them
        # moved the Ready transition (still the boot).
        waiting = [b for b in beats if seen[BOOTED_REASON] + 1 < _epoch(b) < seen[DRIVER_REASON]]
        assert len(waiting) >= 2, beats
        booted = {b: since for b, since in beats.items() if _epoch(b) >= seen[BOOTED_REASON] - 1}
        assert {abs(_epoch(since) - seen[BOOTED_REASON]) <= 1 for since in booted.values()} == {True}, beats
        # The simulated cloud gave it the hostname label a kubelet sets.
        assert (
            api.get(f"/api/v1/nodes/{node_name}")["metadata"]["labels"]["kubernetes.io/hostname"] == node_name
        )

        # Empty for scale-down-unneeded-time (10 s), then removed by upstream's scale-down.
        wait_for(lambda: _group_nodes(api) == [], timeout=150, interval=1.0, what="the empty node removed")
        scale_down, _ = api.list("/api/v1/events", {"fieldSelector": f"involvedObject.name={node_name}"})
        assert any(e["reason"] == "ScaleDown" for e in scale_down)
        for job in held:
            api.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")


def test_the_quota_caps_the_nodes_and_the_rest_waits(small_cluster: DevCluster, namespace: str) -> None:
    """max-nodes-total 4 with one static node: three GPU nodes at most; a fourth Job waits."""
    ns = namespace
    with small_cluster.api() as api:
        held = _hold_baseline(small_cluster, api, ns)
        for i in range(4):
            api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job(f"q{i}", run_seconds=15))
        wait_for(lambda: len(_group_nodes(api)) == 3, timeout=150, interval=1.0, what="three new nodes")
        # Upstream holds the fourth at the quota: capped in the loop that planned four
        # (MaxNodesTotalReached), or, where the fourth came a loop later, limited there
        # (ScaleUpLimitedByMaxNodesTotal, no event). Either way it waits on a node of the three.
        time.sleep(10)  # five scan intervals
        assert len(_group_nodes(api)) == 3  # never above the quota
        waiting = [p for p in _pods(api, ns) if not p["spec"].get("nodeName")]
        assert len(waiting) == 1, [p["metadata"]["name"] for p in waiting]
        # Three run; the fourth reuses a node once one of them is done.
        for i in range(4):
            assert wait_for(partial(job_condition, api, ns, f"q{i}"), timeout=180) == "Complete"
        assert len(_group_nodes(api)) <= 3
        for job in held:
            api.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")


def test_a_stocked_out_zone_is_backed_off_and_the_pod_runs_in_another(
    small_cluster: DevCluster, namespace: str
) -> None:
    ns = namespace
    stocked, first = ZONES[0], t4_group(ZONES[0])
    # The priority expander (first in --expander) prefers the stocked-out zone's group, so the
    # first scale-up goes there deterministically; without the ConfigMap least-waste picks.
    priorities = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": PRIORITY_CONFIGMAP}}
    priorities["data"] = {"priorities": f"20:\n- {first}\n10:\n- .*\n"}
    small_cluster.configure_cloud(stockout_zones=(stocked,))
    with small_cluster.api() as api:
        api.create("/api/v1/namespaces/kube-system/configmaps", priorities)
        try:
            held = _hold_baseline(small_cluster, api, ns)
            api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("so", run_seconds=3))
            failed = wait_for(
                lambda: [
                    e for e in _events(api, "kube-system", "ScaleUpFailed") if first in e.get("message", "")
                ],
                timeout=150,
                interval=1.0,
                what=f"ScaleUpFailed for {first}",
            )
            assert "ZONE_RESOURCE_POOL_EXHAUSTED" in failed[0]["message"]
            assert _events(api, "default", STOCKOUT_REASON)  # the simulated cloud says why
            # While it backs off, doctor explains it from the autoscaler's own status.
            doctor = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "elasticityops.cli.main",
                    "doctor",
                    "--kubeconfig",
                    str(small_cluster.kubeconfig_path),
                    "--namespace",
                    ns,
                    "--json",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            findings = json.loads(doctor.stdout)["findings"]
            backoff = [f for f in findings if f["check"] == "autoscaler" and "back-off" in f["message"]]
            assert backoff, findings
            assert first in backoff[0]["message"]
            node_name = wait_for(
                lambda: next(
                    (p["spec"]["nodeName"] for p in job_pods(api, ns, "so") if p["spec"].get("nodeName")),
                    None,
                ),
                timeout=120,
                interval=0.5,
                what="the pod bound to a node",
            )
            # A node's name is its group's (nap-t4-ZONE-xxxxx), which is what says where it ran: the
            # node itself may be scaled down before it is read (a CI rehearsal at load 12 read it
            # after the Job was done, and it was gone).
            assert not node_name.startswith(f"{first}-"), node_name
            with contextlib.suppress(NotFound):
                assert api.get(f"/api/v1/nodes/{node_name}")["metadata"]["labels"][ZONE_LABEL] != stocked
            assert (
                wait_for(lambda: job_condition(api, ns, "so"), timeout=120, what="the Job done") == "Complete"
            )
            # The failed instance is gone: upstream deleted it.
            assert all(n["metadata"]["labels"][POOL_LABEL] != first for n in _group_nodes(api))
            for job in held:
                api.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")
        finally:
            small_cluster.configure_cloud(stockout_zones=())
            api.delete(f"/api/v1/namespaces/kube-system/configmaps/{PRIORITY_CONFIGMAP}")
