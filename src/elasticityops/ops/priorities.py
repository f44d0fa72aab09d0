"""The PriorityClasses ElasticityOps relies on, as the Kubernetes backend defines them.

One definition only: `backends.kubernetes.deploy.priority_classes()` (what `eops render deploy`
applies). `eops render gke` renders the same objects and `doctor` checks a cluster against them;
two definitions would fight over values that Kubernetes does not let anyone change in place.
All real jobs share one value (a running job is never preempted by another real one, which would
lose its GPU work); placeholders sit at -10, the autoscaler's expendable cutoff, so they still
trigger scale-up while every real pod preempts them, and never preempt anything themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elasticityops.backends.kubernetes.deploy import priority_classes
from elasticityops.backends.kubernetes.labels import PRIORITY_CLASSES
from elasticityops.domain.functions import Priority


@dataclass(frozen=True)
class PriorityLevel:
    name: str
    value: int
    preempts: bool


def priority_class_manifests() -> list[dict[str, Any]]:
    """`scheduling.k8s.io/v1` PriorityClasses, none of them the cluster's global default."""
    return priority_classes()


PRIORITY_LEVELS: tuple[PriorityLevel, ...] = tuple(
    PriorityLevel(m["metadata"]["name"], int(m["value"]), m.get("preemptionPolicy") != "Never")
    for m in priority_class_manifests()
)
# The names, in PRIORITY_LEVELS' order: the one place they are derived (the doctor's check reads
# them here, and so will anything else that names the classes, such as Kueue's priority classes).
PRIORITY_CLASS_NAMES: tuple[str, ...] = tuple(level.name for level in PRIORITY_LEVELS)


def workload_priority_classes() -> list[dict[str, Any]]:
    """Kueue's WorkloadPriorityClasses, one per priority level, named as its PriorityClass.
    Unlike the PriorityClasses (one value for every real job), these differ: Kueue admits by
    them, and preempts a lower one for a higher one within a ClusterQueue, as the gateway's own
    admission does by the same levels (`Priority.rank`)."""
    levels = len(Priority)
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": PRIORITY_CLASSES[priority]},
            "value": 100 * (levels - priority.rank),
            "description": f"ElasticityOps invocations of priority {priority.value}",
        }
        for priority in sorted(Priority, key=lambda p: p.rank)
    ]
