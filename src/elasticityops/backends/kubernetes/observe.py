"""Pure functions from observed Jobs, Pods and Events to BackendEvents.

Each invocation carries a small `Progress` record of what was already reported, so replays (a
relist, an adoption after a restart, the same fact seen through two watches) report nothing
twice. Failures are classified here and named for the user."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from elasticityops.backends.kubernetes.labels import INVOCATION_LABEL
from elasticityops.backends.kubernetes.manifests import CONTAINER_NAME
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.domain.invocations import FailureReason
from elasticityops.domain.ports import BackendEvent, EventKind

# kubelet reasons of a waiting container that will not get better by waiting
IMAGE_PULL_FAILURES = frozenset({"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
LAUNCH_FAILURES = frozenset({"ContainerCannotRun", "StartError", "CreateContainerError", "RunContainerError"})
# DisruptionTarget condition reasons: the pod was taken away, not failed by its own code
DISRUPTIONS = {
    "PreemptionByScheduler": "preempted by a higher-priority pod",
    "PreemptionByKubeScheduler": "preempted by a higher-priority pod",
    "DeletionByTaintManager": "its node was tainted NoExecute (node going away)",
    "EvictionByEvictionAPI": "evicted (node drained or scaled down)",
    "DeletionByPodGC": "its node disappeared (spot preemption or node deleted)",
    "TerminationByKubelet": "the kubelet terminated it (node shutdown or resource pressure)",
}
_QUOTA_WORDS = ("quota", "QUOTA_EXCEEDED", "max node group size", "max cluster cpu", "max limit reached")
_STOCKOUT_WORDS = (
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "stockout",
    "out of resources",
    "resource pool exhausted",
    "does not have enough resources available",
)


class Progress(NamedTuple):
    """What has been reported for one invocation, and what is remembered to explain its end."""

    capacity_ready: bool = False
    started: bool = False
    finished: bool = False
    pending_since: datetime | None = None  # first seen without a node
    last_note: str = ""  # kind + message of the latest note, to drop repeats
    last_wait: str = ""  # the latest explanation of the wait, for a no-capacity failure
    disruption: str = ""  # why the pod was taken away, for the Job's failure
    exit_code: int | None = None  # of a container seen terminated while its pod was deleted


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def invocation_of(obj: KubeObject) -> str | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(INVOCATION_LABEL)
    return value if isinstance(value, str) else None


def _condition(obj: KubeObject, kind: str) -> KubeObject | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            return cond  # type: ignore[no-any-return]
    return None


def _container_status(pod: KubeObject) -> KubeObject | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or ()
    for status in statuses:
        if status.get("name") == CONTAINER_NAME:
            return status  # type: ignore[no-any-return]
    return statuses[0] if statuses else None


def container_started(pod: KubeObject) -> bool:
    """Its container is running or has run (so it has output to read)."""
    state = (_container_status(pod) or {}).get("state") or {}
    return bool(state.get("running") or state.get("terminated"))


def _ev(inv: str, kind: EventKind, at: datetime, **fields: Any) -> BackendEvent:
    return BackendEvent(invocation_id=inv, kind=kind, at=at, **fields)


def _note(
    inv: str, progress: Progress, at: datetime, kind: str, message: str
) -> tuple[list[BackendEvent], Progress]:
    key = f"{kind}\0{message}"
    if progress.finished or key == progress.last_note:
        return [], progress
    wait = progress.last_wait if kind in ("Pulling", "Pulled") else f"{kind}: {message}"
    return [_ev(inv, EventKind.note, at, note_kind=kind, message=message)], progress._replace(
        last_note=key, last_wait=wait
    )


def observe_pod(pod: KubeObject, progress: Progress, now: datetime) -> tuple[list[BackendEvent], Progress]:
    """What a pod's current state tells that was not told before."""
    inv = invocation_of(pod)
    if inv is None or progress.finished:
        return [], progress
    out: list[BackendEvent] = []
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName")
    deleting = bool(meta.get("deletionTimestamp"))

    disruption = _condition(pod, "DisruptionTarget")
    if disruption and disruption.get("status") == "True" and not progress.disruption:
        reason = str(disruption.get("reason") or "")
        text = DISRUPTIONS.get(reason, reason or "disrupted")
        message = str(disruption.get("message") or "")
        progress = progress._replace(disruption=f"{text}: {message}" if message else text)

    if not node:
        if progress.pending_since is None:
            created = parse_time(meta.get("creationTimestamp")) or now
            progress = progress._replace(pending_since=created)
        scheduled = _condition(pod, "PodScheduled")
        if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            at = parse_time(scheduled.get("lastTransitionTime")) or now
            notes, progress = _note(inv, progress, at, "Unschedulable", str(scheduled.get("message") or ""))
            out += notes
        return out, progress

    if not progress.capacity_ready:
        scheduled = _condition(pod, "PodScheduled")
        at = (parse_time(scheduled.get("lastTransitionTime")) if scheduled else None) or now
        out.append(_ev(inv, EventKind.capacity_ready, at, node=node))
        progress = progress._replace(capacity_ready=True)

    container = _container_status(pod) or {}
    state = container.get("state") or {}
    running = state.get("running")
    terminated = state.get("terminated")
    waiting = state.get("waiting")

    if (running or terminated) and not progress.started:
        started_at = parse_time((running or terminated or {}).get("startedAt")) or now
        out.append(_ev(inv, EventKind.started, started_at, node=node))
        progress = progress._replace(started=True)

    if waiting:
        reason = str(waiting.get("reason") or "")
        message = str(waiting.get("message") or "")
        if reason in IMAGE_PULL_FAILURES:
            out.append(
                _ev(
                    inv,
                    EventKind.finished,
                    now,
                    reason=FailureReason.image_pull,
                    node=node,
                    message=f"cannot pull image: {reason}: {message}".rstrip(": "),
                )
            )
            return out, progress._replace(finished=True)
        if reason in LAUNCH_FAILURES:
            out.append(
                _ev(
                    inv,
                    EventKind.finished,
                    now,
                    reason=FailureReason.launch_error,
                    node=node,
                    message=f"container could not start: {reason}: {message}".rstrip(": "),
                )
            )
            return out, progress._replace(finished=True)

    if terminated:
        code = int(terminated.get("exitCode") or 0)
        if deleting:
            # Killed because its Job or node went away: the Job's condition tells why.
            return out, progress._replace(exit_code=code)
        phase = status.get("phase")
        if phase not in ("Succeeded", "Failed"):
            return out, progress
        at = parse_time(terminated.get("finishedAt")) or now
        out.append(
            _finished_from_container(
                inv,
                terminated,
                progress,
                at,
                node,
                str(status.get("reason") or ""),
                str(status.get("message") or ""),
            )
        )
        return out, progress._replace(finished=True, exit_code=code)

    if status.get("phase") == "Failed" and not deleting:
        # Failed without a terminated container: evicted or rejected by the node.
        reason = str(status.get("reason") or "")
        message = str(status.get("message") or "") or progress.disruption or reason
        out.append(
            _ev(
                inv,
                EventKind.finished,
                now,
                reason=FailureReason.evicted,
                node=node,
                message=f"pod {reason or 'failed'}: {message}",
            )
        )
        return out, progress._replace(finished=True)
    return out, progress


