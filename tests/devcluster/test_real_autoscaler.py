"""Upstream's cluster-autoscaler (kwok provider) scales a GPU group up and down in the dev cluster.

Its own cluster (the session's runs the emulator unless EOPS_DEV_CLUSTER_AUTOSCALER=real), with
short windows: upstream waits a fixed 30 s before acting on a pending GPU pod, then the node
joins at once (no boot delay yet), and an empty node goes after scale-down-unneeded-time.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from elasticityops.devcluster.cluster import DevCluster
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.errors import DevClusterError
from elasticityops.devcluster.kwok_provider import group_names
from elasticityops.devcluster.nodes import POOL_LABEL, ROLE_AUTOSCALED, ROLE_BASELINE, ROLE_LABEL
from elasticityops.devcluster.pytest_plugin import autoscaler_kind
from elasticityops.devcluster.workloads import gpu_job
from helpers.server import EOPS

from .helpers import job_condition, job_pods, phase_of, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

KNOBS = AutoscalerSettings(
    baseline=1,
    max_nodes=4,
    scan_interval=2.0,
    scale_down_after=10.0,
    max_node_provision_time=60.0,
)


@pytest.fixture(scope="module")
def real_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if autoscaler_kind() == "real":
        yield request.getfixturevalue("dev_cluster")
        return
    from elasticityops.devcluster.build import ensure_built

    try:
        tc = ensure_built(allow_build=False, autoscaler="required")
        cfg = ClusterConfig(
            state_dir=tmp_path_factory.mktemp("real-autoscaler"), autoscaler=KNOBS, autoscaler_kind="real"
        )
        cluster = DevCluster.start(cfg, tc)
    except DevClusterError as exc:
        pytest.fail(f"dev cluster with the real autoscaler did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def namespace(real_cluster: Any) -> Iterator[str]:
    name = f"real-{secrets.token_hex(4)}"
    with real_cluster.api() as api:
        api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        yield name
        api.delete(f"/api/v1/namespaces/{name}")


def _group_nodes(api: Any) -> list[dict[str, Any]]:
    nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_AUTOSCALED}"})
    return nodes


def _events(api: Any, ns: str, reason: str) -> list[dict[str, Any]]:
    events, _ = api.list(f"/api/v1/namespaces/{ns}/events", {"fieldSelector": f"reason={reason}"})
    return events


def test_it_runs_beside_kwok_with_its_config(real_cluster: Any) -> None:
    alive = real_cluster.processes_alive()
    assert alive["cluster-autoscaler"]
    assert alive["kwok"]
    rec = next(p for p in real_cluster.state.processes if p.name == "cluster-autoscaler")
    assert "--cloud-provider=kwok" in rec.argv
    assert f"--address=127.0.0.1:{real_cluster.state.ports.autoscaler_metrics}" in rec.argv
    with real_cluster.api() as api:
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
            lambda: "autoscalerStatus: Running" in (real_cluster.real_autoscaler_status() or ""),
            timeout=90,
            what="its status text to say Running",
        )
        # The baseline pool belongs to no node group: never a candidate for scale-down.
        assert _group_nodes(api) == []
    rss = psutil.Process(rec.pid).memory_info().rss
    assert rss < 1 << 30
    # `eops dev-cluster status` shows upstream's own status text.
    done = subprocess.run(
        [EOPS, "dev-cluster", "status", "--state-dir", str(real_cluster.state_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["processes"]["cluster-autoscaler"] is True
    assert "autoscalerStatus: Running" in shown["cluster_autoscaler"]


def test_pending_gpu_job_scales_a_group_up_runs_and_the_node_goes(real_cluster: Any, namespace: str) -> None:
    ns = namespace
    with real_cluster.api() as api:
        # Every baseline node is busy: the job needs a new one.
        held = [f"hold{i}" for i in range(real_cluster.node_counts()[ROLE_BASELINE])]
        for job in held:
            api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job(job, run_seconds=600))
        for job in held:
            wait_for(lambda j=job: phase_of(api, ns, j) == "Running", timeout=60, what="the baseline taken")
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("up", run_seconds=3))
        pod = wait_for(lambda: (job_pods(api, ns, "up") or [None])[0], what="the Job's pod")
        name = pod["metadata"]["name"]

        # Upstream holds GPU pods 30 s before it acts on them (unschedulablePodWithGpuTimeBuffer).
        scaled = wait_for(
            lambda: [e for e in _events(api, ns, "TriggeredScaleUp") if e["involvedObject"]["name"] == name],
            timeout=120,
            what="TriggeredScaleUp on the pod",
        )
        assert "nap-" in scaled[0]["message"]
        node = wait_for(lambda: (_group_nodes(api) or [None])[0], timeout=60, what="the new node")
        assert node["metadata"]["labels"][POOL_LABEL] in group_names()
        assert node["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
        # skipTaint: no kwok-provider=true:NoSchedule taint that no Job tolerates.
        assert all(t["key"] != "kwok-provider" for t in node["spec"]["taints"])

        assert wait_for(lambda: job_condition(api, ns, "up"), timeout=90, what="the Job done") == "Complete"
        assert job_pods(api, ns, "up")[0]["spec"]["nodeName"] == node["metadata"]["name"]

        # Empty for scale-down-unneeded-time (10 s), then removed by upstream's scale-down.
        wait_for(lambda: _group_nodes(api) == [], timeout=150, interval=1.0, what="the empty node removed")
        for job in held:
            api.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}")
