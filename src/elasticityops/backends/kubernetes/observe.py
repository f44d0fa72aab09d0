"""Pure functions from observed Jobs, Pods and Events to BackendEvents.

Each observation yields at most one event (a pod first seen finished tells its capacity, start
and end in one), with the end as one `Finished` outcome. Each invocation carries a small
`Progress` record of what was already reported, so replays (a relist, an adoption after a
restart, the same fact seen through two watches) report nothing twice. Failures are classified
here and named for the user in the shared FailureReason vocabulary."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from elasticityops.backends.kubernetes.labels import ATTEMPT_LABEL, INVOCATION_LABEL
from elasticityops.backends.kubernetes.manifests import ATTEMPT_SUFFIX, CONTAINER_NAME
from elasticityops.backends.kubernetes.objects import KubeObject, parse_time
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.invocations import FailureReason, Note

Observed = tuple[BackendEvent | None, "Progress"]

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
# Of those, the ones that say its node went away (a spot VM reclaimed, a node deleted or gone
# unreachable): the attempt is lost with its node and is retried as its function's retries say.
# A drain (the Eviction API) or the kubelet's pressure eviction leaves the node; those stay
# plain evictions.
NODE_LOSS_DISRUPTIONS = frozenset({"DeletionByPodGC", "DeletionByTaintManager"})
# Pod status reasons of the kubelet's graceful node shutdown (what a spot reclaim does first).
NODE_SHUTDOWN_REASONS = frozenset({"NodeShutdown", "Terminated"})
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
    finished: bool = False  # its end was reported (the store decides what that end does)
    job_seen: bool = False  # its Job was listed or watched (adoption: it needs no relaunch)
    cancelling: bool = False  # we deleted its Job to cancel it
    success_seen: bool = False  # Job Complete seen; waiting a moment for the pod's result
    pending_since: datetime | None = None  # first seen without a node
    held: bool = False  # its Job seen suspended (by Kueue): once let go, the wait starts then
    last_note: str = ""  # kind + message of the latest note, to drop repeats
    last_wait: str = ""  # the latest explanation of the wait, for a no-capacity failure
    disruption: str = ""  # why the pod was taken away, for the Job's failure
    lost_node: str = ""  # the node that went away under its pod (a spot reclaim, a deleted node)
    exit_code: int | None = None  # of a container seen terminated while its pod was deleted
    # A bare pod's (the `pod` workload) timeout, counted from its creation as a Job's deadline
    # is: the kubelet's activeDeadlineSeconds counts only from the pod's start on its node.
    deadline: datetime | None = None
    timeout_s: int | None = None


def invocation_of(obj: KubeObject) -> str | None:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(INVOCATION_LABEL)
    return value if isinstance(value, str) else None


def attempt_of(obj: KubeObject) -> int:
    """The attempt a Job or pod runs (its label); 0 for one made before attempts existed."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(ATTEMPT_LABEL)
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else 0


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


def _end(inv: str, finished: Finished, node: str | None = None) -> BackendEvent:
    return BackendEvent(inv, node=node, finished=finished)


def _note(inv: str, progress: Progress, at: datetime, kind: str, message: str) -> Observed:
    key = f"{kind}\0{message}"
    if progress.finished or key == progress.last_note:
        return None, progress
    wait = progress.last_wait if kind in ("Pulling", "Pulled") else f"{kind}: {message}"
    event = BackendEvent(inv, note=Note(at=at, kind=kind, message=message))
    return event, progress._replace(last_note=key, last_wait=wait)


