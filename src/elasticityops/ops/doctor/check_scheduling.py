"""Checks: PriorityClasses, Pending pods (scheduler and autoscaler reasons), the autoscaler's
status and GPU quota against the planned peak."""

from __future__ import annotations

import re

import yaml

from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.ops.doctor.findings import Finding, Status, names
from elasticityops.ops.doctor.snapshot import ClusterSnapshot, PendingPod
from elasticityops.ops.gke import GPU_SHAPES, gpu_limit_for_peak
from elasticityops.ops.priorities import PRIORITY_LEVELS


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
    missing = [level.name for level in PRIORITY_LEVELS if level.name not in present]
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


_ZONE_RE = re.compile(r"\b([a-z]+-[a-z]+[0-9]+-[a-z])\b")


def classify_pending(pod: PendingPod, gpu_nodes: int | None = None) -> tuple[str, Status, str]:
    """(reason, severity, fix) for one Pending pod, from the scheduler's and autoscaler's words;
    `gpu_nodes` (how many the cluster has, if known) tells "none exist" from "all busy"."""
    texts = [pod.scheduler_message] + [f"{e.reason}: {e.message}" for e in pod.events]
    blob = "\n".join(texts)
    low = blob.lower()
    if (
        "zone_resource_pool_exhausted" in low
        or "stockout" in low
        or "out of resources" in low
        or "resource_pool_exhausted" in low
    ):
        zones = sorted(set(_ZONE_RE.findall(blob)))
        where = f" in zone {', '.join(zones)}" if zones else ""
        return (
            f"GPU stockout{where}",
            Status.fail,
            "add zones / fallbacks (ComputeClass spot->on-demand, T4->L4) or keep warm capacity; the "
            "autoscaler backs off 5-30 min per pool",
        )
    if "quota" in low:
        return (
            "GPU quota exceeded",
            Status.fail,
            "request more regional GPU quota (gcloud compute regions describe REGION shows limit and usage)",
        )
    if "max node group size reached" in low or "max cluster" in low or "resource limit" in low:
        return (
            "autoscaler at its limits",
            Status.fail,
            "raise node auto-provisioning limits or the node pool max (eops render gke sizes them from "
            "--peak)",
        )
    if "untolerated taint" in low or "had taint" in low or "didn't tolerate" in low:
        return (
            "taint not tolerated (no toleration for nvidia.com/gpu)",
            Status.fail,
            "add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}] to the pod "
            "(ElasticityOps Jobs carry it)",
        )
    if (
        "didn't match pod's node affinity" in low
        or "node(s) didn't match node selector" in low
        or "didn't match node selector" in low
    ):
        return (
            "no node matches its nodeSelector/affinity",
            Status.warn,
            "check the selector labels against kubectl get nodes --show-labels; NAP creates nodes only for "
            "selectors it knows",
        )
    if f"insufficient {GPU_RESOURCE}" in low:
        if "triggeredscaleup" in low:
            return (
                "waiting for a new GPU node (scale-up triggered)",
                Status.info,
                "normal: a GPU node takes minutes; keep warm capacity (placeholders) for faster starts",
            )
        if gpu_nodes == 0 and pod.gpu_request:
            return (
                "no GPU nodes at all, and no scale-up triggered yet",
                Status.warn,
                "if it stays: check node auto-provisioning is on with a GPU limit (eops render gke) and "
                "the pod selects a GPU the cluster may create (cloud.google.com/gke-accelerator)",
            )
        return (
            "no free GPU",
            Status.warn,
            "wait for the autoscaler, or check it can scale (NAP limits, quota, GPU nodes' allocatable)",
        )
    if "0/0 nodes" in low or "no nodes available" in low:
        return (
            "no nodes at all",
            Status.fail,
            "create a node pool or enable node auto-provisioning (eops render gke)",
        )
    if "triggeredscaleup" in low:
        return "waiting for a new node (scale-up triggered)", Status.info, "normal during scale-up"
    if "nottriggerscaleup" in low:
        return (
            "autoscaler will not add a node for it",
            Status.fail,
            "read the NotTriggerScaleUp event: usually no node group fits the pod's requests or selectors",
        )
    if not blob.strip():
        return (
            "not yet considered by the scheduler",
            Status.info,
            "wait a few seconds; if it stays, check kube-scheduler is running",
        )
    first = pod.scheduler_message.splitlines()[0] if pod.scheduler_message else texts[-1]
    return f"unschedulable: {first[:160]}", Status.warn, "kubectl describe pod NAME"


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
