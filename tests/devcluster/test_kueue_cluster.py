"""The real Kueue on the dev cluster (`up --kueue`, devcluster/kueue_setup.py): the API server
reaches its webhooks on 127.0.0.1, and its quota decides which Job runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE
from elasticityops.domain.errors import NotFound
from helpers.kueue import KUEUE, condition, queued_job, workload_of

from .helpers import job_condition, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_lane("kueue")]


@contextlib.contextmanager
def _team_queue(api: BlockingKubeApi, ns: str, gpus: int) -> Iterator[str]:
    """A T4 flavor, a ClusterQueue of `gpus` T4 GPUs and the namespace's LocalQueue to it, all
    named after the test's namespace and removed afterwards."""
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": ns},
        "spec": {"nodeLabels": {ACCELERATOR_LABEL: "nvidia-tesla-t4"}},
    }
    quota = [
        {"name": GPU_RESOURCE, "nominalQuota": gpus},
        {"name": "cpu", "nominalQuota": 100},
        {"name": "memory", "nominalQuota": "1000Gi"},
    ]
    cluster_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": ns},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [GPU_RESOURCE, "cpu", "memory"],
                    "flavors": [{"name": ns, "resources": quota}],
                }
            ],
        },
    }
    local_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "team", "namespace": ns},
        "spec": {"clusterQueue": ns},
    }
    api.create(f"{KUEUE}/resourceflavors", flavor)
    api.create(f"{KUEUE}/clusterqueues", cluster_queue)
    api.create(f"{KUEUE}/namespaces/{ns}/localqueues", local_queue)
    try:
        yield "team"
    finally:
        for path in (f"{KUEUE}/clusterqueues/{ns}", f"{KUEUE}/resourceflavors/{ns}"):
            with contextlib.suppress(NotFound):
                api.delete(path)


def test_kueues_webhook_suspends_a_queued_job_as_it_is_created(dev_cluster: Any, dev_namespace: str) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api, _team_queue(api, ns, gpus=1) as queue:
        job = queued_job("held", queue, run_seconds=1)
        assert "suspend" not in job["spec"]
        created = api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)
        # The answer to the create already carries what the mutating webhook set: the API server
        # called Kueue on 127.0.0.1 with the CA the rotator kept.
        assert created["spec"]["suspend"] is True
        assert wait_for(lambda: job_condition(api, ns, "held"), timeout=60) == "Complete"


def test_the_quota_runs_one_job_and_holds_the_next_until_it_ends(
    dev_cluster: Any, dev_namespace: str
) -> None:
    ns = dev_namespace
    jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
    with dev_cluster.api() as api, _team_queue(api, ns, gpus=1) as queue:
        api.create(jobs, queued_job("first", queue, run_seconds=8))
        wait_for(lambda: condition(workload_of(api, ns, "first"), "Admitted").get("status") == "True", 60)
        api.create(jobs, queued_job("second", queue, run_seconds=1))
        waiting = wait_for(lambda: condition(workload_of(api, ns, "second"), "QuotaReserved") or None, 60)
        assert waiting["status"] == "False"
        assert "insufficient" in waiting["message"].lower(), waiting["message"]
        assert api.get(f"{jobs}/second")["spec"]["suspend"] is True, "no pod while there is no quota"
        assert job_condition(api, ns, "first") is None, "the first one still runs"
        assert wait_for(lambda: job_condition(api, ns, "first"), timeout=60) == "Complete"
        assert wait_for(lambda: job_condition(api, ns, "second"), timeout=60) == "Complete"
        admitted = condition(workload_of(api, ns, "second"), "Admitted")
        assert admitted["status"] == "True"


def test_a_workload_is_read_at_the_older_version_through_the_conversion_webhook(
    dev_cluster: Any, dev_namespace: str
) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api, _team_queue(api, ns, gpus=1) as queue:
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", queued_job("old", queue, run_seconds=1))
        workload = wait_for(lambda: workload_of(api, ns, "old"), timeout=60)
        name = workload["metadata"]["name"]
        # Stored as v1beta2; v1beta1 is served by converting through Kueue's /convert on 127.0.0.1.
        old = api.get(f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads/{name}")
        assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
        assert old["spec"]["queueName"] == queue