def _finished_from_container(
    inv: str,
    terminated: KubeObject,
    progress: Progress,
    at: datetime,
    node: str | None,
    pod_reason: str,
    pod_message: str,
) -> BackendEvent:
    code = int(terminated.get("exitCode") or 0)
    reason = str(terminated.get("reason") or "")
    text = str(terminated.get("message") or "")
    if code == 0:
        # The termination message is what the container wrote to EOPS_RESULT_PATH: its small
        # result (a callback, when it came, has stored the result already and wins).
        return _ev(
            inv, EventKind.finished, at, exit_code=0, node=node, result=text.encode() if text else None
        )
    if reason == "OOMKilled":
        return _ev(
            inv,
            EventKind.finished,
            at,
            exit_code=code,
            reason=FailureReason.oom_killed,
            node=node,
            message="out of memory: the container used more than its memory request (OOMKilled)",
        )
    if reason in LAUNCH_FAILURES:
        return _ev(
            inv,
            EventKind.finished,
            at,
            exit_code=code,
            reason=FailureReason.launch_error,
            node=node,
            message=f"container could not start: {reason}: {text}".rstrip(": "),
        )
    if pod_reason in ("Evicted", "Terminated", "NodeShutdown") or progress.disruption:
        return _ev(
            inv,
            EventKind.finished,
            at,
            exit_code=code,
            reason=FailureReason.evicted,
            node=node,
            message=progress.disruption or f"pod {pod_reason}: {pod_message}".rstrip(": "),
        )
    tail = f": {text.strip()[-500:]}" if text.strip() else ""
    return _ev(
        inv,
        EventKind.finished,
        at,
        exit_code=code,
        reason=FailureReason.exit_code,
        node=node,
        message=f"exit code {code}{tail}",
    )


