"""Checks: the custom metrics API and HPAs whose metrics read <unknown>, with the reason."""

from __future__ import annotations

from elasticityops.ops.doctor.findings import Finding, Status, names
from elasticityops.ops.doctor.snapshot import ClusterSnapshot, HpaInfo

CUSTOM_METRICS_SERVICE = "v1beta1.custom.metrics.k8s.io"
RESOURCE_METRICS_SERVICE = "v1beta1.metrics.k8s.io"
EXTERNAL_METRICS_SERVICE = "v1beta1.external.metrics.k8s.io"


def _service(s: ClusterSnapshot, name: str) -> tuple[bool, bool, str]:
    """(registered, available, message) of an APIService."""
    for api in s.api_services:
        if api.name == name:
            return True, api.available, api.message
    return False, False, ""


def check_custom_metrics(s: ClusterSnapshot) -> list[Finding]:
    if "apiservices" in s.unreadable:
        return [
            Finding(
                "custom-metrics",
                Status.warn,
                f"could not read APIServices: {s.unreadable['apiservices']}",
                "grant get/list on apiservices.apiregistration.k8s.io to this identity",
            )
        ]
    needed = {m.name for h in s.hpas for m in h.metrics if m.type in ("Pods", "Object")}
    registered, available, message = _service(s, CUSTOM_METRICS_SERVICE)
    if not registered:
        if needed:
            return [
                Finding(
                    "custom-metrics",
                    Status.fail,
                    f"the custom metrics API is not registered, yet HPAs use {names(sorted(needed))}",
                    "install Prometheus Adapter with the rules from eops render elasticity "
                    "(prometheus-adapter-values.yaml)",
                )
            ]
        return [
            Finding(
                "custom-metrics",
                Status.info,
                "custom metrics API not registered (needed only for HPAs on GPU metrics)",
                "eops render elasticity renders DCGM exporter + Prometheus Adapter when you want one",
            )
        ]
    if not available:
        return [
            Finding(
                "custom-metrics",
                Status.fail,
                f"{CUSTOM_METRICS_SERVICE} is registered but not available: {message or 'no reason given'}",
                "check the adapter pod and its Service (kubectl get apiservice "
                + CUSTOM_METRICS_SERVICE
                + " -o yaml)",
            )
        ]
    if "custom-metrics" in s.unreadable:
        return [
            Finding(
                "custom-metrics",
                Status.warn,
                f"custom metrics API registered but listing it failed: {s.unreadable['custom-metrics']}",
                "kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1",
            )
        ]
    served = {name.split("/", 1)[-1] for name in s.custom_metrics.served}
    wanted = needed or {"gpu_utilization"}
    missing = sorted(wanted - served)
    if missing:
        return [
            Finding(
                "custom-metrics",
                Status.fail if needed else Status.warn,
                f"custom metrics API serves {len(served)} metric(s) but not {names(missing)}",
                "the adapter rule does not match the series: DCGM labels arrive as "
                "exported_pod/exported_namespace after a scrape; map those to pod/namespace (eops render "
                "elasticity, prometheus-adapter-values.yaml)",
            )
        ]
    return [
        Finding(
            "custom-metrics",
            Status.passed,
            f"custom metrics API available and serving {names(sorted(wanted))}",
        )
    ]


def _hpa_reason(s: ClusterSnapshot, hpa: HpaInfo, metric_type: str, metric_name: str) -> tuple[str, str]:
    """Why an HPA metric reads <unknown>, and the fix."""
    for cond in hpa.conditions:
        if cond.type == "AbleToScale" and cond.status == "False":
            return (
                f"{cond.reason}: {cond.message}",
                f"check the scale target {hpa.target} exists and the controller can read it",
            )
    service = {
        "Resource": RESOURCE_METRICS_SERVICE,
        "ContainerResource": RESOURCE_METRICS_SERVICE,
        "External": EXTERNAL_METRICS_SERVICE,
    }.get(metric_type, CUSTOM_METRICS_SERVICE)
    registered, available, message = _service(s, service)
    if not registered:
        install = (
            "install metrics-server"
            if service == RESOURCE_METRICS_SERVICE
            else "install Prometheus Adapter (eops render elasticity)"
        )
        return f"no one serves it: {service} is not registered", install
    if not available:
        return f"{service} is not available: {message}", "fix the metrics adapter behind " + service
    if service == CUSTOM_METRICS_SERVICE and "custom-metrics" not in s.unreadable:
        served = {name.split("/", 1)[-1] for name in s.custom_metrics.served}
        if metric_name not in served:
            return (
                f"the adapter does not serve {metric_name}",
                "its rules do not match the series: map exported_pod/exported_namespace to pod/namespace "
                f"and name it {metric_name} (eops render elasticity --metric-name {metric_name})",
            )
    for cond in hpa.conditions:
        if cond.type == "ScalingActive" and cond.status == "False":
            return (
                f"{cond.reason}: {cond.message}",
                "kubectl describe hpa; query the metric with kubectl get --raw on the custom metrics API",
            )
    return "no current value reported yet", "wait one HPA sync (15 s); if it stays, kubectl describe hpa"


def check_hpas(s: ClusterSnapshot) -> list[Finding]:
    if "hpas" in s.unreadable:
        return [
            Finding(
                "hpa",
                Status.warn,
                f"could not list HPAs: {s.unreadable['hpas']}",
                "grant list on horizontalpodautoscalers.autoscaling",
            )
        ]
    findings: list[Finding] = []
    for hpa in s.hpas:
        for metric in hpa.metrics:
            if metric.has_current:
                continue
            why, fix = _hpa_reason(s, hpa, metric.type, metric.name)
            findings.append(
                Finding(
                    "hpa",
                    Status.fail,
                    f"HPA {hpa.namespace}/{hpa.name} reads <unknown> for {metric.type} metric "
                    f"{metric.name}: {why}",
                    fix,
                )
            )
    if not findings and s.hpas:
        findings.append(Finding("hpa", Status.passed, f"{len(s.hpas)} HPA(s) read all their metrics"))
    return findings
