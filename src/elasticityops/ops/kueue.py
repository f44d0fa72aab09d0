"""`eops render kueue`: the Kueue objects that make a team's GPU quota the cluster's own, for the
gateway's `--admission kueue`. Pure: `render_kueue(KueueInputs) -> dict[file name, YAML]`.

- One ResourceFlavor per GPU type of the budget, matching GKE's accelerator label (the gateway's
  Jobs select their node by it, so Kueue assigns each Job the flavor of its GPU type).
- One ClusterQueue whose nominal quota per flavor is the GPU budget for that type, in `eops
  serve`'s syntax (`--gpu-budget nvidia-tesla-t4=8,nvidia-l4=2`: Kueue's quota is per flavor, so
  a bare number is refused). CPU and memory are covered too (Kueue admits nothing that asks for
  a resource its queue does not cover), at what the budget's machines hold, so only GPUs bind.
  Within the queue a higher WorkloadPriorityClass preempts a lower one.
- The namespace's LocalQueue, which the gateway's Jobs name (`kueue.x-k8s.io/queue-name`).
- WorkloadPriorityClasses from the gateway's priority levels (ops/priorities.py, one definition).
- Unless `--provisioning-class none`: a ProvisioningRequestConfig and its AdmissionCheck, so a
  Job is admitted only once its capacity is provisioned, all or nothing: GKE's Dynamic Workload
  Scheduler (`queued-provisioning.gke.io`, the default) or upstream cluster-autoscaler's classes
  (the dev cluster's)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.budget import parse_gpu_budget
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.knobs import knob
from elasticityops.ops.gke.inputs import GPU_SHAPES
from elasticityops.ops.priorities import workload_priority_classes
from elasticityops.ops.yaml_docs import Document, Manifest, dump_documents

KUEUE_API = "kueue.x-k8s.io/v1beta2"
DWS = "queued-provisioning.gke.io"
PROVISIONING_CLASSES = (
    DWS,
    "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
    "check-capacity.autoscaling.x-k8s.io",
)
NO_PROVISIONING = "none"
CHECK_NAME = "eops-provisioning"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DEFAULT_NAMESPACE = KubernetesSettings().namespace


@dataclass(frozen=True)
class KueueInputs:
    """What `eops render kueue` renders; each knob is one of its flags (elasticityops/knobs.py)."""

    gpu_budget: str
    namespace: str = knob(_DEFAULT_NAMESPACE, help="The gateway's namespace (its Jobs and the LocalQueue).")
    local_queue: str = knob("eops", help="The LocalQueue the gateway submits to (--kube-local-queue).")
    cluster_queue: str = knob("eops", help="The ClusterQueue holding the GPU quota.")
    provisioning_class: str = knob(
        DWS,
        help="ProvisioningRequest class Jobs wait for capacity by: queued-provisioning.gke.io (GKE's "
        "Dynamic Workload Scheduler), best-effort-atomic-scale-up.autoscaling.x-k8s.io or "
        "check-capacity.autoscaling.x-k8s.io (upstream's autoscaler), or none.",
    )


def _problems(inputs: KueueInputs) -> list[FieldProblem]:
    problems = []
    for field, value in (
        ("namespace", inputs.namespace),
        ("local-queue", inputs.local_queue),
        ("cluster-queue", inputs.cluster_queue),
    ):
        if not _DNS_LABEL.fullmatch(value):
            problems.append(
                FieldProblem(
                    field, f"{value!r} is not a DNS label", "lower-case letters, digits and -, at most 63"
                )
            )
    if inputs.provisioning_class not in (*PROVISIONING_CLASSES, NO_PROVISIONING):
        problems.append(
            FieldProblem(
                "provisioning-class",
                f"{inputs.provisioning_class!r} is not a class Kueue's ProvisioningRequest check knows here",
                f"use one of: {', '.join(PROVISIONING_CLASSES)}, or {NO_PROVISIONING}",
            )
        )
    return problems


def quota_per_type(raw: str) -> dict[str, int]:
    """The budget in `eops serve --gpu-budget`'s syntax, per GPU type (InvalidInput otherwise)."""
    try:
        budget = parse_gpu_budget(raw)
    except ValueError as exc:
        # The parser's message already says what to write instead.
        raise InvalidInput([FieldProblem("gpu-budget", str(exc), "")]) from None
    if budget is None or budget.total is not None or not budget.per_type:
        raise InvalidInput(
            [
                FieldProblem(
                    "gpu-budget",
                    f"{raw!r} is no per-type budget: Kueue's quota is per flavor, one per GPU type",
                    "name each type, e.g. --gpu-budget nvidia-tesla-t4=8,nvidia-l4=2",
                )
            ]
        )
    return {kind: cap for kind, cap in budget.per_type if cap is not None}