def observe_job(job: KubeObject, progress: Progress, now: datetime) -> tuple[list[BackendEvent], Progress]:
    """The end of an invocation as its Job's conditions tell it (success, deadline, failure)."""
    inv = invocation_of(job)
    if inv is None or progress.finished:
        return [], progress
    for kind in ("Complete", "SuccessCriteriaMet"):
        cond = _condition(job, kind)
        if cond and cond.get("status") == "True":
            at = (
                parse_time((job.get("status") or {}).get("completionTime"))
                or parse_time(cond.get("lastTransitionTime"))
                or now
            )
            return [_ev(inv, EventKind.finished, at, exit_code=0)], progress._replace(finished=True)
    for kind in ("FailureTarget", "Failed"):
        cond = _condition(job, kind)
        if cond and cond.get("status") == "True":
            at = parse_time(cond.get("lastTransitionTime")) or now
            return [
                job_failure(
                    inv, str(cond.get("reason") or ""), str(cond.get("message") or ""), progress, at, job
                )
            ], progress._replace(finished=True)
    return [], progress


def job_failure(
    inv: str, reason: str, message: str, progress: Progress, at: datetime, job: KubeObject
) -> BackendEvent:
    if reason == "DeadlineExceeded":
        limit = (job.get("spec") or {}).get("activeDeadlineSeconds")
        return _ev(
            inv,
            EventKind.finished,
            at,
            reason=FailureReason.deadline_exceeded,
            timed_out=True,
            message=f"ran past its timeout of {limit} s (waiting for a node included)",
        )
    if progress.disruption:
        return _ev(
            inv,
            EventKind.finished,
            at,
            reason=FailureReason.evicted,
            exit_code=progress.exit_code,
            message=progress.disruption,
        )
    if progress.exit_code not in (None, 0):
        return _ev(
            inv,
            EventKind.finished,
            at,
            reason=FailureReason.exit_code,
            exit_code=progress.exit_code,
            message=f"exit code {progress.exit_code}",
        )
    if not progress.started:
        return _ev(
            inv,
            EventKind.finished,
            at,
            reason=FailureReason.evicted,
            message=f"the pod was lost before it started ({reason}: {message})".replace(": )", ")"),
        )
    return _ev(
        inv,
        EventKind.finished,
        at,
        reason=FailureReason.exit_code,
        message=f"Job failed: {reason}: {message}".rstrip(": "),
    )


def observe_job_deleted(
    job: KubeObject, progress: Progress, cancelling: bool, now: datetime
) -> tuple[list[BackendEvent], Progress]:
    """A Job that vanished before it finished: cancelled by us, or deleted by someone else."""
    inv = invocation_of(job)
    if inv is None or progress.finished:
        return [], progress
    if cancelling:
        event = _ev(
            inv, EventKind.finished, now, reason=FailureReason.cancelled, cancelled=True, message="cancelled"
        )
    else:
        event = _ev(
            inv,
            EventKind.finished,
            now,
            reason=FailureReason.lost,
            message="its Job was deleted outside ElasticityOps",
        )
    return [event], progress._replace(finished=True)


# Events that every healthy invocation produces and that explain nothing (note_of_event and
# observe_job_event pass them over): the Events watch asks the API server to leave them out, so
# a 1,000-Job burst does not send ~2,000 of them to be decoded and thrown away.
ROUTINE_EVENT_REASONS = ("Scheduled", "SuccessfulCreate", "Created", "Started", "Completed")


