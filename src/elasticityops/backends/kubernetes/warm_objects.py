"""Pure builders of the warm-capacity objects of one shape, and of its pod's spec.

Two mechanisms hold warm GPU nodes for the autoscaler to keep (or add):
- placeholders: a Deployment of pause pods at PriorityClass eops-placeholder (-10, the
  autoscaler's expendable cutoff, so they still trigger scale-up). A real Job's pod preempts
  one; the ReplicaSet brings it back, now Pending, and the autoscaler adds a node for it.
- buffer: a CapacityBuffer (autoscaling.x-k8s.io, active capacity) that points at a PodTemplate;
  the autoscaler injects virtual pods of that template, so spare nodes exist with no pod on
  them and real pods land there with no preemption.
The pod asks for exactly what the shape's Jobs ask (GPU type and count, CPU, memory, the GPU
toleration and node selector), or it would warm a node those Jobs cannot use. Names derive from
the gateway instance and the shape, so a restarted controller finds its objects and never
makes a second set."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from elasticityops.backends.kubernetes.labels import (
    ACCELERATOR_LABEL,
    COMPONENT_LABEL,
    DRIVER_VERSION_LABEL,
    GPU_RESOURCE,
    GPU_TYPE_LABEL,
    PLACEHOLDER_PRIORITY_CLASS,
    WARM_SHAPE_LABEL,
)
from elasticityops.backends.kubernetes.manifests import container_requests, owner_labels
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.headroom.warm_units import WarmShape

WARM_COMPONENT = "warm-capacity"
BUFFER_API = "autoscaling.x-k8s.io/v1beta1"
BUFFER_STRATEGY = "buffer.x-k8s.io/active-capacity"
PAUSE_CONTAINER = "pause"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def shape_of(spec: FunctionSpec, settings: KubernetesSettings) -> WarmShape:
    """The warm shape of a function's Jobs (raises InvalidInput as build_job would)."""
    requests = container_requests(spec, settings)
    return WarmShape(spec.gpu.type, spec.gpu.count, requests["cpu"], requests["memory"])


def warm_selector(instance: str) -> str:
    """Label selector of every warm object one gateway owns."""
    labels = {**owner_labels(instance), COMPONENT_LABEL: WARM_COMPONENT}
    return ",".join(f"{k}={v}" for k, v in labels.items())


def warm_name(shape: WarmShape, instance: str) -> str:
    return warm_name_of_key(shape.key, instance)


def warm_name_of_key(key: str, instance: str) -> str:
    """`eops-warm-<instance>-<shape key>`, a DNS label of at most 52 characters (a pod name adds
    ReplicaSet and pod suffixes); an instance name that does not fit is hashed."""
    name = f"eops-warm-{instance}-{key}"
    if len(name) <= 52 and _DNS_LABEL.match(name):
        return name
    return f"eops-warm-{hashlib.sha256(instance.encode()).hexdigest()[:12]}-{key}"


def _labels(shape: WarmShape, settings: KubernetesSettings) -> dict[str, str]:
    return {
        **owner_labels(settings.instance),
        COMPONENT_LABEL: WARM_COMPONENT,
        WARM_SHAPE_LABEL: shape.key,
        GPU_TYPE_LABEL: shape.gpu_type,
    }


def warm_pod_spec(shape: WarmShape, settings: KubernetesSettings, *, placeholder: bool) -> dict[str, Any]:
    """The pod of one warm unit: a pause container with the shape's requests, where the shape's
    Jobs would go. A placeholder runs at eops-placeholder so real pods preempt it; a buffer's
    template carries no priority (its pods are virtual, injected by the autoscaler)."""
    gpus = str(shape.gpu_count)
    selector = {ACCELERATOR_LABEL: shape.gpu_type}
    if settings.gpu_driver_version:
        selector[DRIVER_VERSION_LABEL] = settings.gpu_driver_version
    spec: dict[str, Any] = {
        "nodeSelector": selector,
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        # A preempted placeholder must give its node up at once: a real job waits on it.
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": PAUSE_CONTAINER,
                "image": settings.placeholder_image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "requests": {"cpu": shape.cpu, "memory": shape.memory, GPU_RESOURCE: gpus},
                    "limits": {GPU_RESOURCE: gpus},
                },
            }
        ],
    }
    if placeholder:
        spec["priorityClassName"] = PLACEHOLDER_PRIORITY_CLASS
    return spec


def placeholder_deployment(shape: WarmShape, replicas: int, settings: KubernetesSettings) -> dict[str, Any]:
    name = warm_name(shape, settings.instance)
    labels = _labels(shape, settings)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {WARM_SHAPE_LABEL: shape.key, **owner_labels(settings.instance)}},
            # Placeholders are interchangeable: a rolling update's surge would only buy nodes.
            "strategy": {"type": "Recreate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": warm_pod_spec(shape, settings, placeholder=True),
            },
        },
    }


def buffer_pod_template(shape: WarmShape, settings: KubernetesSettings) -> dict[str, Any]:
    name = warm_name(shape, settings.instance)
    labels = _labels(shape, settings)
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": warm_pod_spec(shape, settings, placeholder=False),
        },
    }


def capacity_buffer(shape: WarmShape, replicas: int, settings: KubernetesSettings) -> dict[str, Any]:
    name = warm_name(shape, settings.instance)
    return {
        "apiVersion": BUFFER_API,
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": _labels(shape, settings)},
        "spec": {
            "podTemplateRef": {"name": name},
            "replicas": replicas,
            "provisioningStrategy": BUFFER_STRATEGY,
        },
    }


def replicas_of(obj: dict[str, Any]) -> int:
    """The replicas a Deployment or CapacityBuffer asks for (0 when unset)."""
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and value >= 0 else 0


def shape_key_of(obj: dict[str, Any]) -> str | None:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(WARM_SHAPE_LABEL)
    return value if isinstance(value, str) else None
