"""The doctor's checks over hand-built snapshots: each fault is named, with its fix, and a healthy
snapshot passes. Table-driven: one row per fault."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from elasticityops.ops.doctor.checks import (
    REQUIRED_ACCESS,
    Status,
    classify_pending,
    exit_code,
    required_access,
    run_checks,
)
from elasticityops.ops.doctor.report import findings_json, findings_table
from elasticityops.ops.doctor.snapshot import (
    ApiServiceInfo,
    ClusterSnapshot,
    Condition,
    CustomMetrics,
    DaemonSetInfo,
    EventInfo,
    HpaInfo,
    HpaMetric,
    NodeInfo,
    PendingPod,
    PodLog,
    PriorityClassInfo,
    QuotaReading,
)
from elasticityops.ops.priorities import PRIORITY_LEVELS

GPU_LABELS = {
    "cloud.google.com/gke-accelerator": "nvidia-tesla-t4",
    "topology.kubernetes.io/zone": "us-central1-a",
}


def gpu_node(name: str, **changes: object) -> NodeInfo:
    node = NodeInfo(name=name, ready=True, labels=dict(GPU_LABELS), gpu_capacity=1, gpu_allocatable=1)
    return replace(node, **changes)  # type: ignore[arg-type]


def healthy() -> ClusterSnapshot:
    return ClusterSnapshot(
        api_reachable=True,
        server_version="v1.36.3",
        namespace="eops",
        access=tuple(replace(rule, allowed=True) for rule in REQUIRED_ACCESS),
        nodes=(gpu_node("gpu-1"), gpu_node("gpu-2"), NodeInfo(name="system-1", ready=True)),
        device_plugins=(DaemonSetInfo("kube-system", "nvidia-device-plugin-daemonset", 2, 2),),
        priority_classes=tuple(
            PriorityClassInfo(level.name, level.value, "PreemptLowerPriority" if level.preempts else "Never")
            for level in PRIORITY_LEVELS
        ),
    )


def hpa(name: str = "svc-gpu", has_current: bool = False, conditions: tuple[Condition, ...] = ()) -> HpaInfo:
    return HpaInfo(
        "serving", name, "Deployment/svc", (HpaMetric("Pods", "gpu_utilization", has_current),), conditions
    )


CUSTOM = ApiServiceInfo("v1beta1.custom.metrics.k8s.io", available=True)
Mutation = Callable[[ClusterSnapshot], ClusterSnapshot]

CASES: list[tuple[str, Mutation, str, Status, str, str]] = [
    # (id, break it, check, status, in message, in fix)
    (
        "api-down",
        lambda s: replace(s, api_reachable=False, api_error="connection refused"),
        "api",
        Status.fail,
        "connection refused",
        "--kubeconfig",
    ),
    (
        "rbac-no-jobs",
        lambda s: replace(s, access=tuple(replace(r, allowed=r.resource != "jobs") for r in s.access)),
        "permissions",
        Status.fail,
        "create jobs.batch",
        "create role eops-gateway --verb=create,delete,get,list,watch --resource=jobs.batch",
    ),
    (
        "rbac-no-nodes",
        lambda s: replace(s, access=tuple(replace(r, allowed=r.resource != "nodes") for r in s.access)),
        "permissions",
        Status.fail,
        "list nodes",
        "create clusterrole",
    ),
    (
        "no-gpu-nodes",
        lambda s: replace(s, nodes=(NodeInfo("system-1", True),)),
        "gpu-nodes",
        Status.warn,
        "no GPU nodes",
        "baseline",
    ),
    (
        "gpu-node-not-ready",
        lambda s: replace(s, nodes=(gpu_node("gpu-1", ready=False), gpu_node("gpu-2"))),
        "gpu-nodes",
        Status.fail,
        "gpu-1",
        "describe node",
    ),
    (
        "gpu-node-unlabelled",
        lambda s: replace(s, nodes=(gpu_node("gpu-1", labels={}),)),
        "gpu-nodes",
        Status.warn,
        "no cloud.google.com/gke-accelerator label",
        "kubectl label node",
    ),
    (
        "no-allocatable-gpu",
        lambda s: replace(s, nodes=(gpu_node("gpu-1", gpu_capacity=0, gpu_allocatable=0), gpu_node("gpu-2"))),
        "gpu-allocatable",
        Status.fail,
        "gpu-1",
        "gpu-driver-version=latest",
    ),
    (
        "device-plugin-not-ready",
        lambda s: replace(
            s, device_plugins=(DaemonSetInfo("kube-system", "nvidia-device-plugin-daemonset", 2, 0),)
        ),
        "device-plugin",
        Status.fail,
        "0 of 2 pods ready",
        "logs",
    ),
    (
        "device-plugin-matches-no-node",
        lambda s: replace(
            s, device_plugins=(DaemonSetInfo("kube-system", "nvidia-device-plugin-daemonset", 0, 0),)
        ),
        "device-plugin",
        Status.warn,
        "schedules on no node",
        "--gpu-node-label",
    ),
    (
        "no-device-plugin",
        lambda s: replace(s, device_plugins=()),
        "device-plugin",
        Status.warn,
        "no NVIDIA device plugin",
        "device-plugin.yaml",
    ),
    (
        "nvml-failure",
        lambda s: replace(
            s,
            device_plugin_logs=(
                PodLog(
                    "kube-system",
                    "ndp-x",
                    "gpu-1",
                    "I1129 ...\nFailed to initialize NVML: ERROR_LIBRARY_NOT_FOUND\n",
                ),
            ),
        ),
        "device-plugin-logs",
        Status.fail,
        "Failed to initialize NVML",
        "driver",
    ),
    (
        "no-devices",
        lambda s: replace(
            s,
            device_plugin_logs=(
                PodLog("kube-system", "ndp-x", "gpu-1", "No NVIDIA devices found on this node"),
            ),
        ),
        "device-plugin-logs",
        Status.fail,
        "no NVIDIA devices found",
        "plugin version",
    ),
    (
        "hpa-metric-nobody-serves",
        lambda s: replace(s, hpas=(hpa(),)),
        "hpa",
        Status.fail,
        "<unknown> for Pods metric gpu_utilization: no one serves it",
        "Prometheus Adapter",
    ),
    (
        "custom-metrics-missing-for-hpa",
        lambda s: replace(s, hpas=(hpa(),)),
        "custom-metrics",
        Status.fail,
        "not registered",
        "prometheus-adapter-values.yaml",
    ),
    (
        "adapter-rule-does-not-match",
        lambda s: replace(
            s,
            hpas=(hpa(),),
            api_services=(CUSTOM,),
            custom_metrics=CustomMetrics(CUSTOM, served=("pods/DCGM_FI_DEV_FB_USED",)),
        ),
        "hpa",
        Status.fail,
        "the adapter does not serve gpu_utilization",
        "exported_pod",
    ),
    (
        "adapter-unavailable",
        lambda s: replace(
            s,
            hpas=(hpa(),),
            api_services=(ApiServiceInfo(CUSTOM.name, False, "FailedDiscoveryCheck: no response"),),
        ),
        "custom-metrics",
        Status.fail,
        "FailedDiscoveryCheck",
        "adapter pod",
    ),
    (
        "hpa-target-missing",
        lambda s: replace(
            s,
            hpas=(
                hpa(
                    conditions=(
                        Condition(
                            "AbleToScale", "False", "FailedGetScale", 'deployments.apps "svc" not found'
                        ),
                    )
                ),
            ),
        ),
        "hpa",
        Status.fail,
        "FailedGetScale",
        "scale target Deployment/svc",
    ),
    (
        "missing-priority-class",
        lambda s: replace(s, priority_classes=s.priority_classes[1:]),
        "priority-classes",
        Status.fail,
        "eops-high",
        "priorityclasses.yaml",
    ),
    (
        "placeholder-wrong-value",
        lambda s: replace(
            s,
            priority_classes=(*s.priority_classes[:3], PriorityClassInfo("eops-placeholder", -100, "Never")),
        ),
        "priority-classes",
        Status.warn,
        "expected -10/Never",
        "immutable",
    ),
    (
        "pending-no-toleration",
        lambda s: replace(
            s,
            pending_pods=(
                PendingPod(
                    "eops",
                    "job-1",
                    0,
                    "0/3 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}, "
                    "1 node(s) didn't match Pod's node affinity/selector.",
                ),
            ),
        ),
        "pending-pods",
        Status.fail,
        "taint not tolerated",
        "tolerations",
    ),
    (
        "pending-stockout",
        lambda s: replace(
            s,
            pending_pods=(
                PendingPod(
                    "eops",
                    "job-2",
                    1,
                    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                    (
                        EventInfo(
                            "FailedScaleUp",
                            "Node scale up in zones us-central1-b associated with this pod failed: "
                            "GCE out of resources. Pod is at risk of not being scheduled.",
                            "cluster-autoscaler",
                        ),
                    ),
                ),
            ),
        ),
        "pending-pods",
        Status.fail,
        "GPU stockout in zone us-central1-b",
        "fallbacks",
    ),
    (
        "pending-quota",
        lambda s: replace(
            s,
            pending_pods=(
                PendingPod(
                    "eops",
                    "job-3",
                    1,
                    "",
                    (
                        EventInfo(
                            "FailedScaleUp",
                            "Node scale up in zones us-central1-a failed: GCE quota exceeded.",
                            "cluster-autoscaler",
                        ),
                    ),
                ),
            ),
        ),
        "pending-pods",
        Status.fail,
        "GPU quota exceeded",
        "quota",
    ),
    (
        "pending-scale-up-in-progress",
        lambda s: replace(
            s,
            pending_pods=(
                PendingPod(
                    "eops",
                    "job-4",
                    1,
                    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                    (EventInfo("TriggeredScaleUp", "pod triggered scale-up: [{pool 0->1 (max: 1000)}]"),),
                ),
            ),
        ),
        "pending-pods",
        Status.info,
        "scale-up triggered",
        "warm capacity",
    ),
    (
        "autoscaler-unhealthy",
        lambda s: replace(s, autoscaler_status="Cluster-wide:\n  Health: Unhealthy (ready=1 unready=3)\n"),
        "autoscaler",
        Status.warn,
        "Unhealthy",
        "cluster-autoscaler-status",
    ),
    (
        "autoscaler-backoff-yaml",
        lambda s: replace(s, autoscaler_status=status_yaml("Backoff")),
        "autoscaler",
        Status.warn,
        "back-off",
        "cluster-autoscaler-status",
    ),
    (
        "autoscaler-backoff-text",
        lambda s: replace(s, autoscaler_status="NodeGroups:\n  Name: pool\n  ScaleUp: Backoff (ready=0)\n"),
        "autoscaler",
        Status.warn,
        "back-off",
        "cluster-autoscaler-status",
    ),
    (
        "no-gcloud",
        lambda s: replace(s, quota=QuotaReading(gcloud_found=False)),
        "gpu-quota",
        Status.info,
        "gcloud is not installed",
        "regions describe",
    ),
    (
        "quota-target-unknown",
        lambda s: replace(
            s, quota=QuotaReading(True, "", "us-central1", error="no project", target_unknown=True)
        ),
        "gpu-quota",
        Status.info,
        "not checked",
        "--project",
    ),
    (
        "quota-gcloud-error",
        lambda s: replace(
            s,
            quota=QuotaReading(True, "p", "us-central1", error="You do not currently have an active account"),
        ),
        "gpu-quota",
        Status.warn,
        "active account",
        "gcloud auth login",
    ),
    (
        "quota-below-peak",
        lambda s: replace(
            s, peak=4000, quota=QuotaReading(True, "p", "us-central1", {"NVIDIA_T4_GPUS": (64.0, 3.0)})
        ),
        "gpu-quota",
        Status.fail,
        "below the planned peak of 4000",
        "request 4500",
    ),
    (
        "quota-without-margin",
        lambda s: replace(
            s, peak=4000, quota=QuotaReading(True, "p", "us-central1", {"NVIDIA_T4_GPUS": (4000.0, 0.0)})
        ),
        "gpu-quota",
        Status.warn,
        "not the margin (4500)",
        "request 4500",
    ),
    (
        "quota-ok",
        lambda s: replace(
            s, peak=4000, quota=QuotaReading(True, "p", "us-central1", {"NVIDIA_T4_GPUS": (5000.0, 0.0)})
        ),
        "gpu-quota",
        Status.passed,
        "5000",
        "",
    ),
]


@pytest.mark.parametrize(
    ("name", "mutate", "check", "status", "in_message", "in_fix"), CASES, ids=[c[0] for c in CASES]
)
def test_each_fault_is_named_with_its_fix(
    name: str, mutate: Mutation, check: str, status: Status, in_message: str, in_fix: str
) -> None:
    findings = run_checks(mutate(healthy()))
    matching = [f for f in findings if f.check == check and f.status is status and in_message in f.message]
    seen = [(f.check, f.status.value, f.message) for f in findings]
    assert matching, f"{name}: no {status.value} {check} finding with {in_message!r} in {seen}"
    assert in_fix in matching[0].fix
    assert exit_code(findings) == (1 if any(f.status is Status.fail for f in findings) else 0)


def status_yaml(scale_up: str) -> str:
    """cluster-autoscaler 1.36's status ConfigMap text (YAML), as it writes it for one group."""
    return (
        "time: 2026-12-01 14:58:54 +0000 UTC\nautoscalerStatus: Running\nclusterWide:\n"
        "  health:\n    status: Healthy\n  scaleUp:\n    status: NoActivity\nnodeGroups:\n"
        "- name: nap-t4-us-central1-a\n  health:\n    status: Healthy\n"
        f"  scaleUp:\n    status: {scale_up}\n    backoffInfo: {{}}\n"
    )


