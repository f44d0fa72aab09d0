"""The `pod` workload's pure parts: the bare Pod of an invocation (what its Job would have made,
under the Job's name), its Secret owned by it, and what a bare pod's deadline, end and deletion
tell, where a Job's conditions would have told it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from elasticityops.backends.kubernetes.decode import decode_pod
from elasticityops.backends.kubernetes.manifests import (
    build_job,
    build_payload_secret,
    build_pod,
    build_workload,
    owned_by,
)
from elasticityops.backends.kubernetes.observe import (
    Progress,
    observe_pod,
    observe_pod_deleted,
    past_deadline,
    pod_ended_at,
    pod_over,
    pod_timed_out,
)
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.invocations import FailureReason, State

from .builders import INV, T0, condition, invocation, pod, spec, ts

SETTINGS = KubernetesSettings(namespace="gpu-jobs", instance="gw1", workload="pod")
NOW = T0.replace(minute=30)


def _bare(**fields: Any) -> dict[str, Any]:
    return build_pod(spec(**fields), invocation(), SETTINGS, "http://gw:8080/v1/invocations/x/result")


def test_the_bare_pod_is_the_jobs_pod_under_the_jobs_name() -> None:
    bare = _bare(timeout_seconds=300)
    job = build_job(
        spec(timeout_seconds=300), invocation(), SETTINGS, "http://gw:8080/v1/invocations/x/result"
    )
    template = job["spec"]["template"]
    assert bare["kind"] == "Pod"
    assert bare["apiVersion"] == "v1"
    assert bare["metadata"]["name"] == job["metadata"]["name"] == f"eops-{INV}"
    assert bare["metadata"]["namespace"] == "gpu-jobs"
    assert bare["metadata"]["labels"] == template["metadata"]["labels"]
    assert bare["metadata"]["annotations"] == template["metadata"]["annotations"]
    # Everything of the Job's pod (one GPU, toleration, accelerator selector, Never), plus the
    # deadline the Job carried, as the kubelet's own backstop.
    assert {k: v for k, v in bare["spec"].items() if k != "activeDeadlineSeconds"} == template["spec"]
    assert bare["spec"]["activeDeadlineSeconds"] == 300
    assert bare["spec"]["restartPolicy"] == "Never"
    assert bare["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert bare["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}


def test_the_workload_setting_picks_job_or_pod() -> None:
    inv = invocation()
    assert build_workload(spec(), inv, SETTINGS)["kind"] == "Pod"
    assert build_workload(spec(), inv, replace(SETTINGS, workload="job"))["kind"] == "Job"


def test_the_secret_of_a_bare_pod_is_owned_by_the_pod() -> None:
    secret = build_payload_secret(INV, b"{}", "t" * 43, "unknown", SETTINGS)
    [ref] = owned_by(secret, "pod-uid")["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["name"], ref["uid"]) == (
        "v1",
        "Pod",
        f"eops-{INV}",
        "pod-uid",
    )
    jobs = replace(SETTINGS, workload="job")
    [job_ref] = build_payload_secret(INV, b"{}", "t" * 43, "u", jobs)["metadata"]["ownerReferences"]
    assert (job_ref["apiVersion"], job_ref["kind"]) == ("batch/v1", "Job")


def _with_deadline(obj: dict[str, Any], seconds: int = 60) -> dict[str, Any]:
    obj["metadata"]["name"] = f"eops-{INV}"
    obj["spec"]["activeDeadlineSeconds"] = seconds
    return obj


def test_the_deadline_counts_from_the_pods_creation_while_it_waits_for_a_node() -> None:
    _, progress = observe_pod(_with_deadline(pod()), Progress(), NOW)
    assert progress.deadline == T0 + timedelta(seconds=60)  # created at ts(0)
    assert progress.timeout_s == 60
    assert not past_deadline(progress, T0 + timedelta(seconds=59))
    assert past_deadline(progress, T0 + timedelta(seconds=60))
    assert not past_deadline(progress._replace(finished=True), NOW)
    ended = pod_timed_out(NOW, progress)
    assert ended.state is State.timed_out
    assert ended.reason is FailureReason.timeout
    assert ended.message == "ran past its timeout of 60 s (waiting for a node included)"


def test_a_job_made_pod_has_no_deadline_of_its_own() -> None:
    _, progress = observe_pod(pod(), Progress(), NOW)
    assert progress.deadline is None
    assert not past_deadline(progress, NOW + timedelta(days=1))


def test_the_kubelets_deadline_is_a_timeout_not_an_exit_code() -> None:
    killed = {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": ts(60), "finishedAt": ts(120)}}
    obj = _with_deadline(pod(node="n", phase="Failed", state=killed, reason="DeadlineExceeded"))
    event, progress = observe_pod(obj, Progress(capacity_ready=True, started=True), NOW)
    assert event is not None
    assert event.finished is not None
    assert event.finished.state is State.timed_out
    assert "timeout of 60 s" in event.finished.message
    assert progress.finished
    # Failed by its deadline before its container ran (no container status)
    event, _ = observe_pod(
        _with_deadline(pod(node="n", phase="Failed", reason="DeadlineExceeded")),
        Progress(capacity_ready=True),
        NOW,
    )
    assert event is not None
    assert event.finished is not None
    assert event.finished.state is State.timed_out


@pytest.mark.parametrize(
    ("progress", "state", "reason"),
    [
        pytest.param(
            Progress(cancelling=True), State.cancelled, FailureReason.cancelled, id="cancelled-by-us"
        ),
        pytest.param(
            Progress(started=True, disruption="its node disappeared", lost_node="gpu-7"),
            State.failed,
            FailureReason.evicted,
            id="lost-with-its-node",
        ),
        pytest.param(
            Progress(started=True, disruption="evicted (node drained or scaled down)"),
            State.failed,
            FailureReason.evicted,
            id="evicted",
        ),
        pytest.param(Progress(started=True), State.failed, FailureReason.lost, id="deleted-by-someone"),
    ],
)
def test_a_bare_pod_deleted_before_its_end(
    progress: Progress, state: State, reason: FailureReason | None
) -> None:
    event, after = observe_pod_deleted(INV, progress, NOW)
    assert event is not None
    assert event.finished is not None
    assert (event.finished.state, event.finished.reason) == (state, reason)
    assert after.finished
    if progress.lost_node:
        assert event.finished.lost_node == "gpu-7"


def test_a_bare_pod_deleted_after_its_end_tells_nothing() -> None:
    assert observe_pod_deleted(INV, Progress(finished=True), NOW)[0] is None


def test_when_a_pod_is_over_and_when_it_ended() -> None:
    done = {"terminated": {"exitCode": 0, "startedAt": ts(60), "finishedAt": ts(90)}}
    assert pod_over(pod(node="n", phase="Succeeded", state=done))
    assert pod_over(pod(node="n", phase="Running", deleting=True))
    assert not pod_over(pod(node="n", phase="Running"))
    assert pod_ended_at(pod(node="n", phase="Succeeded", state=done)) == T0 + timedelta(seconds=90)
    assert pod_ended_at(pod(node="n", phase="Running")) is None
    # Failed with no container (its node went away): the latest condition's change
    failed = pod(node="n", phase="Failed", conditions=[condition("DisruptionTarget", "DeletionByPodGC", "")])
    failed["status"]["conditions"][0]["lastTransitionTime"] = ts(200)
    assert pod_ended_at(failed) == T0 + timedelta(seconds=200)


def test_the_watch_decoder_keeps_a_bare_pods_deadline() -> None:
    import orjson

    line = orjson.dumps({"type": "ADDED", "object": _with_deadline(pod(), 45)})
    kind, obj = decode_pod(line)
    assert kind == "ADDED"
    assert obj["spec"]["activeDeadlineSeconds"] == 45
