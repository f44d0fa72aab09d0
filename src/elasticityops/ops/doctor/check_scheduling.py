"""Checks: PriorityClasses, Pending pods (grouped by the reason `pending.py` reads), the autoscaler's
status and GPU quota against the planned peak."""

from __future__ import annotations

import re

import yaml

from elasticityops.ops.doctor.findings import Finding, Status, names
from elasticityops.ops.doctor.pending import classify_pending
from elasticityops.ops.doctor.snapshot import ClusterSnapshot
from elasticityops.ops.gke.inputs import GPU_SHAPES
from elasticityops.ops.gke.sizing import gpu_limit_for_peak
from elasticityops.ops.priorities import PRIORITY_CLASS_NAMES, PRIORITY_LEVELS


def check_priority_classes(s: ClusterSnapshot) -> list[Finding]:
    if "priorityclasses" in s.unreadable:
        return [
            Finding(
                "priority-classes",
                Status.warn,
                f"could not list PriorityClasses: {s.unreadable['priorityclasses']}",
                "grant list on priorityclasses.scheduling.k8s.io",
            )
        ]
    present = {pc.name: pc for pc in s.priority_classes}
    missing = [name for name in PRIORITY_CLASS_NAMES if name not in present]
    findings: list[Finding] = []
    if missing:
        findings.append(
            Finding(
                "priority-classes",
                Status.fail,
                f"PriorityClass(es) missing: {', '.join(missing)}; pods that name one are refused at "
                "admission, so their Jobs never start",
                "kubectl apply -f priorityclasses.yaml (from eops render gke)",
            )
        )
    for level in PRIORITY_LEVELS:
        pc = present.get(level.name)
        if pc is None:
            continue
        policy = "PreemptLowerPriority" if level.preempts else "Never"
        if pc.value != level.value or pc.preemption_policy != policy:
            findings.append(
                Finding(
                    "priority-classes",
                    Status.warn,
                    f"{pc.name} is {pc.value}/{pc.preemption_policy}, expected {level.value}/{policy}",
                    f"kubectl delete priorityclass {pc.name} && kubectl apply -f priorityclasses.yaml "
                    "(value is immutable)",
                )
            )
    if not findings:
        findings.append(
            Finding(
                "priority-classes",
                Status.passed,
                f"all {len(PRIORITY_LEVELS)} PriorityClasses present (placeholder at -10, never preempts)",
            )
        )
    return findings


def check_pending(s: ClusterSnapshot) -> list[Finding]:
    if "pods" in s.unreadable:
        return [
            Finding(
                "pending-pods",
                Status.warn,
                f"could not list pods: {s.unreadable['pods']}",
                "grant list on pods",
            )
        ]
    if not s.pending_pods:
        return [Finding("pending-pods", Status.passed, "no Pending pods")]
    groups: dict[str, tuple[Status, str, list[str]]] = {}
    for pod in s.pending_pods:
        reason, status, fix = classify_pending(pod, None if "nodes" in s.unreadable else len(s.gpu_nodes))
        groups.setdefault(reason, (status, fix, []))[2].append(f"{pod.namespace}/{pod.name}")
    return [
        Finding("pending-pods", status, f"{len(pods)} Pending pod(s), {reason}: {names(pods)}", fix)
        for reason, (status, fix, pods) in sorted(groups.items())
    ]


_BACKOFF = re.compile(r"\bbackoff\b", re.IGNORECASE)


