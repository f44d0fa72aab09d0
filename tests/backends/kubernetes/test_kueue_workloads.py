"""What a Kueue Workload says of an invocation (kueue_workloads.py, pure): whose it is, the notes
of each step Kueue takes, a preemption, and queue positions. The objects have the shape Kueue
v0.17.0 writes (v1beta2); tests/ops/test_kueue_admission_cluster.py reads the real ones."""

from __future__ import annotations

from typing import Any

import pytest

from elasticityops.backends.kubernetes.kueue_workloads import queue_position, read_workload
from elasticityops.domain.kueue_notes import (
    ADMISSION_CHECK,
    ADMITTED,
    DISPATCHED,
    EVICTED,
    QUEUED,
    QUOTA_RESERVED,
)

INSUFFICIENT = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
    "flavor nvidia-tesla-t4, 1 more needed"
)


def _workload(
    inv: str = "inv-a",
    *,
    attempt: int = 0,
    instance: str = "gw1",
    conditions: list[dict[str, Any]] | None = None,
    checks: list[dict[str, Any]] | None = None,
    priority: int = 200,
    created: str = "2026-12-06T10:00:00Z",
    admitted_to: str | None = None,
) -> dict[str, Any]:
    labels = {
        "elasticityops.dev/invocation": inv,
        "elasticityops.dev/attempt": str(attempt),
        "elasticityops.dev/instance": instance,
    }
    status: dict[str, Any] = {"conditions": conditions or []}
    if checks is not None:
        status["admissionChecks"] = checks
    if admitted_to is not None:
        status["admission"] = {
            "clusterQueue": admitted_to,
            "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "nvidia-tesla-t4"}}],
        }
    return {
        "metadata": {"name": f"job-eops-{inv}-1a2b3", "creationTimestamp": created},
        "spec": {
            "queueName": "eops",
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": {"metadata": {"labels": labels}}}],
        },
        "status": status,
    }