def test_a_backed_off_group_is_named_with_its_error() -> None:
    text = status_yaml("Backoff").replace(
        "backoffInfo: {}",
        "backoffInfo:\n      errorCode: ZONE_RESOURCE_POOL_EXHAUSTED\n      errorMessage: simulated stockout",
    )
    findings = run_checks(replace(healthy(), autoscaler_status=text))
    (finding,) = [f for f in findings if f.check == "autoscaler"]
    assert finding.status is Status.warn
    assert "nap-t4-us-central1-a (ZONE_RESOURCE_POOL_EXHAUSTED)" in finding.message


def test_a_healthy_yaml_status_is_no_back_off() -> None:
    # Every group has `backoffInfo: {}`; only a "Backoff" status is a back-off.
    findings = run_checks(replace(healthy(), autoscaler_status=status_yaml("NoActivity")))
    assert [f.status for f in findings if f.check == "autoscaler"] == [Status.passed]


def test_healthy_snapshot_has_no_failure_or_warning() -> None:
    findings = run_checks(healthy())
    bad = [(f.check, f.status.value, f.message) for f in findings if f.status in (Status.fail, Status.warn)]
    assert not bad
    assert exit_code(findings) == 0
    assert {f.check for f in findings if f.status is Status.passed} >= {
        "api",
        "permissions",
        "gpu-nodes",
        "gpu-allocatable",
        "device-plugin",
        "priority-classes",
        "pending-pods",
    }