def observe_pod(pod: KubeObject, progress: Progress, now: datetime) -> Observed:
    """What a pod's current state tells that was not told before, as one event (or None)."""
    inv = invocation_of(pod)
    if inv is None or progress.finished:
        return None, progress
    meta = pod.get("metadata") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    progress = _with_disruption(pod, _with_deadline(pod, progress, now), node)
    if not node:
        return _unscheduled(inv, pod, progress, now)

    event = BackendEvent(inv, node=node)
    if not progress.capacity_ready:
        scheduled = _condition(pod, "PodScheduled")
        at = (parse_time(scheduled.get("lastTransitionTime")) if scheduled else None) or now
        event = replace(event, capacity_ready=at)
        progress = progress._replace(capacity_ready=True)

    state = (_container_status(pod) or {}).get("state") or {}
    running, terminated = state.get("running"), state.get("terminated")
    if (running or terminated) and not progress.started:
        started_at = parse_time((running or terminated or {}).get("startedAt")) or now
        event = replace(event, started=started_at)
        progress = progress._replace(started=True)

    finished = _cannot_start(state.get("waiting"), now)
    if finished is None:
        finished, progress = _ended(
            pod, terminated, progress, now, deleting=bool(meta.get("deletionTimestamp"))
        )
    if finished is not None:
        event = replace(event, finished=finished)
        progress = progress._replace(finished=True)
    return (event if event.tells_something else None), progress


def _with_deadline(pod: KubeObject, progress: Progress, now: datetime) -> Progress:
    """The Job's activeDeadlineSeconds, as the pod carries it, counted from the pod's creation."""
    limit = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if progress.deadline is not None or not isinstance(limit, int):
        return progress
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp")) or now
    return progress._replace(deadline=created + timedelta(seconds=limit), timeout_s=limit)


def _with_disruption(pod: KubeObject, progress: Progress, node: Any) -> Progress:
    """Why the pod is being taken away (its DisruptionTarget), and the node it lost, if any."""
    disruption = _condition(pod, "DisruptionTarget")
    if disruption and disruption.get("status") == "True" and not progress.disruption:
        reason = str(disruption.get("reason") or "")
        text = DISRUPTIONS.get(reason, reason or "disrupted")
        message = str(disruption.get("message") or "")
        progress = progress._replace(disruption=f"{text}: {message}" if message else text)
        if reason in NODE_LOSS_DISRUPTIONS and node:
            progress = progress._replace(lost_node=str(node))
    status = pod.get("status") or {}
    if node and not progress.lost_node and status.get("reason") in NODE_SHUTDOWN_REASONS:
        progress = progress._replace(lost_node=str(node))
    return progress


def _unscheduled(inv: str, pod: KubeObject, progress: Progress, now: datetime) -> Observed:
    """A pod on no node yet: when it began waiting, and the scheduler's word on why."""
    if progress.pending_since is None:
        created = parse_time((pod.get("metadata") or {}).get("creationTimestamp")) or now
        progress = progress._replace(pending_since=created)
    scheduled = _condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        at = parse_time(scheduled.get("lastTransitionTime")) or now
        return _note(inv, progress, at, "Unschedulable", str(scheduled.get("message") or ""))
    return None, progress


def _cannot_start(waiting: Any, now: datetime) -> Finished | None:
    """A container waiting on what will not pass by itself: an image it cannot pull, a
    container it cannot create."""
    if not waiting:
        return None
    reason = str(waiting.get("reason") or "")
    message = str(waiting.get("message") or "")
    if reason in IMAGE_PULL_FAILURES:
        text = f"cannot pull image: {reason}: {message}".rstrip(": ")
        return Finished.failed(now, FailureReason.image_pull, text)
    if reason in LAUNCH_FAILURES:
        text = f"container could not start: {reason}: {message}".rstrip(": ")
        return Finished.failed(now, FailureReason.launch_error, text)
    return None


