"""The stuck-pod watcher's pure parts (issue 14): which pods count as stuck, and the settle poll."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from elasticityops.backends.kubernetes.objects import epoch
from elasticityops.devcluster.nodes import KWOK_NODE_ANNOTATION
from elasticityops.devcluster.stuck import (
    StuckPod,
    bound_pending,
    bound_time,
    replayable,
    settle,
    stuck_pods,
)

T0 = dt.datetime(2026, 12, 1, 12, 0, 0, tzinfo=dt.UTC)


def ts(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def at(seconds: float) -> float:
    return T0.timestamp() + seconds


def node(
    name: str = "n1", *, ready: bool = True, ready_at: float = 0.0, kwok: str | None = "fake"
) -> dict[str, Any]:
    annotations = {} if kwok is None else {KWOK_NODE_ANNOTATION: kwok}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ts(ready_at)}
            ]
        },
    }


def pod(
    name: str = "p",
    *,
    node_name: str | None = "n1",
    bound_at: float | None = 10.0,
    phase: str = "Pending",
    started: bool = False,
    deleting: bool = False,
    created_at: float = 5.0,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "creationTimestamp": ts(created_at)}
    if deleting:
        meta["deletionTimestamp"] = ts(100)
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if bound_at is not None:
        status["conditions"].append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(bound_at)}
        )
    elif node_name is None:
        status["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    if started:
        status["containerStatuses"] = [{"name": "c", "started": True, "state": {"running": {}}}]
    spec = {"nodeName": node_name} if node_name else {}
    return {"metadata": meta, "spec": spec, "status": status}


BOUND = 30.0


@pytest.mark.parametrize(
    ("case", "pods", "nodes", "now", "expected"),
    [
        ("not bound", [pod(node_name=None, bound_at=None)], [node()], 100, []),
        ("bound, node NotReady", [pod()], [node(ready=False)], 100, []),
        ("bound and Running", [pod(phase="Running", started=True)], [node()], 100, []),
        ("bound, Pending, a container started", [pod(started=True)], [node()], 100, []),
        ("bound and Succeeded", [pod(phase="Succeeded")], [node()], 100, []),
        ("bound Pending under the bound", [pod(bound_at=10)], [node()], 10 + BOUND, []),
        ("bound Pending over the bound", [pod(bound_at=10)], [node()], 10 + BOUND + 1, [("p", 31.0)]),
        ("node not kwok-managed", [pod()], [node(kwok=None)], 100, []),
        ("node managed by another selector value", [pod()], [node(kwok="other")], 100, []),
        ("node unknown (deleted)", [pod(node_name="gone")], [node()], 100, []),
        ("deleting pod ignored", [pod(deleting=True)], [node()], 100, []),
        # Counted from the node's readiness when it turned Ready after the binding.
        ("node Ready after binding, under", [pod(bound_at=10)], [node(ready_at=50)], 50 + BOUND, []),
        ("node Ready after binding, over", [pod(bound_at=10)], [node(ready_at=50)], 90, [("p", 40.0)]),
        # spec.nodeName at creation: no PodScheduled condition, counted from creation.
        ("bound at creation", [pod(bound_at=None, created_at=5)], [node()], 60, [("p", 55.0)]),
    ],
)
def test_stuck_pods_matrix(
    case: str,
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    now: float,
    expected: list[tuple[str, float]],
) -> None:
    found = stuck_pods(pods, nodes, at(now), BOUND)
    assert [(p.name, p.seconds) for p in found] == expected, case
    for p in found:
        assert (p.namespace, p.node) == ("ns", "n1")


def test_bound_pending_lists_all_longest_first_and_names_each() -> None:
    pods = [pod("young", bound_at=90), pod("old", bound_at=20), pod("run", phase="Running", started=True)]
    found = bound_pending(pods, [node()], at(100))
    assert found == [StuckPod("ns", "old", "n1", 80.0), StuckPod("ns", "young", "n1", 10.0)]
    assert str(found[0]) == "ns/old on n1: bound and Pending 80s"
    assert found[0].to_json() == {"namespace": "ns", "name": "old", "node": "n1", "seconds": 80.0}


def test_clock_skew_never_gives_negative_seconds() -> None:
    assert bound_pending([pod(bound_at=10)], [node()], at(5))[0].seconds == 0.0


def test_parse_time_and_bound_time() -> None:
    assert epoch("2026-12-01T12:00:00Z") == T0.timestamp()
    assert epoch("2026-12-01T12:00:00.5+00:00") == T0.timestamp() + 0.5
    assert epoch("") is None
    assert epoch(None) is None
    assert epoch("yesterday") is None
    # PodScheduled=False (unschedulable) is not a binding: fall back to creation.
    p = pod(bound_at=None, created_at=7)
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "lastTransitionTime": ts(9)}]
    assert bound_time(p) == at(7)


class FakeCluster:
    """A listing that replays scripted answers, and a clock that the sleeps advance."""

    def __init__(self, answers: list[list[StuckPod]]) -> None:
        self.answers = answers
        self.calls = 0
        self.now = 0.0

    def listing(self) -> list[StuckPod]:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return answer

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def sp(name: str, seconds: float) -> StuckPod:
    return StuckPod("ns", name, "n1", seconds)


def test_settle_nothing_bound_pending_costs_one_listing() -> None:
    fake = FakeCluster([[]])
    assert settle(fake.listing, 30, 35, sleep=fake.sleep, clock=lambda: fake.now) == []
    assert fake.calls == 1


def test_settle_a_pod_that_starts_is_not_stuck() -> None:
    fake = FakeCluster([[sp("a", 1)], [sp("a", 2)], []])
    assert settle(fake.listing, 30, 35, sleep=fake.sleep, clock=lambda: fake.now) == []
    assert fake.calls == 3


def test_settle_waits_for_a_fresh_pod_to_pass_its_own_bound() -> None:
    answers = [[sp("a", 0.5 * i)] for i in range(100)]
    fake = FakeCluster(answers)
    stuck = settle(fake.listing, 3, 10, sleep=fake.sleep, clock=lambda: fake.now)
    assert stuck == [sp("a", 3.5)]
    assert fake.now == pytest.approx(3.5)


def test_settle_already_over_the_bound_reports_at_once_and_ignores_newcomers() -> None:
    fake = FakeCluster(
        [[sp("old", 100), sp("fresh", 1)], [sp("old", 100.5), sp("late", 0), sp("fresh", 1.5)]]
    )
    # Cap reached before "fresh" passes its bound: it is not called stuck; "late" came after.
    stuck = settle(fake.listing, 30, 0.5, sleep=fake.sleep, clock=lambda: fake.now)
    assert stuck == [sp("old", 100.5)]


def test_settle_cap_zero_reports_the_first_listing_only() -> None:
    fake = FakeCluster([[sp("old", 100), sp("fresh", 1)]])
    assert settle(fake.listing, 30, 0, sleep=fake.sleep, clock=lambda: fake.now) == [sp("old", 100)]
    assert fake.calls == 1


def test_replayable_pods_are_the_live_ones_of_kwok_managed_nodes() -> None:
    nodes: list[dict[str, Any]] = [
        {"metadata": {"name": "kwok-a", "annotations": {KWOK_NODE_ANNOTATION: "fake"}}},
        {"metadata": {"name": "real-b"}},
    ]

    def pod(name: str, node: str | None, phase: str, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": "ns"}
        if deleting:
            meta["deletionTimestamp"] = ts(0)
        return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}

    pods = [
        pod("running", "kwok-a", "Running"),
        pod("bound-pending", "kwok-a", "Pending"),
        pod("done", "kwok-a", "Succeeded"),
        pod("failed", "kwok-a", "Failed"),
        pod("going", "kwok-a", "Running", deleting=True),
        pod("elsewhere", "real-b", "Running"),
        pod("unbound", None, "Pending"),
    ]
    assert replayable(pods, nodes) == [("ns", "running"), ("ns", "bound-pending")]
