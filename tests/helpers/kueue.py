"""What the Kueue cluster tests (tests/devcluster, tests/ops) read and submit: Workloads by the Job
that owns them, their conditions, and Jobs that name a LocalQueue."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.labels import (
    ACCELERATOR_LABEL,
    QUEUE_NAME_LABEL,
    WORKLOAD_PRIORITY_LABEL,
)
from elasticityops.devcluster.install import object_path
from elasticityops.devcluster.workloads import gpu_job
from elasticityops.domain.errors import Conflict, NotFound
from elasticityops.ops.kueue import KueueInputs, kueue_manifests

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
T = TypeVar("T")


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


@contextlib.contextmanager
def applied(api: BlockingKubeApi, manifests: list[dict[str, Any]]) -> Iterator[None]:
    """Each object created as `kubectl apply` would (one named alike by an earlier test of this
    lane is taken as it is), and the whole set removed afterwards, last first."""
    for manifest in manifests:
        with contextlib.suppress(Conflict):
            api.create(object_path(manifest), manifest)
    try:
        yield
    finally:
        for manifest in reversed(manifests):
            with contextlib.suppress(NotFound):
                api.delete(f"{object_path(manifest)}/{manifest['metadata']['name']}")


def wait_for(fn: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = fn()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def job_condition(api: BlockingKubeApi, ns: str, job: str) -> str | None:
    """Complete or Failed once the Job controller has decided, else None."""
    for cond in (api.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{job}").get("status") or {}).get(
        "conditions"
    ) or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return str(cond["type"])
    return None


def wait_active(api: BlockingKubeApi, path: str) -> None:
    def active() -> bool:
        return condition(api.get(path), "Active").get("status") == "True"

    wait_for(active, 60, f"{path} active")


@contextlib.contextmanager
def kueue_queues(
    api: BlockingKubeApi, ns: str, gpu_budget: str, provisioning_class: str = "none"
) -> Iterator[KueueInputs]:
    """`eops render kueue`'s objects for namespace `ns` (a ClusterQueue named after it, holding
    `gpu_budget`), applied and Active (its admission check too, where capacity is provisioned),
    removed afterwards."""
    inputs = KueueInputs(
        gpu_budget=gpu_budget, namespace=ns, cluster_queue=ns, provisioning_class=provisioning_class
    )
    with applied(api, kueue_manifests(inputs)):
        if provisioning_class != "none":
            wait_active(api, f"{KUEUE}/admissionchecks/eops-provisioning")
        wait_active(api, f"{KUEUE}/clusterqueues/{ns}")
        yield inputs
