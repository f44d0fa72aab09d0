"""`eops render kueue` applied to the real Kueue (the `kueue` lane's cluster, with upstream's
cluster-autoscaler and its ProvisioningRequest CRD): every object is admitted by Kueue's own
webhooks, the queue and its admission check turn active, and Jobs that name the queue run as
its quota allows, with the flavor of their GPU type and their WorkloadPriorityClass."""

from __future__ import annotations

from typing import Any

import pytest

from elasticityops.ops.kueue import KueueInputs, kueue_manifests
from elasticityops.ops.priorities import workload_priority_classes
from helpers.kueue import (
    KUEUE,
    admitted,
    applied,
    condition,
    job_condition,
    queued_job,
    wait_active,
    wait_for,
    workload_of,
)

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_lane("kueue")]


def test_every_rendered_object_is_admitted_and_the_queue_and_its_check_turn_active(
    dev_cluster: Any, dev_namespace: str
) -> None:
    ns = dev_namespace
    inputs = KueueInputs(
        gpu_budget="nvidia-tesla-t4=1",
        namespace=ns,
        cluster_queue=ns,
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    )
    with dev_cluster.api() as api, applied(api, kueue_manifests(inputs)):
        # The ProvisioningRequest CRD is there (the autoscaler's): Kueue's check controller is up.
        wait_active(api, f"{KUEUE}/admissionchecks/eops-provisioning")
        wait_active(api, f"{KUEUE}/clusterqueues/{ns}")
        local = api.get(f"{KUEUE}/namespaces/{ns}/localqueues/eops")
        assert local["spec"]["clusterQueue"] == ns


def test_the_rendered_quota_runs_one_job_and_holds_the_next(dev_cluster: Any, dev_namespace: str) -> None:
    ns = dev_namespace
    inputs = KueueInputs(
        gpu_budget="nvidia-tesla-t4=1", namespace=ns, cluster_queue=ns, provisioning_class="none"
    )
    jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
    with dev_cluster.api() as api, applied(api, kueue_manifests(inputs)):
        wait_active(api, f"{KUEUE}/clusterqueues/{ns}")
        # The second is sent once the first is admitted: Kueue's Job controller makes Workloads
        # asynchronously, and on a loaded machine the second's could come after the first ended.
        api.create(jobs, queued_job("first", "eops", 20, "eops-normal"))
        try:
            first = wait_for(lambda: admitted(api, ns, "first"), 120, "the first admitted")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its Workload: {workload_of(api, ns, 'first')}") from None
        normal = next(c for c in workload_priority_classes() if c["metadata"]["name"] == "eops-normal")
        assert first["spec"]["priority"] == normal["value"], "its WorkloadPriorityClass was found"
        [assigned] = first["status"]["admission"]["podSetAssignments"]
        assert assigned["flavors"]["nvidia.com/gpu"] == "nvidia-tesla-t4"
        api.create(jobs, queued_job("second", "eops", 1, "eops-normal"))
        waiting = wait_for(
            lambda: condition(workload_of(api, ns, "second"), "QuotaReserved") or None, 60, "its word"
        )
        # One T4 of quota: the second waits, for quota, while the first runs.
        assert waiting["status"] == "False", waiting
        assert "insufficient" in waiting["message"].lower(), waiting["message"]
        assert job_condition(api, ns, "first") is None, "the first one still runs"
        assert wait_for(lambda: job_condition(api, ns, "first"), 120, "first to end") == "Complete"
        assert wait_for(lambda: job_condition(api, ns, "second"), 120, "second to end") == "Complete"


def test_a_job_is_admitted_once_its_provisioning_request_is_provisioned(
    dev_cluster: Any, dev_namespace: str
) -> None:
    ns = dev_namespace
    inputs = KueueInputs(
        gpu_budget="nvidia-tesla-t4=1",
        namespace=ns,
        cluster_queue=ns,
        provisioning_class="best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    )
    with dev_cluster.api() as api, applied(api, kueue_manifests(inputs)):
        wait_active(api, f"{KUEUE}/admissionchecks/eops-provisioning")
        wait_active(api, f"{KUEUE}/clusterqueues/{ns}")
        job = queued_job("provisioned", "eops", 2, "eops-normal")
        pod = job["spec"]["template"]["spec"]
        # As the gateway's Jobs carry it (backends/kubernetes/manifests.py). The API server adds it
        # to pods itself (ExtendedResourceToleration), but the autoscaler sizes a
        # ProvisioningRequest from Kueue's PodTemplate, which no admission plugin touches: without
        # it no GPU node fits, and the request stays "Capacity is not found".
        pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)

        try:
            workload = wait_for(
                lambda: admitted(api, ns, "provisioned"), 180, "admitted through its ProvisioningRequest"
            )
        except AssertionError as exc:
            status = (workload_of(api, ns, "provisioned") or {}).get("status")
            raise AssertionError(f"{exc}; its Workload's status: {status}") from None
        [check] = workload["status"]["admissionChecks"]
        assert (check["name"], check["state"]) == ("eops-provisioning", "Ready"), check
        requests, _ = api.list(f"/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/provisioningrequests")
        assert [condition(r, "Provisioned").get("status") for r in requests] == ["True"]
        assert wait_for(lambda: job_condition(api, ns, "provisioned"), 120, "the job to end") == "Complete"
