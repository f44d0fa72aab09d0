"""The issue's smoke test and the pod-simulation contract, against the real control plane."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL
from elasticityops.devcluster.workloads import gpu_job, gpu_pod

from .helpers import job_condition, job_pods, phase_of, wait_for

pytestmark = pytest.mark.cluster


def _autoscaled(api) -> list[dict]:
    nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_AUTOSCALED}"})
    return nodes


def test_gpu_job_provisions_a_node_runs_and_the_idle_node_goes(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with (
        dev_cluster.knobs(baseline=0),
        dev_cluster.api() as api,
    ):
        dev_cluster.set_baseline(0)
        # Upstream removes idle nodes 10 s after they are unneeded and 10 s after its last scale-up.
        wait_for(
            lambda: _autoscaled(api) == [],
            timeout=180,
            interval=1.0,
            what="no idle nodes left from earlier tests",
        )
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("smoke", run_seconds=3))

        # Pending and unschedulable: no GPU node exists.
        pod = wait_for(lambda: (job_pods(api, ns, "smoke") or [None])[0], what="the Job's pod")
        assert pod["status"]["phase"] == "Pending"
        wait_for(
            lambda: any(
                c.get("reason") == "Unschedulable"
                for c in api.get(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")["status"].get(
                    "conditions", []
                )
            ),
            what="PodScheduled=False/Unschedulable",
        )
        # GKE's toleration was added by ExtendedResourceToleration admission.
        tolerations = api.get(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")["spec"][
            "tolerations"
        ]
        assert any(t.get("key") == "nvidia.com/gpu" for t in tolerations)

        # Upstream waits 30 s on a pending GPU pod, then a loop (2 s); the node boots 3 s.
        node = wait_for(lambda: (_autoscaled(api) or [None])[0], timeout=90, what="a provisioned node")
        labels = node["metadata"]["labels"]
        assert labels["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
        assert labels["cloud.google.com/gke-nodepool"].startswith("nap-t4-")

        wait_for(lambda: phase_of(api, ns, "smoke") == "Running", timeout=60, what="pod Running")
        running = job_pods(api, ns, "smoke")[0]
        assert running["spec"]["nodeName"] == node["metadata"]["name"]

        wait_for(lambda: phase_of(api, ns, "smoke") == "Succeeded", timeout=30, what="pod Succeeded")
        assert wait_for(lambda: job_condition(api, ns, "smoke"), timeout=30) == "Complete"

        # Idle for scale_down_after (10 s) -> removed by upstream's scale-down.
        wait_for(lambda: _autoscaled(api) == [], timeout=120, what="the idle node removed")
        events, _ = api.list(
            "/api/v1/events", {"fieldSelector": f"involvedObject.name={node['metadata']['name']}"}
        )
        assert any(e["reason"] == "ScaleDown" for e in events), [e["reason"] for e in events]


def test_exit_code_fails_the_pod_and_the_job(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("boom", run_seconds=1, exit_code=3))
        assert wait_for(lambda: job_condition(api, ns, "boom"), timeout=60) == "Failed"
        pod = job_pods(api, ns, "boom")[0]
        assert pod["status"]["phase"] == "Failed"
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert term["exitCode"] == 3
        assert term["reason"] == "Error"


def test_unannotated_job_completes_by_default(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("plain"))
        assert wait_for(lambda: job_condition(api, ns, "plain"), timeout=60) == "Complete"


def test_run_time_survives_a_patch_while_running(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("patched", run_seconds=6))
        wait_for(lambda: phase_of(api, ns, "patched") == "Running", timeout=60, what="Running")
        name = job_pods(api, ns, "patched")[0]["metadata"]["name"]
        time.sleep(3)
        api.patch(f"/api/v1/namespaces/{ns}/pods/{name}", {"metadata": {"labels": {"touched": "yes"}}})
        wait_for(lambda: phase_of(api, ns, "patched") == "Succeeded", timeout=30, what="Succeeded")
        pod = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        start = dt.datetime.fromisoformat(pod["status"]["startTime"])
        end = dt.datetime.fromisoformat(
            pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        )
        # A relative delay would have restarted at the patch (3 s + 6 s); the absolute end holds.
        assert 6 <= (end - start).total_seconds() <= 8


def test_long_running_pod_runs_until_its_job_is_deleted(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("long", run_seconds=3600))
        wait_for(lambda: phase_of(api, ns, "long") == "Running", timeout=60, what="Running")
        time.sleep(3)
        assert phase_of(api, ns, "long") == "Running"
        assert api.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/long", "Background")
        wait_for(lambda: job_pods(api, ns, "long") == [], timeout=60, what="pods gone")


def test_bare_pod_without_annotation_keeps_running(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(f"/api/v1/namespaces/{ns}/pods", gpu_pod("placeholder"))
        path = f"/api/v1/namespaces/{ns}/pods/placeholder"
        wait_for(lambda: api.get(path)["status"].get("phase") == "Running", timeout=60, what="Running")
        time.sleep(3)
        assert api.get(path)["status"]["phase"] == "Running"
        api.delete(path)


def test_kubeconfig_works_with_the_gateways_client_and_kubectl(dev_cluster) -> None:
    # The gateway's way in: lightkube loads the kubeconfig (CA, client certificate), KubeApi asks.
    from elasticityops.backends.kubernetes.api import KubeApi
    from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
    from elasticityops.backends.kubernetes.settings import KubernetesSettings

    settings = KubernetesSettings(kubeconfig=str(dev_cluster.kubeconfig_path))
    with BlockingKubeApi(KubeApi.connect(settings)) as api:
        # Baseline nodes only: autoscaled ones may come and go between the two listings.
        nodes, _ = api.list("/api/v1/nodes", {"labelSelector": "eops.dev/role=baseline"})
    listed = [n["metadata"]["name"] for n in nodes]
    assert len(listed) == dev_cluster.autoscaler_settings.baseline
    out = dev_cluster.kubectl("get", "nodes", "-l", "eops.dev/role=baseline", "-o", "name").stdout
    assert sorted(line.removeprefix("node/") for line in out.split()) == sorted(listed)
    version = dev_cluster.kubectl("version", "-o", "json").stdout
    assert '"gitVersion": "v1.36.3"' in version