def test_unreachable_api_stops_cluster_checks_but_still_reports_quota() -> None:
    findings = run_checks(replace(healthy(), api_reachable=False, api_error="timeout"))
    assert [f.check for f in findings] == ["api", "gpu-quota"]
    assert exit_code(findings) == 1


def test_unreadable_section_is_a_warning_not_a_pass() -> None:
    findings = run_checks(replace(healthy(), unreadable={"nodes": "403 Forbidden: nodes is forbidden"}))
    node = next(f for f in findings if f.check == "gpu-nodes")
    assert node.status is Status.warn
    assert "403" in node.message


def test_hpa_reading_its_metric_passes() -> None:
    snapshot = replace(
        healthy(),
        hpas=(hpa(has_current=True),),
        api_services=(CUSTOM,),
        custom_metrics=CustomMetrics(CUSTOM, ("pods/gpu_utilization",)),
    )
    findings = run_checks(snapshot)
    assert [f.status for f in findings if f.check in ("hpa", "custom-metrics")] == [
        Status.passed,
        Status.passed,
    ]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        pytest.param("0/0 nodes are available", "no nodes at all", id="no-nodes"),
        pytest.param(
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
            "no node matches",
            id="selector",
        ),
        pytest.param(
            "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", "no free GPU", id="gpus-full"
        ),
        pytest.param("", "not yet considered", id="not-yet"),
    ],
)
def test_classify_pending(message: str, reason: str) -> None:
    assert reason in classify_pending(PendingPod("ns", "p", 1, message))[0]


