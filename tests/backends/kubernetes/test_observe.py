"""From observed pods, Jobs and Events to backend events, and the failure classification."""

from __future__ import annotations

from typing import Any

import pytest

from elasticityops.backends.kubernetes.observe import (
    ROUTINE_EVENT_REASONS,
    Progress,
    events_field_selector,
    job_name_of_pod,
    no_capacity,
    note_of_event,
    observe_event,
    observe_job,
    observe_job_deleted,
    observe_job_event,
    observe_pod,
    overdue,
)
from elasticityops.domain.invocations import FailureReason
from elasticityops.domain.ports import EventKind

from .builders import INV, T0, condition, job, k8s_event, pod, scheduled, ts, unschedulable

NOW = T0.replace(minute=30)
RUNNING = {"running": {"startedAt": ts(60)}}
SEEN_RUNNING = Progress(capacity_ready=True, started=True)


def terminated(code: int, reason: str = "Error", message: str = "") -> dict[str, Any]:
    return {
        "terminated": {
            "exitCode": code,
            "reason": reason,
            "message": message,
            "startedAt": ts(60),
            "finishedAt": ts(90),
        }
    }


def kinds(events: list[Any]) -> list[str]:
    return [e.kind.value for e in events]


def test_pending_without_node_explains_why_once() -> None:
    p = pod(conditions=[unschedulable()])
    events, progress = observe_pod(p, Progress(), NOW)
    assert kinds(events) == ["note"]
    assert events[0].note_kind == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in events[0].message
    assert progress.pending_since == T0
    again, _ = observe_pod(p, progress, NOW)
    assert again == []


def test_node_assigned_is_capacity_ready_at_scheduling_time() -> None:
    events, progress = observe_pod(pod(node="gpu-7", conditions=[scheduled(30)]), Progress(), NOW)
    assert kinds(events) == ["capacity_ready"]
    assert events[0].node == "gpu-7"
    assert events[0].at == T0.replace(second=30)
    assert progress.capacity_ready
    assert not progress.started


def test_running_reports_capacity_then_started_in_order() -> None:
    events, progress = observe_pod(
        pod(node="gpu-7", phase="Running", conditions=[scheduled()], state=RUNNING), Progress(), NOW
    )
    assert kinds(events) == ["capacity_ready", "started"]
    assert events[1].at == T0.replace(minute=1)
    assert observe_pod(pod(node="gpu-7", phase="Running", state=RUNNING), progress, NOW)[0] == []


def test_short_job_seen_only_at_its_end_tells_everything() -> None:
    events, _ = observe_pod(
        pod(node="n", phase="Succeeded", state=terminated(0, "Completed", '{"ok":1}')), Progress(), NOW
    )
    assert kinds(events) == ["capacity_ready", "started", "finished"]
    assert events[-1].exit_code == 0
    assert events[-1].reason is None
    assert events[-1].result == b'{"ok":1}'


# (pod, expected reason, expected exit code, words in the message)
ENDINGS = [
    pytest.param(
        pod(node="n", phase="Failed", state=terminated(3, "Error", "Traceback: boom")),
        FailureReason.exit_code,
        3,
        "exit code 3",
        id="exit-code-n",
    ),
    pytest.param(
        pod(node="n", phase="Failed", state=terminated(137, "OOMKilled")),
        FailureReason.oom_killed,
        137,
        "OOMKilled",
        id="oom-killed",
    ),
    pytest.param(
        pod(node="n", phase="Failed", state=terminated(128, "StartError", "exec: not found")),
        FailureReason.launch_error,
        128,
        "could not start",
        id="start-error",
    ),
    pytest.param(
        pod(node="n", state={"waiting": {"reason": "ImagePullBackOff", "message": "pull access denied"}}),
        FailureReason.image_pull,
        None,
        "pull access denied",
        id="image-pull-backoff",
    ),
    pytest.param(
        pod(node="n", state={"waiting": {"reason": "InvalidImageName", "message": "bad ref"}}),
        FailureReason.image_pull,
        None,
        "InvalidImageName",
        id="invalid-image-name",
    ),
    pytest.param(
        pod(node="n", phase="Failed", reason="Evicted", message="The node was low on resource: memory."),
        FailureReason.evicted,
        None,
        "low on resource",
        id="evicted",
    ),
    pytest.param(
        pod(
            node="n",
            phase="Failed",
            state=terminated(143, "Error"),
            reason="Terminated",
            message="Pod was terminated in response to imminent node shutdown.",
        ),
        FailureReason.evicted,
        143,
        "node",
        id="spot-node-shutdown",
    ),
]