def _flavor(gpu_type: str) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": gpu_type},
        "spec": {"nodeLabels": {ACCELERATOR_LABEL: gpu_type}},
    }


def machine_per_gpu(gpu_type: str) -> tuple[int, int]:
    """vCPUs and GB of memory that come with one GPU of `gpu_type`: its machine's, or 8 and 32
    for a type without a known machine."""
    shape = GPU_SHAPES.get(gpu_type)
    return (shape.vcpus, shape.memory_gb) if shape is not None else (8, 32)


def _quota(gpu_type: str, gpus: int) -> dict[str, Any]:
    vcpus, memory_gb = machine_per_gpu(gpu_type)
    return {
        "name": gpu_type,
        "resources": [
            {"name": GPU_RESOURCE, "nominalQuota": gpus},
            {"name": "cpu", "nominalQuota": gpus * vcpus},
            {"name": "memory", "nominalQuota": f"{gpus * memory_gb}Gi"},
        ],
    }


def _cluster_queue(inputs: KueueInputs, quota: dict[str, int]) -> Manifest:
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": inputs.namespace}},
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [
            {
                "coveredResources": [GPU_RESOURCE, "cpu", "memory"],
                "flavors": [_quota(kind, gpus) for kind, gpus in sorted(quota.items())],
            }
        ],
    }
    if inputs.provisioning_class != NO_PROVISIONING:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK_NAME}]}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": inputs.cluster_queue},
        "spec": spec,
    }


def _provisioning(inputs: KueueInputs) -> list[Manifest]:
    if inputs.provisioning_class == NO_PROVISIONING:
        return []
    config = {
        "apiVersion": KUEUE_API,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": CHECK_NAME},
        "spec": {"provisioningClassName": inputs.provisioning_class, "managedResources": [GPU_RESOURCE]},
    }
    check = {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK_NAME},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": CHECK_NAME,
            },
        },
    }
    return [config, check]


def kueue_manifests(inputs: KueueInputs) -> list[Manifest]:
    """Every object, in an order `kubectl apply` takes in one go (each before what names it)."""
    problems = _problems(inputs)
    try:
        quota = quota_per_type(inputs.gpu_budget)
    except InvalidInput as exc:
        problems = list(exc.problems) + problems
        quota = {}
    if problems:
        raise InvalidInput(problems)
    local_queue = {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": inputs.local_queue, "namespace": inputs.namespace},
        "spec": {"clusterQueue": inputs.cluster_queue},
    }
    return [
        *(_flavor(kind) for kind in sorted(quota)),
        *workload_priority_classes(),
        *_provisioning(inputs),
        _cluster_queue(inputs, quota),
        local_queue,
    ]


def render_kueue(inputs: KueueInputs) -> dict[str, str]:
    """The objects as one YAML stream, `kueue.yaml` (`eops render kueue | kubectl apply -f -`)."""
    header = (
        f"Kueue objects for ElasticityOps: LocalQueue {inputs.local_queue} in {inputs.namespace}, "
        f"ClusterQueue {inputs.cluster_queue}.\nGPU quota per type: {inputs.gpu_budget}; "
        f"capacity by: {inputs.provisioning_class}."
    )
    return {"kueue.yaml": dump_documents([Document(m) for m in kueue_manifests(inputs)], header)}