def backed_off_groups(text: str) -> list[tuple[str, str]]:
    """(node group, error code) of each group whose scale-up is in back-off, from the status
    ConfigMap's YAML (cluster-autoscaler >= 1.30); [] for the older free text."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    groups = doc.get("nodeGroups") if isinstance(doc, dict) else None
    out: list[tuple[str, str]] = []
    for group in groups if isinstance(groups, list) else []:
        scale_up = group.get("scaleUp") if isinstance(group, dict) else None
        if not isinstance(scale_up, dict) or str(scale_up.get("status", "")).lower() != "backoff":
            continue
        info = scale_up.get("backoffInfo")
        code = str(info.get("errorCode") or "") if isinstance(info, dict) else ""
        out.append((str(group.get("name", "?")), code))
    return out


def check_autoscaler_status(s: ClusterSnapshot) -> list[Finding]:
    if s.autoscaler_status is None:
        why = s.unreadable.get("autoscaler-status", "kube-system/cluster-autoscaler-status not found")
        return [
            Finding(
                "autoscaler",
                Status.info,
                f"cluster autoscaler status not readable: {why}",
                "on GKE read the autoscaler's visibility events in Cloud Logging "
                "(container.googleapis.com/cluster-autoscaler-visibility)",
            )
        ]
    text = s.autoscaler_status
    low = text.lower()
    if "unhealthy" in low:
        first = next((line.strip() for line in text.splitlines() if "unhealthy" in line.lower()), "Unhealthy")
        return [
            Finding(
                "autoscaler",
                Status.warn,
                f"cluster autoscaler reports: {first[:160]}",
                "kubectl -n kube-system describe configmap cluster-autoscaler-status",
            )
        ]
    # A whole word: since 1.30 the status is YAML, and every node group carries a
    # `backoffInfo: {}` key even when none is backing off; "status: Backoff" (YAML) and
    # "ScaleUp: Backoff (...)" (the older text) are what a back-off looks like.
    if _BACKOFF.search(text):
        groups = backed_off_groups(text)
        which = (
            ": " + "; ".join(f"{name} ({why})" if why else name for name, why in groups[:5])
            if groups
            else " (failed scale-ups: quota or stockout)"
        )
        return [
            Finding(
                "autoscaler",
                Status.warn,
                f"cluster autoscaler has node groups in back-off{which}; pending pods go to other "
                "groups or wait until the back-off ends",
                "kubectl -n kube-system describe configmap cluster-autoscaler-status",
            )
        ]
    return [Finding("autoscaler", Status.passed, "cluster autoscaler status: healthy")]


def check_quota(s: ClusterSnapshot) -> list[Finding]:
    q = s.quota
    if q is None or not q.gcloud_found:
        return [
            Finding(
                "gpu-quota",
                Status.info,
                "gcloud is not installed: GPU quota not checked",
                "install the Google Cloud CLI, or check by hand: gcloud compute regions describe REGION "
                "--flatten=quotas --filter='quotas.metric~GPUS'",
            )
        ]
    if q.target_unknown:
        return [
            Finding(
                "gpu-quota",
                Status.info,
                "GPU quota not checked: no GCP project or region known",
                "pass --project and --region (or set gcloud's default project) with --peak N",
            )
        ]
    if q.error:
        return [
            Finding(
                "gpu-quota",
                Status.warn,
                f"could not read quota with gcloud: {q.error}",
                "pass --project and --region, and run gcloud auth login",
            )
        ]
    shape = GPU_SHAPES.get(s.gpu_type)
    metric = shape.quota_metric if shape else ""
    if metric not in q.limits:
        return [
            Finding(
                "gpu-quota",
                Status.warn,
                f"{metric or s.gpu_type} quota not found in {q.region}",
                "check the region offers this GPU",
            )
        ]
    limit, usage = q.limits[metric]
    if s.peak is None:
        return [
            Finding(
                "gpu-quota",
                Status.info,
                f"{metric} in {q.region}: limit {limit:.0f}, in use {usage:.0f}",
                "pass --peak N to compare it with the planned peak",
            )
        ]
    wanted = gpu_limit_for_peak(s.peak)
    if limit < s.peak:
        return [
            Finding(
                "gpu-quota",
                Status.fail,
                f"{metric} in {q.region} is {limit:.0f}, below the planned peak of {s.peak}",
                f"request {wanted} (peak + margin) in the console's Quotas page before the peak",
            )
        ]
    if limit < wanted:
        return [
            Finding(
                "gpu-quota",
                Status.warn,
                f"{metric} in {q.region} is {limit:.0f}: covers the peak {s.peak} but not the margin "
                f"({wanted})",
                f"request {wanted}",
            )
        ]
    return [
        Finding(
            "gpu-quota",
            Status.passed,
            f"{metric} in {q.region} is {limit:.0f} (peak {s.peak}, wanted {wanted})",
        )
    ]
