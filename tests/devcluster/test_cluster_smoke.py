"""The pod-simulation contract against the real control plane. (The issue's smoke test, a GPU Job
scaling a node up and down, is test_autoscaler.py's scale-up timeline.)"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from typing import Any

import pytest

from elasticityops.devcluster.workloads import gpu_job, gpu_pod
from elasticityops.domain.errors import Conflict

from .helpers import job_condition, job_pods, phase_of, wait_for

pytestmark = pytest.mark.cluster

# These pods must stay where they run while the shared cluster's other tests burst: at priority 0
# kube-scheduler took them as victims for the gateways' pods (a pod gone mid-test, seen in CI). Above
# every gateway's class, and never preempting anything themselves.
STEADY = "test-steady"  # not "eops-": the doctor reads those as ours


@pytest.fixture
def steady(dev_cluster: Any) -> str:
    # made by an earlier test, or here
    with dev_cluster.api() as api, contextlib.suppress(Conflict):
        api.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": STEADY},
                "value": 1_000_000,
                "preemptionPolicy": "Never",
                "description": "test pods no burst beside them may preempt",
            },
        )
    return STEADY


def phase(pod: dict[str, Any]) -> str | None:
    phase_: str | None = pod["status"].get("phase")
    return phase_


def test_exit_code_fails_the_pod_and_the_job(dev_cluster: Any, dev_namespace: str, steady: str) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        boom = gpu_job("boom", run_seconds=1, exit_code=3, priority_class=steady)
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", boom)
        # The pod is read as it fails: once it has, its node is empty, and the autoscaler may remove
        # the node and the pod garbage collector the pod before the Job controller writes Failed.
        pod = wait_for(
            lambda: next((p for p in job_pods(api, ns, "boom") if phase(p) == "Failed"), None),
            timeout=180,  # a scale-up first, on a loaded machine
            what="the pod Failed",
        )
        assert wait_for(lambda: job_condition(api, ns, "boom"), timeout=60) == "Failed"
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert term["exitCode"] == 3
        assert term["reason"] == "Error"


def test_unannotated_job_completes_by_default(dev_cluster: Any, dev_namespace: str, steady: str) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("plain", priority_class=steady))
        assert wait_for(lambda: job_condition(api, ns, "plain"), timeout=60) == "Complete"


def test_run_time_survives_a_patch_while_running(dev_cluster: Any, dev_namespace: str, steady: str) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(
            f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("patched", run_seconds=6, priority_class=steady)
        )
        wait_for(lambda: phase_of(api, ns, "patched") == "Running", timeout=60, what="Running")
        name = job_pods(api, ns, "patched")[0]["metadata"]["name"]
        time.sleep(3)
        api.patch(f"/api/v1/namespaces/{ns}/pods/{name}", {"metadata": {"labels": {"touched": "yes"}}})
        # A wait, not a timing: the run's length is asserted below from the pod's own times.
        wait_for(lambda: phase_of(api, ns, "patched") == "Succeeded", timeout=90, what="Succeeded")
        pod = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        start = dt.datetime.fromisoformat(pod["status"]["startTime"])
        end = dt.datetime.fromisoformat(
            pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
        )
        # A relative delay would have restarted at the patch (3 s + 6 s); the absolute end holds.
        assert 6 <= (end - start).total_seconds() <= 8


def test_long_running_pod_runs_until_its_job_is_deleted(
    dev_cluster: Any, dev_namespace: str, steady: str
) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(
            f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("long", run_seconds=3600, priority_class=steady)
        )
        wait_for(lambda: phase_of(api, ns, "long") == "Running", timeout=60, what="Running")
        time.sleep(3)
        assert phase_of(api, ns, "long") == "Running"
        assert api.delete(f"/apis/batch/v1/namespaces/{ns}/jobs/long", "Background")
        wait_for(lambda: job_pods(api, ns, "long") == [], timeout=60, what="pods gone")


def test_bare_pod_without_annotation_keeps_running(dev_cluster: Any, dev_namespace: str, steady: str) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        api.create(f"/api/v1/namespaces/{ns}/pods", gpu_pod("placeholder", priority_class=steady))
        path = f"/api/v1/namespaces/{ns}/pods/placeholder"
        wait_for(lambda: api.get(path)["status"].get("phase") == "Running", timeout=60, what="Running")
        time.sleep(3)
        assert api.get(path)["status"]["phase"] == "Running"
        api.delete(path)


def test_kubeconfig_works_with_the_gateways_client_and_kubectl(dev_cluster: Any) -> None:
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
