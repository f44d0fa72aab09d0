"""The slim watch decoders keep every field the observers read: same events as the full dicts."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from elasticityops.backends.kubernetes.decode import decode_event, decode_full, decode_job, decode_pod
from elasticityops.backends.kubernetes.observe import Progress, observe_event, observe_job, observe_pod

from .builders import INV, T0, condition, job, k8s_event, pod, scheduled, ts, unschedulable

PODS = [
    pytest.param(pod(conditions=[unschedulable()]), id="unschedulable"),
    pytest.param(
        pod(node="n", phase="Running", conditions=[scheduled()], state={"running": {"startedAt": ts(60)}}),
        id="running",
    ),
    pytest.param(
        pod(
            node="n",
            phase="Failed",
            state={
                "terminated": {
                    "exitCode": 137,
                    "reason": "OOMKilled",
                    "startedAt": ts(60),
                    "finishedAt": ts(90),
                }
            },
        ),
        id="oom",
    ),
    pytest.param(
        pod(
            node="n",
            phase="Failed",
            deleting=True,
            conditions=[condition("DisruptionTarget", "DeletionByPodGC")],
            state={"terminated": {"exitCode": 143}},
        ),
        id="deleting",
    ),
]


def _line(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj})


@pytest.mark.parametrize("obj", PODS)
def test_pod_decoder_keeps_what_observe_pod_reads(obj: dict[str, Any]) -> None:
    kind, slim = decode_pod(_line("MODIFIED", obj))
    assert kind == "MODIFIED"
    assert observe_pod(slim, Progress(), T0) == observe_pod(obj, Progress(), T0)
    assert slim["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(job([condition("Failed", "DeadlineExceeded")]), id="deadline"),
        pytest.param(job([condition("Complete")], completionTime=ts(99)), id="complete"),
    ],
)
def test_job_decoder_keeps_what_observe_job_reads(obj: dict[str, Any]) -> None:
    _, slim = decode_job(_line("MODIFIED", obj))
    assert observe_job(slim, Progress(), T0) == observe_job(obj, Progress(), T0)
    assert slim["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_event_decoder_keeps_what_observe_event_reads() -> None:
    obj = k8s_event("TriggeredScaleUp", "pod triggered scale-up")
    _, slim = decode_event(_line("ADDED", obj))
    assert observe_event(slim, INV, Progress(), T0) == observe_event(obj, INV, Progress(), T0)
    assert slim["involvedObject"]["name"] == obj["involvedObject"]["name"]


def test_error_lines_are_read_whole() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
    for decode in (decode_pod, decode_job, decode_event, decode_full):
        assert decode(_line("ERROR", status)) == ("ERROR", status)


@pytest.mark.parametrize("suspend", [True, False])
def test_job_decoder_keeps_whether_kueue_holds_it(suspend: bool) -> None:
    """The Job watch reads `spec.suspend` (watching.py): a Job Kueue holds is not waiting for a
    node, so the provisioning timeout must not count. Dropped, every held Job timed out."""
    obj = job([])
    obj["spec"]["suspend"] = suspend
    _, slim = decode_job(_line("ADDED", obj))
    assert slim["spec"]["suspend"] is suspend
