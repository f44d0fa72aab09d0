"""Raw Kubernetes API objects (plain dicts, as the API returns them) to snapshot data. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.backends.kubernetes.objects import epoch
from elasticityops.ops.doctor.snapshot import (
    ApiServiceInfo,
    Condition,
    DaemonSetInfo,
    EventInfo,
    HpaInfo,
    HpaMetric,
    KueueObject,
    LabelSelector,
    NodeInfo,
    PendingPod,
    PriorityClassInfo,
    Taint,
)

Raw = Mapping[str, Any]

# The NVIDIA plugin (Helm or static manifest) and GKE's own plugin.
DEVICE_PLUGIN_NAME_RE = re.compile(r"(nvidia.*device-plugin|device-plugin.*nvidia|nvidia-gpu-device-plugin)")


def _count(quantity: Any) -> int:
    if quantity is None:
        return 0
    try:
        return int(Decimal(str(quantity)))
    except (InvalidOperation, ValueError):
        return 0


def _conditions(raw: Iterable[Raw] | None) -> tuple[Condition, ...]:
    return tuple(
        Condition(
            str(c.get("type", "")),
            str(c.get("status", "")),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
        )
        for c in raw or ()
    )


def _ready_for(conditions: Iterable[Raw] | None, now: float | None) -> float | None:
    for c in conditions or ():
        if c.get("type") == "Ready" and c.get("status") == "True" and now is not None:
            since = epoch(c.get("lastTransitionTime"))
            return None if since is None else max(now - since, 0.0)
    return None


def node_info(raw: Raw, now: float | None = None) -> NodeInfo:
    """A node as doctor sees it; `now` (epoch seconds) dates how long it has been Ready."""
    meta, spec, status = raw.get("metadata", {}), raw.get("spec", {}), raw.get("status", {})
    ready = any(c.type == "Ready" and c.status == "True" for c in _conditions(status.get("conditions")))
    return NodeInfo(
        name=str(meta.get("name", "")),
        ready=ready,
        labels=dict(meta.get("labels") or {}),
        taints=tuple(
            Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
            for t in spec.get("taints") or ()
        ),
        gpu_capacity=_count((status.get("capacity") or {}).get(GPU_RESOURCE)),
        gpu_allocatable=_count((status.get("allocatable") or {}).get(GPU_RESOURCE)),
        unschedulable=bool(spec.get("unschedulable")),
        ready_for_s=_ready_for(status.get("conditions"), now),
    )


def is_device_plugin(raw: Raw) -> bool:
    return bool(DEVICE_PLUGIN_NAME_RE.search(str(raw.get("metadata", {}).get("name", ""))))


def daemonset_info(raw: Raw) -> DaemonSetInfo:
    meta, status = raw.get("metadata", {}), raw.get("status", {})
    return DaemonSetInfo(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        desired=int(status.get("desiredNumberScheduled") or 0),
        ready=int(status.get("numberReady") or 0),
    )


def api_service_info(raw: Raw) -> ApiServiceInfo:
    conditions = _conditions(raw.get("status", {}).get("conditions"))
    available = next((c for c in conditions if c.type == "Available"), None)
    return ApiServiceInfo(
        name=str(raw.get("metadata", {}).get("name", "")),
        available=available is not None and available.status == "True",
        message=(
            f"{available.reason}: {available.message}" if available and available.status != "True" else ""
        ),
    )


_METRIC_KEYS = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}


def _metric_name(entry: Raw) -> tuple[str, str]:
    kind = str(entry.get("type", ""))
    body = entry.get(_METRIC_KEYS.get(kind, ""), {}) or {}
    if kind in ("Resource", "ContainerResource"):
        return kind, str(body.get("name", ""))
    return kind, str((body.get("metric") or {}).get("name", ""))


def _has_value(entry: Raw) -> bool:
    kind = str(entry.get("type", ""))
    current = (entry.get(_METRIC_KEYS.get(kind, ""), {}) or {}).get("current") or {}
    return any(current.get(key) is not None for key in ("value", "averageValue", "averageUtilization"))


def hpa_info(raw: Raw) -> HpaInfo:
    meta, spec, status = raw.get("metadata", {}), raw.get("spec", {}), raw.get("status", {})
    current = {_metric_name(entry) for entry in status.get("currentMetrics") or () if _has_value(entry)}
    metrics = []
    for entry in spec.get("metrics") or ():
        kind, name = _metric_name(entry)
        metrics.append(HpaMetric(type=kind, name=name, has_current=(kind, name) in current))
    ref = spec.get("scaleTargetRef", {})
    return HpaInfo(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        target=f"{ref.get('kind', '?')}/{ref.get('name', '?')}",
        metrics=tuple(metrics),
        conditions=_conditions(status.get("conditions")),
    )


def priority_class_info(raw: Raw) -> PriorityClassInfo:
    return PriorityClassInfo(
        name=str(raw.get("metadata", {}).get("name", "")),
        value=int(raw.get("value") or 0),
        preemption_policy=str(raw.get("preemptionPolicy") or "PreemptLowerPriority"),
    )


def _active(raw: Raw) -> Condition | None:
    found = [c for c in _conditions((raw.get("status") or {}).get("conditions")) if c.type == "Active"]
    return found[0] if found else None


def _stopped(spec: Raw) -> str:
    stop = str(spec.get("stopPolicy") or "None")
    return "" if stop == "None" else stop


def label_selector(raw: Raw | None) -> LabelSelector | None:
    """A label selector; None for a null one."""
    if raw is None:
        return None
    expressions = tuple(
        (str(e.get("key", "")), str(e.get("operator", "")), tuple(str(v) for v in e.get("values") or ()))
        for e in raw.get("matchExpressions") or ()
    )
    labels = {str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()}
    return LabelSelector(labels, expressions)


def local_queue_info(raw: Raw) -> KueueObject:
    spec = raw.get("spec") or {}
    return KueueObject(
        name=str(raw.get("metadata", {}).get("name", "")),
        active=_active(raw),
        cluster_queue=str(spec.get("clusterQueue") or ""),
        stopped=_stopped(spec),
    )


def cluster_queue_info(raw: Raw) -> KueueObject:
    """A v1beta2 ClusterQueue: its checks are `spec.admissionChecksStrategy.admissionChecks`."""
    spec = raw.get("spec") or {}
    checks = ((spec.get("admissionChecksStrategy") or {}).get("admissionChecks")) or []
    quota = {
        str(flavor.get("name", "")): str(resource.get("nominalQuota", ""))
        for group in spec.get("resourceGroups") or []
        for flavor in group.get("flavors") or []
        for resource in flavor.get("resources") or []
        if resource.get("name") == GPU_RESOURCE
    }
    return KueueObject(
        name=str(raw.get("metadata", {}).get("name", "")),
        active=_active(raw),
        admission_checks=tuple(str(check.get("name", "")) for check in checks),
        gpu_quota=quota,
        stopped=_stopped(spec),
        namespace_selector=label_selector(spec.get("namespaceSelector")),
    )


def admission_check_info(raw: Raw) -> KueueObject:
    spec = raw.get("spec") or {}
    return KueueObject(
        name=str(raw.get("metadata", {}).get("name", "")),
        active=_active(raw),
        controller=str(spec.get("controllerName") or ""),
        parameters=str((spec.get("parameters") or {}).get("name") or ""),
    )


def multikueue_cluster_info(raw: Raw) -> KueueObject:
    return KueueObject(name=str(raw.get("metadata", {}).get("name", "")), active=_active(raw))


def workload_priority_class_info(raw: Raw) -> PriorityClassInfo:
    return PriorityClassInfo(
        name=str(raw.get("metadata", {}).get("name", "")), value=int(raw.get("value") or 0)
    )


def event_info(raw: Raw) -> EventInfo:
    source = raw.get("source") or {}
    return EventInfo(
        reason=str(raw.get("reason") or ""),
        message=str(raw.get("message") or raw.get("note") or ""),
        source=str(
            source.get("component") or raw.get("reportingComponent") or raw.get("reportingController") or ""
        ),
        count=int(raw.get("count") or 1),
    )


def pending_pod(raw: Raw, events: Iterable[Raw] = ()) -> PendingPod:
    meta, spec, status = raw.get("metadata", {}), raw.get("spec", {}), raw.get("status", {})
    scheduled = next((c for c in _conditions(status.get("conditions")) if c.type == "PodScheduled"), None)
    gpus = 0
    for container in spec.get("containers") or ():
        resources = container.get("resources") or {}
        gpus += max(
            _count((resources.get("limits") or {}).get(GPU_RESOURCE)),
            _count((resources.get("requests") or {}).get(GPU_RESOURCE)),
        )
    tolerates = any(
        (t.get("key") == GPU_RESOURCE or (t.get("key") in (None, "") and t.get("operator") == "Exists"))
        and t.get("effect") in (None, "", "NoSchedule")
        for t in spec.get("tolerations") or ()
    )
    return PendingPod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        gpu_request=gpus,
        scheduler_message=scheduled.message if scheduled and scheduled.status == "False" else "",
        events=tuple(event_info(e) for e in events),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerates_gpu_taint=tolerates,
    )


def region_quotas(raw: Raw) -> dict[str, tuple[float, float]]:
    """`gcloud compute regions describe --format=json` -> metric -> (limit, usage)."""
    return {
        str(q.get("metric")): (float(q.get("limit") or 0), float(q.get("usage") or 0))
        for q in raw.get("quotas") or ()
        if q.get("metric")
    }