def _cond(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def test_a_workload_waiting_for_quota_says_so_in_kueues_words() -> None:
    view = read_workload(
        _workload(conditions=[_cond("QuotaReserved", "False", "Pending", INSUFFICIENT)]), "gw1"
    )
    assert view is not None
    assert (view.invocation, view.attempt, view.queue, view.pending) == ("inv-a", 0, "eops", True)
    assert view.notes == ((QUEUED, f"Kueue: waiting in LocalQueue eops: Pending: {INSUFFICIENT}"),)
    assert view.preempted is None
    assert view.deactivated is None


def test_each_step_kueue_takes_is_a_note_of_its_own() -> None:
    reserved = _cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue eops")
    checks = [{"name": "eops-provisioning", "state": "Pending", "message": "Waiting for\n  capacity"}]
    view = read_workload(_workload(conditions=[reserved], checks=checks, admitted_to="eops"), "gw1")
    assert view is not None
    assert not view.pending
    assert view.notes == (
        (QUOTA_RESERVED, "Kueue: quota reserved in ClusterQueue eops on nvidia-tesla-t4"),
        (ADMISSION_CHECK, "Kueue: admission check eops-provisioning Pending: Waiting for capacity"),
    )
    admitted = [reserved, _cond("Admitted", "True", "Admitted")]
    ready = [{"name": "eops-provisioning", "state": "Ready", "message": "Provisioned"}]
    view = read_workload(_workload(conditions=admitted, checks=ready, admitted_to="eops"), "gw1")
    assert view is not None
    assert [kind for kind, _ in view.notes] == [QUOTA_RESERVED, ADMISSION_CHECK, ADMITTED]
    assert view.notes[-1] == (ADMITTED, "Kueue: admitted by ClusterQueue eops")


def test_a_preemption_by_kueue_ends_the_attempt_and_other_evictions_do_not() -> None:
    said = "Preempted to accommodate a workload (UID: u1) due to prioritization in the ClusterQueue"
    preempted = read_workload(_workload(conditions=[_cond("Evicted", "True", "Preempted", said)]), "gw1")
    assert preempted is not None
    assert preempted.preempted == f"Kueue preempted it: Preempted: {said}"
    assert (EVICTED, f"Kueue: evicted: Preempted: {said}") in preempted.notes
    # Its ProvisioningRequest's capacity gone: Kueue queues it again by itself.
    lost = _cond("Evicted", "True", "AdmissionCheck", "At least one admission check is false")
    requeued = read_workload(_workload(conditions=[lost]), "gw1")
    assert requeued is not None
    assert requeued.preempted is None
    assert requeued.deactivated is None
    inactive = _cond("Evicted", "True", "InactiveWorkload", "The workload is deactivated")
    gone = read_workload(_workload(conditions=[inactive]), "gw1")
    assert gone is not None
    assert gone.deactivated is not None


@pytest.mark.parametrize(
    "workload",
    [
        pytest.param(_workload(instance="another-gateway"), id="another-gateways"),
        pytest.param({"metadata": {"name": "job-theirs"}, "spec": {"podSets": []}}, id="not-a-gateway-job"),
        pytest.param(_workload(attempt="x"), id="unreadable-attempt"),  # type: ignore[arg-type]
    ],
)
def test_a_workload_of_no_invocation_of_this_gateway_is_not_read(workload: dict[str, Any]) -> None:
    assert read_workload(workload, "gw1") is None


def test_long_messages_are_cut() -> None:
    view = read_workload(
        _workload(conditions=[_cond("QuotaReserved", "False", "Pending", "x" * 5000)]), "gw1"
    )
    assert view is not None
    assert len(view.notes[0][1]) < 500


def test_queue_positions_follow_priority_then_creation_among_the_pending() -> None:
    waiting = [_cond("QuotaReserved", "False", "Pending", INSUFFICIENT)]
    views = [
        read_workload(_workload("inv-old", conditions=waiting, created="2026-12-06T10:00:00Z"), "gw1"),
        read_workload(_workload("inv-new", conditions=waiting, created="2026-12-06T10:00:05Z"), "gw1"),
        read_workload(
            _workload("inv-high", conditions=waiting, priority=300, created="2026-12-06T10:00:09Z"), "gw1"
        ),
        read_workload(_workload("inv-run", conditions=[_cond("QuotaReserved", "True")]), "gw1"),
    ]
    seen = [v for v in views if v is not None]
    assert len(seen) == 4
    positions = {v.invocation: queue_position(v, seen) for v in seen}
    assert positions == {"inv-high": 1, "inv-old": 2, "inv-new": 3, "inv-run": None}


def test_a_workload_multikueue_dispatched_names_the_worker_cluster() -> None:
    # The manager's Workload as Kueue v0.17.0's MultiKueue leaves it once a worker reserved
    # quota (workload.go: "The workload got reservation on ...", status.clusterName set).
    workload = _workload(
        conditions=[_cond("QuotaReserved", "True"), _cond("Admitted", "True")],
        checks=[
            {"name": "multikueue", "state": "Ready", "message": 'The workload got reservation on "worker-2"'}
        ],
        admitted_to="eops",
    )
    workload["status"]["clusterName"] = "worker-2"
    view = read_workload(workload, "gw1")
    assert view is not None
    assert view.cluster == "worker-2"
    assert (DISPATCHED, "Kueue: MultiKueue runs it in cluster worker-2") in view.notes
    # Only nominated, not yet admitted anywhere: no cluster yet.
    workload["status"].pop("clusterName")
    workload["status"]["nominatedClusterNames"] = ["worker-1", "worker-2"]
    view = read_workload(workload, "gw1")
    assert view is not None
    assert view.cluster is None
    assert all(kind != DISPATCHED for kind, _ in view.notes)


@pytest.mark.parametrize("name", ["", "Worker\x1b[2J", "a" * 300, "../etc", 7])
def test_a_cluster_name_that_is_no_object_name_is_not_taken(name: object) -> None:
    workload = _workload(conditions=[_cond("QuotaReserved", "True")], admitted_to="eops")
    workload["status"]["clusterName"] = name
    view = read_workload(workload, "gw1")
    assert view is not None
    assert view.cluster is None
