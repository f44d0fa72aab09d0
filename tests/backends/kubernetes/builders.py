"""Object builders for the Kubernetes backend tests: a function spec, an invocation, and
realistic Job / Pod / Event dicts as the API server sends them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from elasticityops.backends.kubernetes.labels import INVOCATION_LABEL, MANAGED_BY, MANAGED_BY_LABEL
from elasticityops.domain.functions import FunctionSpec, Priority
from elasticityops.domain.invocations import Invocation, State, Timeline

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
INV = "inv-01kb0000000000000000000000"


def spec(**fields: Any) -> FunctionSpec:
    base: dict[str, Any] = {"name": "embed", "image": "worker:1", "command": ["python", "w.py"]}
    return FunctionSpec.model_validate({**base, **fields})


def invocation(
    inv_id: str = INV, priority: Priority = Priority.normal, state: State = State.pending
) -> Invocation:
    return Invocation(
        id=inv_id, function="embed", state=state, priority=priority, timeline=Timeline(accepted=T0)
    )


def ts(seconds: float) -> str:
    return datetime.fromtimestamp(T0.timestamp() + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    *,
    node: str | None = None,
    phase: str = "Pending",
    conditions: list[dict[str, Any]] | None = None,
    state: dict[str, Any] | None = None,
    deleting: bool = False,
    reason: str | None = None,
    message: str | None = None,
    inv: str = INV,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"eops-{inv}-x7k2p",
        "namespace": "elasticityops",
        "uid": "0b9a",
        "resourceVersion": "100",
        "creationTimestamp": ts(0),
        "labels": {
            MANAGED_BY_LABEL: MANAGED_BY,
            INVOCATION_LABEL: inv,
            "batch.kubernetes.io/job-name": f"eops-{inv}",
        },
    }
    if deleting:
        meta["deletionTimestamp"] = ts(100)
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if state is not None:
        status["containerStatuses"] = [
            {"name": "job", "image": "worker:1", "ready": False, "restartCount": 0, "state": state}
        ]
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    spec_: dict[str, Any] = {"containers": [{"name": "job", "image": "worker:1"}]}
    if node:
        spec_["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec_, "status": status}


def scheduled(at: float = 30) -> dict[str, Any]:
    return {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(at)}


def unschedulable(message: str = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.") -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
        "lastTransitionTime": ts(1),
    }


def job(conditions: list[dict[str, Any]] | None = None, inv: str = INV, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"eops-{inv}",
            "uid": "7c1f",
            "creationTimestamp": ts(0),
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, INVOCATION_LABEL: inv},
        },
        "spec": {
            "activeDeadlineSeconds": 600,
            "template": {
                "spec": {"containers": [{"name": "job", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
            },
        },
        "status": {"conditions": conditions or [], **status},
    }


def condition(kind: str, reason: str = "", message: str = "", at: float = 90) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": ts(at),
    }


def k8s_event(
    reason: str, message: str, *, pod_name: str = f"eops-{INV}-x7k2p", at: float = 5
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod_name}.17a", "namespace": "elasticityops", "resourceVersion": "7"},
        "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": "elasticityops"},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": "cluster-autoscaler"},
        "firstTimestamp": ts(at),
        "lastTimestamp": ts(at),
        "count": 1,
    }


def gpu_node(
    name: str, created: float | datetime, gpus: int = 1, *, ready: bool = True, spot: bool = False
) -> dict[str, Any]:
    """A T4 Node as the API server sends it, created at `created` (a time, or seconds after the
    epoch); a Spot VM carries both labels GKE gives one."""
    when = created if isinstance(created, datetime) else datetime.fromtimestamp(created, UTC)
    labels = {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    if spot:
        labels |= {"cloud.google.com/gke-spot": "true", "cloud.google.com/gke-provisioning": "spot"}
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "labels": labels,
        },
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