@pytest.mark.parametrize(("obj", "reason", "code", "words"), ENDINGS)
def test_failures_are_classified(
    obj: dict[str, Any], reason: FailureReason, code: int | None, words: str
) -> None:
    events, progress = observe_pod(obj, SEEN_RUNNING, NOW)
    assert kinds(events) == ["finished"]
    assert events[0].reason is reason
    assert events[0].exit_code == code
    assert words in events[0].message
    assert progress.finished


def test_err_image_pull_alone_still_waits() -> None:
    events, _ = observe_pod(pod(node="n", state={"waiting": {"reason": "ErrImagePull"}}), SEEN_RUNNING, NOW)
    assert events == []


def test_container_killed_with_its_pod_defers_to_the_job() -> None:
    events, progress = observe_pod(
        pod(node="n", phase="Failed", state=terminated(137), deleting=True), SEEN_RUNNING, NOW
    )
    assert events == []
    assert progress.exit_code == 137
    assert not progress.finished


def test_disruption_is_remembered_for_the_job() -> None:
    gone = condition("DisruptionTarget", "DeletionByPodGC", "node gpu-7 deleted")
    _, progress = observe_pod(
        pod(node="gpu-7", phase="Running", state=RUNNING, conditions=[gone], deleting=True), SEEN_RUNNING, NOW
    )
    events, _ = observe_job(
        job([condition("Failed", "BackoffLimitExceeded", "Job has reached the backoff limit")]), progress, NOW
    )
    assert events[0].reason is FailureReason.evicted
    assert "node disappeared" in events[0].message


# (job conditions, progress, reason, timed out)
JOB_ENDINGS = [
    pytest.param([condition("Complete")], SEEN_RUNNING, None, False, id="complete"),
    pytest.param([condition("SuccessCriteriaMet")], SEEN_RUNNING, None, False, id="success-criteria-met"),
    pytest.param(
        [condition("FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline")],
        SEEN_RUNNING,
        FailureReason.deadline_exceeded,
        True,
        id="deadline-exceeded-early",
    ),
    pytest.param(
        [condition("Failed", "DeadlineExceeded")],
        Progress(),
        FailureReason.deadline_exceeded,
        True,
        id="deadline-exceeded-while-pending",
    ),
    pytest.param(
        [condition("Failed", "BackoffLimitExceeded")],
        SEEN_RUNNING._replace(exit_code=2),
        FailureReason.exit_code,
        False,
        id="backoff-after-exit-code",
    ),
    pytest.param(
        [condition("Failed", "BackoffLimitExceeded")],
        Progress(),
        FailureReason.evicted,
        False,
        id="pod-lost-before-start",
    ),
]


@pytest.mark.parametrize(("conditions", "progress", "reason", "timed_out"), JOB_ENDINGS)
def test_job_conditions(
    conditions: list[dict[str, Any]], progress: Progress, reason: FailureReason | None, timed_out: bool
) -> None:
    events, after = observe_job(job(conditions), progress, NOW)
    assert kinds(events) == ["finished"]
    assert events[0].reason is reason
    assert events[0].timed_out is timed_out
    assert after.finished
    assert observe_job(job(conditions), after, NOW)[0] == []


def test_running_job_tells_nothing() -> None:
    assert observe_job(job(active=1), SEEN_RUNNING, NOW)[0] == []


def test_deadline_message_names_the_timeout() -> None:
    events, _ = observe_job(job([condition("Failed", "DeadlineExceeded")]), SEEN_RUNNING, NOW)
    assert "600 s" in events[0].message


@pytest.mark.parametrize(
    ("cancelling", "reason", "cancelled"),
    [
        pytest.param(True, FailureReason.cancelled, True, id="cancelled-by-us"),
        pytest.param(False, FailureReason.lost, False, id="deleted-by-someone-else"),
    ],
)
def test_job_deleted_before_the_end(cancelling: bool, reason: FailureReason, cancelled: bool) -> None:
    events, _ = observe_job_deleted(job(), SEEN_RUNNING, cancelling, NOW)
    assert events[0].reason is reason
    assert events[0].cancelled is cancelled


def test_job_deleted_after_the_end_tells_nothing() -> None:
    assert observe_job_deleted(job(), SEEN_RUNNING._replace(finished=True), False, NOW)[0] == []


# (reason, message, note kind)
NOTES = [
    pytest.param(
        "FailedScheduling",
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
        "Unschedulable",
        id="scheduler",
    ),
    pytest.param(
        "TriggeredScaleUp",
        "pod triggered scale-up: [{t4-pool 0->1 (max: 10)}]",
        "TriggeredScaleUp",
        id="scale-up",
    ),
    pytest.param(
        "NotTriggerScaleUp",
        "pod didn't trigger scale-up: 1 max node group size reached",
        "QuotaExceeded",
        id="max-size-as-quota",
    ),
    pytest.param(
        "NotTriggerScaleUp",
        "pod didn't trigger scale-up: 1 node(s) didn't match node selector",
        "NotTriggerScaleUp",
        id="no-matching-group",
    ),
    pytest.param("FailedScaleUp", "GCE quota exceeded: NVIDIA_T4_GPUS", "QuotaExceeded", id="gce-quota"),
    pytest.param("FailedScaleUp", "ZONE_RESOURCE_POOL_EXHAUSTED in us-central1-a", "Stockout", id="stockout"),
    pytest.param("Pulling", 'Pulling image "worker:1"', "Pulling", id="pulling"),
    pytest.param("Pulled", 'Successfully pulled image "worker:1" in 41s', "Pulled", id="pulled"),
]