def _ended(
    pod: KubeObject, terminated: Any, progress: Progress, now: datetime, *, deleting: bool
) -> tuple[Finished | None, Progress]:
    """How the pod ended, if it has: its container's exit, or the pod failed without one."""
    status = pod.get("status") or {}
    if terminated:
        code = int(terminated.get("exitCode") or 0)
        if deleting:
            # Killed because its Job or node went away: the Job's condition tells why.
            return None, progress._replace(exit_code=code)
        if status.get("phase") not in ("Succeeded", "Failed"):
            return None, progress
        at = parse_time(terminated.get("finishedAt")) or now
        pod_reason, pod_message = str(status.get("reason") or ""), str(status.get("message") or "")
        if pod_reason == "DeadlineExceeded":
            finished = pod_timed_out(at, progress, exit_code=code)
        else:
            finished = _container_outcome(terminated, progress, at, pod_reason, pod_message)
        return finished, progress._replace(exit_code=code)
    if status.get("phase") == "Failed" and not deleting:
        # Failed without a terminated container: evicted or rejected by the node, or its node
        # went away (the pod GC fails it without a word from a kubelet).
        reason = str(status.get("reason") or "")
        message = str(status.get("message") or "") or progress.disruption or reason
        if reason == "DeadlineExceeded":
            return pod_timed_out(now, progress), progress
        return taken_away(now, progress, f"pod {reason or 'failed'}: {message}"), progress
    return None, progress


def _container_outcome(
    terminated: KubeObject, progress: Progress, at: datetime, pod_reason: str, pod_message: str
) -> Finished:
    code = int(terminated.get("exitCode") or 0)
    reason = str(terminated.get("reason") or "")
    text = str(terminated.get("message") or "")
    if code == 0:
        # The termination message is what the container wrote to EOPS_RESULT_PATH: its small
        # result (a callback, when it came, has stored the result already and wins).
        return Finished.succeeded(at, result=text.encode() if text else None)
    if reason == "OOMKilled":
        message = "out of memory: the container used more than its memory request (OOMKilled)"
        return Finished.failed(at, FailureReason.oom_killed, message, exit_code=code)
    if reason in LAUNCH_FAILURES:
        message = f"container could not start: {reason}: {text}".rstrip(": ")
        return Finished.failed(at, FailureReason.launch_error, message, exit_code=code)
    if pod_reason in ("Evicted", "Terminated", "NodeShutdown") or progress.disruption:
        message = progress.disruption or f"pod {pod_reason}: {pod_message}".rstrip(": ")
        return taken_away(at, progress, message, exit_code=code)
    tail = f": {text.strip()[-500:]}" if text.strip() else ""
    return Finished.failed(at, FailureReason.exit_code, f"exit code {code}{tail}", exit_code=code)


def taken_away(at: datetime, progress: Progress, message: str, *, exit_code: int | None = None) -> Finished:
    """An `evicted` end saying `message`: with its node gone (`progress.lost_node`), one that
    names the node and says it was lost, so that its function's retries apply."""
    if progress.lost_node:
        said = f"{progress.lost_node} went away: {message}"
        return Finished.failed(
            at, FailureReason.evicted, said, exit_code=exit_code, lost_node=progress.lost_node
        )
    return Finished.failed(at, FailureReason.evicted, message, exit_code=exit_code)


def pod_timed_out(at: datetime, progress: Progress, *, exit_code: int | None = None) -> Finished:
    """The end of a bare pod that ran past its timeout (the kubelet's deadline, or the gateway's
    for one still waiting for a node)."""
    limit = "" if progress.timeout_s is None else f" of {progress.timeout_s} s"
    message = f"ran past its timeout{limit} (waiting for a node included)"
    return Finished.timed_out(at, message, exit_code=exit_code)


def past_deadline(progress: Progress, now: datetime) -> bool:
    """A bare pod not yet ended at its timeout from creation: the gateway ends it."""
    return not progress.finished and progress.deadline is not None and now >= progress.deadline


