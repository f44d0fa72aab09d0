"""From observed pods, Jobs and Events to backend events, and the failure classification."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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
    run_span,
    waiting_for_a_node,
)
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.invocations import FailureReason, Note, State

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


def parts(event: BackendEvent | None) -> tuple[str, ...]:
    return () if event is None else event.parts


def end(event: BackendEvent | None) -> Finished:
    assert event is not None, "no event"
    assert event.finished is not None, event
    return event.finished


def the_note(event: BackendEvent | None) -> Note:
    assert event is not None, "no event"
    assert event.note is not None, event
    return event.note


def present(event: BackendEvent | None) -> BackendEvent:
    assert event is not None, "no event"
    return event


def test_pending_without_node_explains_why_once() -> None:
    p = pod(conditions=[unschedulable()])
    event, progress = observe_pod(p, Progress(), NOW)
    assert parts(event) == ("note",)
    assert the_note(event).kind == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in the_note(event).message
    assert progress.pending_since == T0
    again, _ = observe_pod(p, progress, NOW)
    assert again is None


def test_node_assigned_is_capacity_ready_at_scheduling_time() -> None:
    event, progress = observe_pod(pod(node="gpu-7", conditions=[scheduled(30)]), Progress(), NOW)
    assert parts(event) == ("capacity_ready",)
    assert present(event).node == "gpu-7"
    assert present(event).capacity_ready == T0.replace(second=30)
    assert progress.capacity_ready
    assert not progress.started


def test_running_reports_capacity_and_start_in_one_event() -> None:
    event, progress = observe_pod(
        pod(node="gpu-7", phase="Running", conditions=[scheduled()], state=RUNNING), Progress(), NOW
    )
    assert parts(event) == ("capacity_ready", "started")
    told = present(event)
    assert (told.capacity_ready, told.started) == (T0.replace(second=30), T0.replace(minute=1))
    assert observe_pod(pod(node="gpu-7", phase="Running", state=RUNNING), progress, NOW)[0] is None


def test_short_job_seen_only_at_its_end_tells_everything() -> None:
    event, _ = observe_pod(
        pod(node="n", phase="Succeeded", state=terminated(0, "Completed", '{"ok":1}')), Progress(), NOW
    )
    assert parts(event) == ("capacity_ready", "started", "finished")
    assert (end(event).state, end(event).exit_code, end(event).reason) == (State.succeeded, 0, None)
    assert end(event).result == b'{"ok":1}'
    assert end(event).at == T0.replace(minute=1, second=30)


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
    event, progress = observe_pod(obj, SEEN_RUNNING, NOW)
    assert parts(event) == ("finished",)
    assert end(event).state is State.failed
    assert end(event).reason is reason
    assert end(event).exit_code == code
    assert words in end(event).message
    assert progress.finished


def test_err_image_pull_alone_still_waits() -> None:
    event, _ = observe_pod(pod(node="n", state={"waiting": {"reason": "ErrImagePull"}}), SEEN_RUNNING, NOW)
    assert event is None


def test_container_killed_with_its_pod_defers_to_the_job() -> None:
    event, progress = observe_pod(
        pod(node="n", phase="Failed", state=terminated(137), deleting=True), SEEN_RUNNING, NOW
    )
    assert event is None
    assert progress.exit_code == 137
    assert not progress.finished


def test_disruption_is_remembered_for_the_job() -> None:
    gone = condition("DisruptionTarget", "DeletionByPodGC", "node gpu-7 deleted")
    _, progress = observe_pod(
        pod(node="gpu-7", phase="Running", state=RUNNING, conditions=[gone], deleting=True), SEEN_RUNNING, NOW
    )
    event, _ = observe_job(
        job([condition("Failed", "BackoffLimitExceeded", "Job has reached the backoff limit")]), progress, NOW
    )
    assert end(event).reason is FailureReason.evicted
    assert "node disappeared" in end(event).message


# (job conditions, progress, reason, state): the timeout is the same reason the local backend gives
JOB_ENDINGS = [
    pytest.param([condition("Complete")], SEEN_RUNNING, None, State.succeeded, id="complete"),
    pytest.param(
        [condition("SuccessCriteriaMet")], SEEN_RUNNING, None, State.succeeded, id="success-criteria-met"
    ),
    pytest.param(
        [condition("FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline")],
        SEEN_RUNNING,
        FailureReason.timeout,
        State.timed_out,
        id="deadline-exceeded-early",
    ),
    pytest.param(
        [condition("Failed", "DeadlineExceeded")],
        Progress(),
        FailureReason.timeout,
        State.timed_out,
        id="deadline-exceeded-while-pending",
    ),
    pytest.param(
        [condition("Failed", "BackoffLimitExceeded")],
        SEEN_RUNNING._replace(exit_code=2),
        FailureReason.exit_code,
        State.failed,
        id="backoff-after-exit-code",
    ),
    pytest.param(
        [condition("Failed", "BackoffLimitExceeded")],
        Progress(),
        FailureReason.evicted,
        State.failed,
        id="pod-lost-before-start",
    ),
]


@pytest.mark.parametrize(("conditions", "progress", "reason", "state"), JOB_ENDINGS)
def test_job_conditions(
    conditions: list[dict[str, Any]], progress: Progress, reason: FailureReason | None, state: State
) -> None:
    event, after = observe_job(job(conditions), progress, NOW)
    assert parts(event) == ("finished",)
    assert end(event).reason is reason
    assert end(event).state is state
    assert after.finished
    assert observe_job(job(conditions), after, NOW)[0] is None


def test_running_job_tells_nothing() -> None:
    assert observe_job(job(active=1), SEEN_RUNNING, NOW)[0] is None


def test_deadline_message_names_the_timeout() -> None:
    event, _ = observe_job(job([condition("Failed", "DeadlineExceeded")]), SEEN_RUNNING, NOW)
    assert "600 s" in end(event).message


@pytest.mark.parametrize(
    ("cancelling", "reason", "state"),
    [
        pytest.param(True, FailureReason.cancelled, State.cancelled, id="cancelled-by-us"),
        pytest.param(False, FailureReason.lost, State.failed, id="deleted-by-someone-else"),
    ],
)
def test_job_deleted_before_the_end(cancelling: bool, reason: FailureReason, state: State) -> None:
    event, after = observe_job_deleted(INV, SEEN_RUNNING._replace(cancelling=cancelling), NOW)
    assert (end(event).reason, end(event).state) == (reason, state)
    assert after.finished


def test_job_deleted_after_the_end_tells_nothing() -> None:
    assert observe_job_deleted(INV, SEEN_RUNNING._replace(finished=True), NOW)[0] is None


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
    event, progress = observe_event(k8s_event(reason, message), INV, Progress(), NOW)
    assert (the_note(event).kind, the_note(event).message) == (kind, message)
    assert the_note(event).at == T0.replace(second=5)
    assert observe_event(k8s_event(reason, message), INV, progress, NOW)[0] is None


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
        event, progress = observe_job_event(job_event("FailedCreate", message), INV, Progress(), NOW)
        assert parts(event) == ("finished",)
        assert end(event).reason is FailureReason.launch_error
        assert message in end(event).message
        assert end(event).at == T0.replace(second=5)
        assert progress.finished
        assert observe_job_event(job_event("FailedCreate", message), INV, progress, NOW)[0] is None


def test_quota_and_server_errors_in_pod_creation_only_explain_the_wait() -> None:
    event, progress = observe_job_event(job_event("FailedCreate", QUOTA), INV, Progress(), NOW)
    assert parts(event) == ("note",)
    assert the_note(event).kind == "QuotaExceeded"
    assert not progress.finished
    assert progress.last_wait == f"QuotaExceeded: {QUOTA}"  # named again if it ends in no_capacity
    event, progress = observe_job_event(job_event("FailedCreate", SERVER), INV, Progress(), NOW)
    assert parts(event) == ("note",)
    assert the_note(event).kind == "FailedCreate"
    assert not progress.finished
    assert observe_job_event(job_event("SuccessfulCreate", "Created pod: x"), INV, Progress(), NOW)[0] is None


@pytest.mark.parametrize("reason", ROUTINE_EVENT_REASONS)
def test_routine_events_left_out_of_the_watch_are_no_notes(reason: str) -> None:
    # The Events watch asks the API server not to send these: they must be ones that mean nothing.
    assert note_of_event(k8s_event(reason, "fine")) is None
    assert observe_job_event(job_event(reason, "fine"), INV, Progress(), NOW)[0] is None


def _left_out(selector: str) -> set[str]:
    """The reasons a field selector excludes, read as the API server reads it: terms joined by
    commas, each `field!=value` (anything else would make it refuse the watch)."""
    excluded = set()
    for term in selector.split(","):
        field, op, value = term.partition("!=")
        assert (field, op) == ("reason", "!="), term
        assert value, term
        assert value.strip() == value, term
        excluded.add(value)
    return excluded


def test_the_events_watch_leaves_out_the_routine_reasons_and_keeps_every_note() -> None:
    left_out = _left_out(events_field_selector())
    # What a healthy Job and its pod produce, as a real cluster sends it (kube-scheduler's
    # Scheduled, the Job controller's SuccessfulCreate and Completed, the kubelet's Created and
    # Started): none of it reaches the gateway.
    assert left_out == {"Scheduled", "SuccessfulCreate", "Created", "Started", "Completed"}
    # Every reason that explains a wait or ends an invocation still comes through.
    for param in NOTES:
        assert param.values[0] not in left_out
    for reason in ("FailedCreate", "NotTriggerScaleUp", "Preempted", "Evicted", "Killing"):
        assert reason not in left_out


def test_no_capacity_after_the_provisioning_timeout() -> None:
    _events, progress = observe_pod(pod(conditions=[unschedulable()]), Progress(), NOW)
    _, progress = observe_event(
        k8s_event("NotTriggerScaleUp", "pod didn't trigger scale-up: quota"), INV, progress, NOW
    )
    assert not overdue(progress, T0.replace(second=59), 60)
    assert overdue(progress, T0.replace(minute=1), 60)
    event = no_capacity(INV, progress, NOW, 60)
    assert parts(event) == ("finished",)
    assert (end(event).state, end(event).reason) == (State.failed, FailureReason.no_capacity)
    assert "60 s" in end(event).message
    assert "quota" in end(event).message


def test_a_node_in_time_is_never_overdue() -> None:
    _, progress = observe_pod(pod(node="n", conditions=[scheduled()]), Progress(pending_since=T0), NOW)
    assert not overdue(progress, NOW, 60)


def test_pod_name_to_job_name() -> None:
    assert job_name_of_pod(f"eops-{INV}-x7k2p") == f"eops-{INV}"


def test_foreign_objects_are_ignored() -> None:
    foreign = pod()
    del foreign["metadata"]["labels"]["elasticityops.dev/invocation"]
    assert observe_pod(foreign, Progress(), NOW)[0] is None


# (pod as the cluster shows it, the node it names as lost or None): whether an eviction took the
# node with it, so that the function's retries apply
NODE_LOSSES = [
    pytest.param(
        pod(
            node="gpu-7",
            phase="Failed",
            state=RUNNING,
            conditions=[condition("DisruptionTarget", "DeletionByPodGC", "PodGC: node no longer exists")],
        ),
        "gpu-7",
        id="pod-gc-after-node-deleted",
    ),
    pytest.param(
        pod(
            node="gpu-7",
            phase="Failed",
            state=RUNNING,
            conditions=[condition("DisruptionTarget", "DeletionByTaintManager", "NoExecute taint")],
        ),
        "gpu-7",
        id="node-unreachable-taint",
    ),
    pytest.param(
        pod(
            node="gpu-7",
            phase="Failed",
            state=terminated(143, "Error"),
            reason="Terminated",
            message="Pod was terminated in response to imminent node shutdown.",
        ),
        "gpu-7",
        id="spot-graceful-node-shutdown",
    ),
    pytest.param(
        pod(node="gpu-7", phase="Failed", reason="Evicted", message="The node was low on resource: memory."),
        None,
        id="kubelet-pressure-eviction-keeps-the-node",
    ),
    pytest.param(
        pod(
            node="gpu-7",
            phase="Failed",
            state=RUNNING,
            conditions=[condition("DisruptionTarget", "EvictionByEvictionAPI", "Eviction API: evicting")],
        ),
        None,
        id="drain-keeps-the-node",
    ),
]


@pytest.mark.parametrize(("obj", "lost"), NODE_LOSSES)
def test_an_eviction_says_whether_its_node_was_lost(obj: dict[str, Any], lost: str | None) -> None:
    event, _ = observe_pod(obj, SEEN_RUNNING, NOW)
    finished = end(event)
    assert (finished.state, finished.reason) == (State.failed, FailureReason.evicted)
    assert finished.lost_node == lost
    assert ("gpu-7 went away" in finished.message) is (lost is not None)


def test_a_lost_node_seen_on_the_deleted_pod_is_told_by_the_job() -> None:
    gone = condition("DisruptionTarget", "DeletionByPodGC", "PodGC: node no longer exists")
    _, progress = observe_pod(
        pod(node="gpu-7", phase="Failed", state=RUNNING, conditions=[gone], deleting=True), SEEN_RUNNING, NOW
    )
    assert (progress.finished, progress.lost_node) == (False, "gpu-7")
    event, _ = observe_job(job([condition("Failed", "BackoffLimitExceeded")]), progress, NOW)
    assert end(event).lost_node == "gpu-7"
    assert end(event).message.startswith("gpu-7 went away: its node disappeared")


def test_the_wait_for_a_node_counts_from_when_kueue_lets_the_job_go() -> None:
    """Held (suspended) is no wait for a node; let go after a hold seen here, the wait starts
    then, not at the Job's old startTime or creation (an eviction and a second admission keep
    them); a Job first seen running counts from its startTime."""
    created = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    now = created + timedelta(minutes=5)
    job: dict[str, Any] = {
        "metadata": {"creationTimestamp": "2026-12-07T09:00:00Z"},
        "spec": {"suspend": True},
        "status": {"startTime": "2026-12-07T09:01:00Z"},
    }
    held = waiting_for_a_node(job, Progress(pending_since=created), now)
    assert (held.pending_since, held.held) == (None, True)
    job["spec"]["suspend"] = False
    let_go = waiting_for_a_node(job, held, now)
    assert (let_go.pending_since, let_go.held) == (now, False)
    assert waiting_for_a_node(job, let_go, now + timedelta(minutes=1)) == let_go
    first = waiting_for_a_node(job, Progress(), now)
    assert first.pending_since == created + timedelta(minutes=1)


def test_a_pod_evicted_before_it_started_leaves_the_next_a_wait_for_a_node_of_its_own() -> None:
    """waitForPodsReady evicted it with a node but not started (its node never turned ready):
    once Kueue lets the Job go again, the next pod's wait is timed out from then."""
    now = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    job: dict[str, Any] = {"metadata": {}, "spec": {"suspend": False}, "status": {}}
    had_a_node = waiting_for_a_node(job, Progress(capacity_ready=True, held=True), now)
    assert (had_a_node.capacity_ready, had_a_node.pending_since, had_a_node.held) == (False, now, False)
    ran = waiting_for_a_node(job, Progress(capacity_ready=True, started=True, held=True), now)
    assert (ran.capacity_ready, ran.pending_since) == (True, None)


