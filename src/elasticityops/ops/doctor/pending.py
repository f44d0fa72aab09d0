"""Why a pod is Pending, from the scheduler's and the autoscaler's own words: one table, read top
to bottom, the first row that matches wins (a stockout is named before the quota or the taint that
the same text may also mention)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.ops.doctor.findings import Status
from elasticityops.ops.doctor.snapshot import PendingPod

_ZONE_RE = re.compile(r"\b([a-z]+-[a-z]+[0-9]+-[a-z])\b")


@dataclass(frozen=True)
class PendingRule:
    """A cause of Pending: the text names one of `any_of` (lower-case), and `and_also` too when
    given; `no_gpu_nodes`: only when the pod asks for a GPU and the cluster has no GPU node."""

    any_of: tuple[str, ...]
    reason: str
    status: Status
    fix: str
    and_also: str = ""
    no_gpu_nodes: bool = False
    names_zones: bool = False  # the reason adds the zones the text names

    def applies(self, low: str, no_gpu_nodes: bool) -> bool:
        return (
            any(word in low for word in self.any_of)
            and self.and_also in low
            and (no_gpu_nodes or not self.no_gpu_nodes)
        )


_INSUFFICIENT_GPU = (f"insufficient {GPU_RESOURCE}",)

PENDING_RULES: tuple[PendingRule, ...] = (
    PendingRule(
        ("zone_resource_pool_exhausted", "stockout", "out of resources", "resource_pool_exhausted"),
        "GPU stockout",
        Status.fail,
        "add zones / fallbacks (ComputeClass spot->on-demand, T4->L4) or keep warm capacity; the "
        "autoscaler backs off 5-30 min per pool",
        names_zones=True,
    ),
    PendingRule(
        ("quota",),
        "GPU quota exceeded",
        Status.fail,
        "request more regional GPU quota (gcloud compute regions describe REGION shows limit and usage)",
    ),
    PendingRule(
        ("max node group size reached", "max cluster", "resource limit"),
        "autoscaler at its limits",
        Status.fail,
        "raise node auto-provisioning limits or the node pool max (eops render gke sizes them from --peak)",
    ),
    PendingRule(
        ("untolerated taint", "had taint", "didn't tolerate"),
        "taint not tolerated (no toleration for nvidia.com/gpu)",
        Status.fail,
        "add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}] to the pod "
        "(ElasticityOps Jobs carry it)",
    ),
    PendingRule(
        (
            "didn't match pod's node affinity",
            "node(s) didn't match node selector",
            "didn't match node selector",
        ),
        "no node matches its nodeSelector/affinity",
        Status.warn,
        "check the selector labels against kubectl get nodes --show-labels; NAP creates nodes only for "
        "selectors it knows",
    ),
    PendingRule(
        _INSUFFICIENT_GPU,
        "waiting for a new GPU node (scale-up triggered)",
        Status.info,
        "normal: a GPU node takes minutes; keep warm capacity (placeholders) for faster starts",
        and_also="triggeredscaleup",
    ),
    PendingRule(
        _INSUFFICIENT_GPU,
        "no GPU nodes at all, and no scale-up triggered yet",
        Status.warn,
        "if it stays: check node auto-provisioning is on with a GPU limit (eops render gke) and "
        "the pod selects a GPU the cluster may create (cloud.google.com/gke-accelerator)",
        no_gpu_nodes=True,
    ),
    PendingRule(
        _INSUFFICIENT_GPU,
        "no free GPU",
        Status.warn,
        "wait for the autoscaler, or check it can scale (NAP limits, quota, GPU nodes' allocatable)",
    ),
    PendingRule(
        ("0/0 nodes", "no nodes available"),
        "no nodes at all",
        Status.fail,
        "create a node pool or enable node auto-provisioning (eops render gke)",
    ),
    PendingRule(
        ("triggeredscaleup",),
        "waiting for a new node (scale-up triggered)",
        Status.info,
        "normal during scale-up",
    ),
    PendingRule(
        ("nottriggerscaleup",),
        "autoscaler will not add a node for it",
        Status.fail,
        "read the NotTriggerScaleUp event: usually no node group fits the pod's requests or selectors",
    ),
)


def classify_pending(pod: PendingPod, gpu_nodes: int | None = None) -> tuple[str, Status, str]:
    """(reason, severity, fix) for one Pending pod, from the scheduler's and autoscaler's words;
    `gpu_nodes` (how many the cluster has, if known) tells "none exist" from "all busy"."""
    texts = [pod.scheduler_message] + [f"{e.reason}: {e.message}" for e in pod.events]
    blob = "\n".join(texts)
    low = blob.lower()
    no_gpu_nodes = gpu_nodes == 0 and bool(pod.gpu_request)
    rule = next((rule for rule in PENDING_RULES if rule.applies(low, no_gpu_nodes)), None)
    if rule is not None:
        zones = sorted(set(_ZONE_RE.findall(blob))) if rule.names_zones else []
        where = f" in zone {', '.join(zones)}" if zones else ""
        return f"{rule.reason}{where}", rule.status, rule.fix
    if not blob.strip():
        return (
            "not yet considered by the scheduler",
            Status.info,
            "wait a few seconds; if it stays, check kube-scheduler is running",
        )
    first = pod.scheduler_message.splitlines()[0] if pod.scheduler_message else texts[-1]
    return f"unschedulable: {first[:160]}", Status.warn, "kubectl describe pod NAME"