def events_field_selector() -> str:
    """The Events watch's field selector: everything but the routine reasons (field selectors
    have no "in", so it is a chain of !=)."""
    return ",".join(f"reason!={reason}" for reason in ROUTINE_EVENT_REASONS)


def note_of_event(event: KubeObject) -> tuple[str, str] | None:
    """(note kind, message) for a Kubernetes Event about a pod, None when it explains nothing.

    Notes explain the wait: the scheduler's FailedScheduling, the cluster autoscaler's
    TriggeredScaleUp / NotTriggerScaleUp, quota and stockout messages, the image pull."""
    reason = str(event.get("reason") or "")
    message = str(event.get("message") or "")
    lowered = message.lower()
    if reason in ("NotTriggerScaleUp", "FailedScaleUp", "FailedScheduling", "ScaleUpFailed"):
        if any(word.lower() in lowered for word in _STOCKOUT_WORDS):
            return "Stockout", message
        if any(word.lower() in lowered for word in _QUOTA_WORDS):
            return "QuotaExceeded", message
    if reason == "FailedScheduling":
        return "Unschedulable", message
    if reason in ("TriggeredScaleUp", "NotTriggerScaleUp", "Pulling", "Pulled", "Preempted", "FailedScaleUp"):
        return reason, message
    if reason in ("Killing", "Evicted", "Preempting"):
        return reason, message
    return None


def observe_event(
    event: KubeObject, inv: str, progress: Progress, now: datetime
) -> tuple[list[BackendEvent], Progress]:
    note = note_of_event(event)
    if note is None:
        return [], progress
    at = (
        parse_time(event.get("lastTimestamp"))
        or parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
        or now
    )
    return _note(inv, progress, at, note[0], note[1])


# What the Job controller says when the API server refuses its pod for good: retrying (it does,
# with back-off) cannot help until someone changes the cluster or the function.
_PERMANENT_CREATE_WORDS = (
    "no PriorityClass",
    "is invalid",
    "denied the request",
    "forbidden",
    "not found",
)


def observe_job_event(
    event: KubeObject, inv: str, progress: Progress, now: datetime
) -> tuple[list[BackendEvent], Progress]:
    """A Kubernetes Event about the invocation's Job. `FailedCreate` means its pod was refused:
    a quota refusal explains the wait (the Job controller retries once quota frees); a
    refusal that retrying cannot cure (a missing PriorityClass, an admission webhook, an invalid
    or forbidden pod) fails the invocation at once instead of after the provisioning timeout;
    anything else (a server error) is a note and the Job controller's retries go on."""
    if progress.finished or str(event.get("reason") or "") != "FailedCreate":
        return [], progress
    message = str(event.get("message") or "")
    at = parse_time(event.get("lastTimestamp")) or parse_time(event.get("eventTime")) or now
    lowered = message.lower()
    if any(word.lower() in lowered for word in _QUOTA_WORDS):
        return _note(inv, progress, at, "QuotaExceeded", message)
    if any(word.lower() in lowered for word in _PERMANENT_CREATE_WORDS):
        failed = _ev(
            inv,
            EventKind.finished,
            at,
            reason=FailureReason.launch_error,
            message=f"the cluster refused the Job's pod: {message}",
        )
        return [failed], progress._replace(finished=True)
    return _note(inv, progress, at, "FailedCreate", message)


def job_name_of_pod(pod_name: str) -> str:
    """Pods of a Job are named `<job>-<5 random characters>`."""
    head, sep, _ = pod_name.rpartition("-")
    return head if sep else pod_name


def overdue(progress: Progress, now: datetime, timeout_seconds: float) -> bool:
    """Still without a node after the provisioning timeout."""
    return (
        not progress.finished
        and not progress.capacity_ready
        and progress.pending_since is not None
        and now - progress.pending_since >= timedelta(seconds=timeout_seconds)
    )


def no_capacity(inv: str, progress: Progress, now: datetime, timeout_seconds: float) -> BackendEvent:
    why = f"; last word from the cluster: {progress.last_wait}" if progress.last_wait else ""
    return _ev(
        inv,
        EventKind.finished,
        now,
        reason=FailureReason.no_capacity,
        message=f"no GPU node within the provisioning timeout of {timeout_seconds:g} s{why}",
    )