@pytest.mark.parametrize(
    ("the_pod", "span"),
    [
        pytest.param(
            pod(phase="Succeeded", state={"terminated": {"startedAt": ts(40), "finishedAt": ts(100)}}),
            (40, 100),
            id="finished",
        ),
        pytest.param(
            {
                **pod(phase="Running", state={"running": {"startedAt": ts(40)}}, deleting=True),
            },
            (40, 100),
            id="stopped-while-running: to its deletion (no grace period named)",
        ),
        pytest.param(pod(phase="Running", state={"running": {"startedAt": ts(40)}}), None, id="running-on"),
        pytest.param(
            pod(phase="Failed", state={"waiting": {"reason": "ImagePullBackOff"}}), None, id="never-ran"
        ),
        pytest.param(pod(phase="Pending", deleting=True), None, id="deleted-before-it-ran"),
    ],
)
def test_a_pods_run_span_is_known_once_it_is_over(
    the_pod: dict[str, Any], span: tuple[int, int] | None
) -> None:
    got = run_span(the_pod)
    assert (None if got is None else tuple(int((t - T0).total_seconds()) for t in got)) == span


def test_a_stopped_runs_end_is_when_its_deletion_was_asked() -> None:
    stopped = pod(phase="Running", state={"running": {"startedAt": ts(40)}}, deleting=True)
    stopped["metadata"]["deletionGracePeriodSeconds"] = 30  # deletionTimestamp 100: asked at 70
    assert run_span(stopped) == (T0 + timedelta(seconds=40), T0 + timedelta(seconds=70))
