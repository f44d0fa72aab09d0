"""What the Kueue cluster tests (tests/devcluster, tests/ops) read and submit: Workloads by the Job
that owns them, their conditions, and Jobs that name a LocalQueue."""

from __future__ import annotations

from typing import Any

from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.labels import (
    ACCELERATOR_LABEL,
    QUEUE_NAME_LABEL,
    WORKLOAD_PRIORITY_LABEL,
)
from elasticityops.devcluster.workloads import gpu_job

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def queued_job(
    name: str, queue: str, run_seconds: float, priority_class: str | None = None
) -> dict[str, Any]:
    """A one-T4 Job submitted to `queue` (at `priority_class`, a WorkloadPriorityClass), selecting
    the T4 nodes as the gateway's Jobs do."""
    job = gpu_job(name, run_seconds=run_seconds)
    labels = {QUEUE_NAME_LABEL: queue}
    if priority_class is not None:
        labels[WORKLOAD_PRIORITY_LABEL] = priority_class
    job["metadata"]["labels"] = labels
    job["spec"]["template"]["spec"]["nodeSelector"] = {ACCELERATOR_LABEL: "nvidia-tesla-t4"}
    return job


def workload_of(api: BlockingKubeApi, ns: str, job: str) -> dict[str, Any] | None:
    """The Workload Kueue made for Job `job`, None until it has one."""
    items, _ = api.list(f"{KUEUE}/namespaces/{ns}/workloads")
    for workload in items:
        if any(o.get("name") == job for o in workload["metadata"].get("ownerReferences") or []):
            return workload
    return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The object's condition of type `kind` ({} while it has none)."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return {}


def admitted(api: BlockingKubeApi, ns: str, job: str) -> dict[str, Any] | None:
    """The Job's Workload once Kueue has admitted it, else None."""
    workload = workload_of(api, ns, job)
    return workload if condition(workload, "Admitted").get("status") == "True" else None