@pytest.mark.parametrize(("reason", "message", "kind"), NOTES)
def test_event_notes(reason: str, message: str, kind: str) -> None:
    assert note_of_event(k8s_event(reason, message)) == (kind, message)
    events, progress = observe_event(k8s_event(reason, message), INV, Progress(), NOW)
    assert events[0].note_kind == kind
    assert events[0].at == T0.replace(second=5)
    assert observe_event(k8s_event(reason, message), INV, progress, NOW)[0] == []


def job_event(reason: str, message: str) -> dict[str, Any]:
    event = k8s_event(reason, message)
    event["involvedObject"] = {"kind": "Job", "name": f"eops-{INV}", "namespace": "elasticityops"}
    return event


NO_CLASS = 'Error creating: pods "eops-x-1" is forbidden: no PriorityClass with name eops-high was found'
QUOTA = 'Error creating: pods "eops-x-1" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=1'
WEBHOOK = 'Error creating: admission webhook "policy.example.com" denied the request: no GPUs here'
SERVER = "Error creating: Internal error occurred: etcdserver: request timed out"


def test_a_pod_the_cluster_refuses_for_good_fails_at_once() -> None:
    for message in (NO_CLASS, WEBHOOK):
        events, progress = observe_job_event(job_event("FailedCreate", message), INV, Progress(), NOW)
        assert kinds(events) == ["finished"]
        assert events[0].reason is FailureReason.launch_error
        assert message in events[0].message
        assert events[0].at == T0.replace(second=5)
        assert progress.finished
        assert observe_job_event(job_event("FailedCreate", message), INV, progress, NOW)[0] == []


def test_quota_and_server_errors_in_pod_creation_only_explain_the_wait() -> None:
    events, progress = observe_job_event(job_event("FailedCreate", QUOTA), INV, Progress(), NOW)
    assert [(e.kind, e.note_kind) for e in events] == [(EventKind.note, "QuotaExceeded")]
    assert not progress.finished
    assert progress.last_wait == f"QuotaExceeded: {QUOTA}"  # named again if it ends in no_capacity
    events, progress = observe_job_event(job_event("FailedCreate", SERVER), INV, Progress(), NOW)
    assert [(e.kind, e.note_kind) for e in events] == [(EventKind.note, "FailedCreate")]
    assert not progress.finished
    assert observe_job_event(job_event("SuccessfulCreate", "Created pod: x"), INV, Progress(), NOW)[0] == []


@pytest.mark.parametrize("reason", ROUTINE_EVENT_REASONS)
def test_routine_events_left_out_of_the_watch_are_no_notes(reason: str) -> None:
    # The Events watch asks the API server not to send these: they must be ones that mean nothing.
    assert note_of_event(k8s_event(reason, "fine")) is None
    assert observe_job_event(job_event(reason, "fine"), INV, Progress(), NOW)[0] == []
    assert f"reason!={reason}" in events_field_selector().split(",")


def test_no_capacity_after_the_provisioning_timeout() -> None:
    _events, progress = observe_pod(pod(conditions=[unschedulable()]), Progress(), NOW)
    _, progress = observe_event(
        k8s_event("NotTriggerScaleUp", "pod didn't trigger scale-up: quota"), INV, progress, NOW
    )
    assert not overdue(progress, T0.replace(second=59), 60)
    assert overdue(progress, T0.replace(minute=1), 60)
    event = no_capacity(INV, progress, NOW, 60)
    assert event.reason is FailureReason.no_capacity
    assert event.kind is EventKind.finished
    assert "60 s" in event.message
    assert "quota" in event.message


def test_a_node_in_time_is_never_overdue() -> None:
    _, progress = observe_pod(pod(node="n", conditions=[scheduled()]), Progress(pending_since=T0), NOW)
    assert not overdue(progress, NOW, 60)


def test_pod_name_to_job_name() -> None:
    assert job_name_of_pod(f"eops-{INV}-x7k2p") == f"eops-{INV}"


def test_foreign_objects_are_ignored() -> None:
    foreign = pod()
    del foreign["metadata"]["labels"]["elasticityops.dev/invocation"]
    assert observe_pod(foreign, Progress(), NOW)[0] == []