def pod_over(pod: KubeObject) -> bool:
    """The pod has ended (Succeeded or Failed) or is being deleted: its container starts no more."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_ended_at(pod: KubeObject) -> datetime | None:
    """When an ended pod ended: its container's finish, else its latest condition's change."""
    if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
        return None
    terminated = ((_container_status(pod) or {}).get("state") or {}).get("terminated") or {}
    at = parse_time(terminated.get("finishedAt"))
    if at is not None:
        return at
    conditions = (pod.get("status") or {}).get("conditions") or []
    changes = [parse_time(c.get("lastTransitionTime")) for c in conditions]
    known = [c for c in changes if c is not None]
    return max(known) if known else parse_time((pod.get("metadata") or {}).get("creationTimestamp"))


def run_span(pod: KubeObject) -> tuple[datetime, datetime] | None:
    """When its container ran, once the pod is over: from the container's start to its finish,
    or to the moment the pod's deletion was asked for (a run stopped while it ran). None while
    it runs on, and where its container never started."""
    if not pod_over(pod):
        return None
    state = (_container_status(pod) or {}).get("state") or {}
    terminated = state.get("terminated") or {}
    started = parse_time((state.get("running") or terminated).get("startedAt"))
    if started is None:
        return None
    ended = parse_time(terminated.get("finishedAt")) or _deletion_asked(pod) or pod_ended_at(pod)
    return None if ended is None else (started, max(started, ended))


def _deletion_asked(pod: KubeObject) -> datetime | None:
    meta = pod.get("metadata") or {}
    deadline = parse_time(meta.get("deletionTimestamp"))
    if deadline is None:
        return None
    return deadline - timedelta(seconds=int(meta.get("deletionGracePeriodSeconds") or 0))


def observe_pod_deleted(inv: str, progress: Progress, now: datetime) -> Observed:
    """A bare pod that vanished before its end was seen: cancelled by us, taken away with its
    node or by an eviction (its function's retries apply), or deleted by someone else."""
    if progress.finished:
        return None, progress
    if progress.cancelling:
        finished = Finished.cancelled(now)
    elif progress.disruption or progress.lost_node:
        said = progress.disruption or "its pod was deleted"
        finished = taken_away(now, progress, said, exit_code=progress.exit_code)
    else:
        finished = Finished.failed(now, FailureReason.lost, "its pod was deleted outside ElasticityOps")
    return _end(inv, finished), progress._replace(finished=True)


_JOB_ENDS = ("Complete", "SuccessCriteriaMet", "FailureTarget", "Failed")


def job_over(job: KubeObject) -> bool:
    """Its Job has ended (a condition of success or failure holds) or is being deleted: no
    container of it starts any more."""
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return any((_condition(job, kind) or {}).get("status") == "True" for kind in _JOB_ENDS)


def observe_job(job: KubeObject, progress: Progress, now: datetime) -> Observed:
    """The end of an invocation as its Job's conditions tell it (success, deadline, failure)."""
    inv = invocation_of(job)
    if inv is None or progress.finished:
        return None, progress
    for kind in ("Complete", "SuccessCriteriaMet"):
        cond = _condition(job, kind)
        if cond and cond.get("status") == "True":
            at = (
                parse_time((job.get("status") or {}).get("completionTime"))
                or parse_time(cond.get("lastTransitionTime"))
                or now
            )
            return _end(inv, Finished.succeeded(at)), progress._replace(finished=True)
    for kind in ("FailureTarget", "Failed"):
        cond = _condition(job, kind)
        if cond and cond.get("status") == "True":
            at = parse_time(cond.get("lastTransitionTime")) or now
            reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
            failure = job_failure(reason, message, progress, at, job)
            return _end(inv, failure), progress._replace(finished=True)
    return None, progress


def job_failure(reason: str, message: str, progress: Progress, at: datetime, job: KubeObject) -> Finished:
    if reason == "DeadlineExceeded":
        limit = (job.get("spec") or {}).get("activeDeadlineSeconds")
        return Finished.timed_out(at, f"ran past its timeout of {limit} s (waiting for a node included)")
    if progress.disruption or progress.lost_node:
        said = progress.disruption or f"Job failed: {reason}: {message}".rstrip(": ")
        return taken_away(at, progress, said, exit_code=progress.exit_code)
    if progress.exit_code not in (None, 0):
        code = progress.exit_code
        return Finished.failed(at, FailureReason.exit_code, f"exit code {code}", exit_code=code)
    if not progress.started:
        text = f"the pod was lost before it started ({reason}: {message})".replace(": )", ")")
        return Finished.failed(at, FailureReason.evicted, text)
    return Finished.failed(at, FailureReason.exit_code, f"Job failed: {reason}: {message}".rstrip(": "))


def observe_job_deleted(inv: str, progress: Progress, now: datetime) -> Observed:
    """A Job that vanished before it finished: cancelled by us, or deleted by someone else."""
    if progress.finished:
        return None, progress
    if progress.cancelling:
        finished = Finished.cancelled(now)
    else:
        finished = Finished.failed(now, FailureReason.lost, "its Job was deleted outside ElasticityOps")
    return _end(inv, finished), progress._replace(finished=True)


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


def observe_event(event: KubeObject, inv: str, progress: Progress, now: datetime) -> Observed:
    note = note_of_event(event)
    if note is None:
        return None, progress
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


def observe_job_event(event: KubeObject, inv: str, progress: Progress, now: datetime) -> Observed:
    """A Kubernetes Event about the invocation's Job. `FailedCreate` means its pod was refused:
    a quota refusal explains the wait (the Job controller retries once quota frees); a
    refusal that retrying cannot cure (a missing PriorityClass, an admission webhook, an invalid
    or forbidden pod) fails the invocation at once instead of after the provisioning timeout;
    anything else (a server error) is a note and the Job controller's retries go on."""
    if progress.finished or str(event.get("reason") or "") != "FailedCreate":
        return None, progress
    message = str(event.get("message") or "")
    at = parse_time(event.get("lastTimestamp")) or parse_time(event.get("eventTime")) or now
    lowered = message.lower()
    if any(word.lower() in lowered for word in _QUOTA_WORDS):
        return _note(inv, progress, at, "QuotaExceeded", message)
    if any(word.lower() in lowered for word in _PERMANENT_CREATE_WORDS):
        refused = f"the cluster refused the Job's pod: {message}"
        failed = Finished.failed(at, FailureReason.launch_error, refused)
        return _end(inv, failed), progress._replace(finished=True)
    return _note(inv, progress, at, "FailedCreate", message)


def job_name_of_pod(pod_name: str) -> str:
    """Pods of a Job are named `<job>-<5 random characters>`."""
    head, sep, _ = pod_name.rpartition("-")
    return head if sep else pod_name


def attempt_of_job_name(name: str) -> tuple[str, int] | None:
    """(invocation, attempt) a Job (or its Secret) is named for: `eops-<id>` or, for a later
    attempt, `eops-<id>-a<attempt>` (manifests.job_name; ids are ours, always short enough and
    DNS-safe, so the name always carries them)."""
    if not name.startswith("eops-inv-"):
        return None
    rest = name[len("eops-") :]
    head, sep, number = rest.rpartition(ATTEMPT_SUFFIX)
    if sep and head.startswith("inv-") and "-" not in head[len("inv-") :] and number.isdigit():
        return head, int(number)
    return rest, 0


def waiting_for_a_node(job: KubeObject, progress: Progress, now: datetime) -> Progress:
    """Since when the Job's work has waited for a node, as its Job shows it (the provisioning
    timeout counts from there; the pod's own watch may set it first)."""
    if (job.get("spec") or {}).get("suspend"):
        # Held by Kueue (or suspended by anyone): waiting in a queue is no wait for a node, so
        # the provisioning timeout counts from when it is let go.
        return progress._replace(pending_since=None, held=True)
    if progress.held:
        # Let go after a hold seen here (Kueue admitted it, or admitted it again after an
        # eviction: its startTime and creation may be from before). A pod evicted before it
        # started leaves the next one a wait for a node of its own, its node or not.
        if progress.started:
            return progress._replace(pending_since=None, held=False)
        return progress._replace(pending_since=now, capacity_ready=False, held=False)
    if progress.pending_since is None and not progress.capacity_ready:
        status = job.get("status") or {}
        # A Job let go by Kueue starts then (startTime); one never held, when it was made.
        begun = parse_time(status.get("startTime")) or parse_time(
            (job.get("metadata") or {}).get("creationTimestamp")
        )
        return progress._replace(pending_since=begun or now)
    return progress


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
    message = f"no GPU node within the provisioning timeout of {timeout_seconds:g} s{why}"
    return _end(inv, Finished.failed(now, FailureReason.no_capacity, message))
