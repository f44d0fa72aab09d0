"""What Kueue's Workload of an invocation's Job says, read once (pure): whose it is, the notes
that explain where it stands in Kueue (queued, quota reserved, admission checks, admitted,
evicted), whether Kueue took a running attempt away, and where it waits in its queue.

Kueue makes one Workload per Job and copies the Job's pod template into it, so the invocation
and attempt labels of the template name whose it is. Messages are Kueue's own, after "Kueue:".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from elasticityops.backends.kubernetes.labels import ATTEMPT_LABEL, INSTANCE_LABEL, INVOCATION_LABEL
from elasticityops.backends.kubernetes.objects import KubeObject, parse_time
from elasticityops.domain.kueue_notes import (
    ADMISSION_CHECK,
    ADMITTED,
    DISPATCHED,
    EVICTED,
    QUEUED,
    QUOTA_RESERVED,
)

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
MESSAGE_LIMIT = 400  # Kueue's messages list every flavor it tried: enough to name the reason


_CLUSTER_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")

# Evictions after which Kueue runs the workload again by itself (its ProvisioningRequest's
# capacity lost, an admission check to retry): the invocation keeps its attempt and waits.
# A preemption takes the attempt away (the gateway's retries decide); a deactivated workload
# never runs again.
_PREEMPTED = "Preempted"
_DEACTIVATED = "InactiveWorkload"


@dataclass(frozen=True)
class WorkloadView:
    invocation: str
    attempt: int
    queue: str  # its LocalQueue
    cluster_queue: str | None  # once Kueue reserved quota in one
    notes: tuple[tuple[str, str], ...]  # (kind, message), in the order of the workload's life
    pending: bool  # waiting for quota: counted in queue positions
    priority: int
    created: datetime | None
    preempted: str | None  # Kueue preempted it: the message the invocation's end carries
    deactivated: str | None  # Kueue will not run it again: why
    cluster: str | None = None  # MultiKueue: the worker cluster that admitted it
    name: str = ""  # the Workload's own name (Kueue's, derived from its Job's)
    reserved: bool = False  # quota reserved (on a MultiKueue manager: dispatching may begin)
    finished: bool = False
    # Admitted: quota reserved and every admission check Ready (a capacity check, DWS, too)
    admitted: bool = False
    evicted: bool = False  # Evicted: Kueue is taking its quota back (done once QuotaReserved goes)
    nominated: tuple[str, ...] = ()  # MultiKueue: the workers it may be dispatched to now


def read_workload(workload: KubeObject, instance: str) -> WorkloadView | None:
    """The view of `workload`, or None where it is no workload of this gateway's Jobs."""
    template = _first_template(workload)
    labels = (template.get("metadata") or {}).get("labels") or {}
    invocation = labels.get(INVOCATION_LABEL)
    if not invocation or labels.get(INSTANCE_LABEL) != instance:
        return None
    try:
        attempt = int(labels.get(ATTEMPT_LABEL) or 0)
    except ValueError:
        return None
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    queue = str(spec.get("queueName") or "")
    admission = status.get("admission") or {}
    cluster_queue = admission.get("clusterQueue")
    conditions = {str(c.get("type")): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    notes = _notes(queue, cluster_queue, conditions, status.get("admissionChecks") or [], admission)
    cluster = _cluster_name(status)
    if cluster is not None:
        notes = (*notes, (DISPATCHED, f"Kueue: MultiKueue runs it in cluster {cluster}"))
    evicted = _true(conditions.get("Evicted"))
    reason = str((conditions.get("Evicted") or {}).get("reason") or "")
    said = _said(conditions.get("Evicted"))
    inactive = spec.get("active") is False or (evicted and reason == _DEACTIVATED)
    return WorkloadView(
        invocation=invocation,
        attempt=attempt,
        queue=queue,
        cluster_queue=cluster_queue,
        notes=notes,
        pending=not _true(conditions.get("QuotaReserved")) and not _true(conditions.get("Finished")),
        priority=int(spec.get("priority") or 0),
        created=parse_time((workload.get("metadata") or {}).get("creationTimestamp")),
        preempted=f"Kueue preempted it: {said}" if evicted and reason == _PREEMPTED else None,
        deactivated=f"Kueue deactivated its workload: {said}" if inactive else None,
        cluster=cluster,
        name=str((workload.get("metadata") or {}).get("name") or ""),
        reserved=_true(conditions.get("QuotaReserved")),
        finished=_true(conditions.get("Finished")),
        admitted=_true(conditions.get("Admitted")),
        evicted=evicted,
        nominated=tuple(
            n
            for n in status.get("nominatedClusterNames") or ()
            if isinstance(n, str) and _CLUSTER_NAME.fullmatch(n)
        ),
    )


# The MultiKueue check's message on the manager when the worker's Kueue evicted the work
# (multikueue/workload.go, MultiKueueRedoAdmissionOnEvictionInWorker): Kueue v0.17.0's words.
_EVICTED_IN_WORKER = "Workload evicted on worker cluster"


def evicted_in_worker(workload: KubeObject) -> str | None:
    """The MultiKueue check's message where a worker's Kueue evicted this manager's Workload
    (its pod not ready in time there, say) and MultiKueue reset it for admission again; None
    otherwise (a worker lost, say)."""
    for check in (workload.get("status") or {}).get("admissionChecks") or []:
        message = str((check or {}).get("message") or "") if isinstance(check, dict) else ""
        if message.startswith(_EVICTED_IN_WORKER):
            return _clip(message)
    return None


def _notes(
    queue: str,
    cluster_queue: str | None,
    conditions: Mapping[str, KubeObject],
    checks: Iterable[KubeObject],
    admission: KubeObject,
) -> tuple[tuple[str, str], ...]:
    notes: list[tuple[str, str]] = []
    reserved = conditions.get("QuotaReserved")
    if _true(reserved):
        flavors = _flavors(admission)
        on = f" on {flavors}" if flavors else ""
        notes.append((QUOTA_RESERVED, f"Kueue: quota reserved in ClusterQueue {cluster_queue}{on}"))
    elif reserved is not None and not _true(conditions.get("Finished")):
        notes.append((QUEUED, f"Kueue: waiting in LocalQueue {queue}: {_said(reserved)}"))
    for check in checks:
        # Kueue lists every check as Pending from the start: a check says something once quota
        # is reserved (it runs then), or when it retries or rejects.
        if (
            isinstance(check, dict)
            and check.get("state")
            and (_true(reserved) or check.get("state") != "Pending")
        ):
            name, state = check.get("name"), check.get("state")
            message = _clip(str(check.get("message") or ""))
            text = f"Kueue: admission check {name} {state}" + (f": {message}" if message else "")
            notes.append((ADMISSION_CHECK, text))
    if _true(conditions.get("Admitted")):
        notes.append((ADMITTED, f"Kueue: admitted by ClusterQueue {cluster_queue}"))
    if _true(conditions.get("Evicted")):
        notes.append((EVICTED, f"Kueue: evicted: {_said(conditions.get('Evicted'))}"))
    return tuple(notes)


def _cluster_name(status: KubeObject) -> str | None:
    """The worker cluster MultiKueue runs it in; None with one cluster, or before one admits it.
    A name is a Kubernetes object's (a MultiKueueCluster's): one that is not is not shown."""
    name = status.get("clusterName")
    if not isinstance(name, str) or not _CLUSTER_NAME.fullmatch(name):
        return None
    return name


def _flavors(admission: KubeObject) -> str:
    """The flavors Kueue assigned, e.g. "nvidia-tesla-t4"."""
    names: list[str] = []
    for pod_set in admission.get("podSetAssignments") or []:
        for flavor in ((pod_set or {}).get("flavors") or {}).values():
            if flavor not in names:
                names.append(str(flavor))
    return ", ".join(names)


def _true(condition: KubeObject | None) -> bool:
    return bool(condition) and (condition or {}).get("status") == "True"


def _said(condition: KubeObject | None) -> str:
    cond = condition or {}
    reason, message = str(cond.get("reason") or ""), _clip(str(cond.get("message") or ""))
    return f"{reason}: {message}" if reason and message else reason or message or "no reason given"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def _first_template(workload: KubeObject) -> KubeObject:
    pod_sets = (workload.get("spec") or {}).get("podSets") or []
    first = pod_sets[0] if pod_sets and isinstance(pod_sets[0], dict) else {}
    return first.get("template") or {}


def queue_position(mine: WorkloadView, seen: Iterable[WorkloadView]) -> int | None:
    """1-based among the pending workloads of its LocalQueue that the gateway sees (its own, in
    its namespace), in the order Kueue's BestEffortFIFO takes them: priority, then creation.
    None once it is not pending. Workloads of other namespaces sharing the ClusterQueue are not
    seen, so this is its place among the gateway's own, not in the whole ClusterQueue."""
    if not mine.pending:
        return None
    key = _order(mine)
    ahead = sum(1 for w in seen if w.pending and w.queue == mine.queue and _order(w) < key)
    return 1 + ahead


def _order(view: WorkloadView) -> tuple[int, float, str]:
    created = view.created.timestamp() if view.created is not None else 0.0
    return (-view.priority, created, view.invocation)


KUEUE_ADMISSION_MANAGER = "kueue-admission"
"""The field manager an external MultiKueue dispatcher must write `status.nominatedClusterNames`
as (kueue#5782): Kueue applies the Workload's admission status as this manager, with the
nomination in it, and clears the nomination by leaving it out when a worker admits it."""
# pkg/workload/workload.go: the conditions Kueue's admission patch carries.
_ADMISSION_CONDITIONS = (
    "QuotaReserved",
    "BlockedOnPreemptionGates",
    "Evicted",
    "Admitted",
    "Preempted",
    "Requeued",
    "DeactivationTarget",
    "Finished",
)


def nomination_apply(workload: KubeObject, clusters: Sequence[str]) -> KubeObject:
    """The server-side apply, as KUEUE_ADMISSION_MANAGER, that nominates `clusters`: the
    admission status as Kueue's own dispatchers write it (pkg/workload PrepareWorkloadPatch,
    read back from the Workload as seen), with the nomination in it, at the Workload's
    resourceVersion (a Workload changed since it was read is refused with a 409: read again).
    Anything the manager owns and the apply leaves out would be removed, hence the whole set."""
    meta = workload.get("metadata") or {}
    status = workload.get("status") or {}
    out_meta: KubeObject = {
        key: meta[key]
        for key in ("uid", "name", "namespace", "generation", "annotations", "labels", "resourceVersion")
        if meta.get(key) not in (None, "", {})
    }
    patch: KubeObject = {}
    for key in ("admission", "accumulatedPastExecutionTimeSeconds", "clusterName", "unhealthyNodes"):
        if status.get(key) not in (None, [], {}):
            patch[key] = status[key]
    requeue = status.get("requeueState") or {}
    if requeue.get("count") is not None or requeue.get("requeueAt") is not None:
        patch["requeueState"] = requeue
    if not status.get("admission") and status.get("resourceRequests"):
        patch["resourceRequests"] = status["resourceRequests"]
    conditions = {str(c.get("type")): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    kept = [conditions[kind] for kind in _ADMISSION_CONDITIONS if kind in conditions]
    if kept:
        patch["conditions"] = kept
    evictions = (status.get("schedulingStats") or {}).get("evictions")
    if evictions:
        patch["schedulingStats"] = {"evictions": evictions}
    if status.get("preemptionGates"):
        patch["preemptionGates"] = status["preemptionGates"]
    if status.get("admissionChecks"):
        patch["admissionChecks"] = status["admissionChecks"]
    patch["nominatedClusterNames"] = list(clusters)
    return {
        "apiVersion": str(workload.get("apiVersion") or "kueue.x-k8s.io/v1beta2"),
        "kind": "Workload",
        "metadata": out_meta,
        "status": patch,
    }