def test_pending_gpu_pod_with_no_gpu_nodes_says_so() -> None:
    pod = PendingPod("ns", "p", 1, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert classify_pending(pod, gpu_nodes=0)[0].startswith("no GPU nodes at all")
    assert classify_pending(pod, gpu_nodes=3)[0] == "no free GPU"


def test_reports_render() -> None:
    findings = run_checks(replace(healthy(), priority_classes=()))
    text = findings_json(findings)
    assert '"ok": false' in text
    assert '"check": "priority-classes"' in text
    assert findings_table(findings).row_count == len(findings)


@pytest.mark.parametrize(
    ("ready_for", "status"),
    [(30.0, Status.info), (599.0, Status.info), (601.0, Status.fail), (None, Status.fail)],
)
def test_a_new_node_installing_its_driver_is_not_a_fault_until_the_grace_ends(
    ready_for: float | None, status: Status
) -> None:
    node = gpu_node("gpu-new", gpu_allocatable=0, ready_for_s=ready_for)
    findings = run_checks(replace(healthy(), nodes=(*healthy().nodes, node)))
    (finding,) = [f for f in findings if f.check == "gpu-allocatable"]
    assert finding.status is status
    assert "gpu-new" in finding.message


def test_bare_pods_need_the_rights_to_create_and_delete_pods() -> None:
    assert required_access("job") == REQUIRED_ACCESS
    extra = [rule for rule in required_access("pod") if rule not in REQUIRED_ACCESS]
    assert {(r.verb, r.resource, r.namespaced) for r in extra} == {
        ("create", "pods", True),
        ("delete", "pods", True),
    }
    # A gateway of bare pods whose identity may not create pods is told so, with the grant.
    denied = (
        *(replace(rule, allowed=True) for rule in REQUIRED_ACCESS),
        *(replace(rule, allowed=False) for rule in extra),
    )
    [finding] = [f for f in run_checks(replace(healthy(), access=denied)) if f.check == "permissions"]
    assert finding.status is Status.fail
    assert "create pods" in finding.message
    assert "one bare pod per request" in finding.message
    assert "--verb=create,delete --resource=pods" in finding.fix
    # A gateway of Jobs is told what it creates, too.
    jobs_denied = tuple(replace(rule, allowed=rule.resource != "jobs") for rule in REQUIRED_ACCESS)
    [finding] = [f for f in run_checks(replace(healthy(), access=jobs_denied)) if f.check == "permissions"]
    assert "one Job per request" in finding.message
