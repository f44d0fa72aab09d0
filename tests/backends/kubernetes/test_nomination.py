"""The gateway as MultiKueue's external dispatcher: which workers it nominates for a Workload
(domain/nomination.py, pure) and how the Nominator writes them and comes back to a Workload no
worker took (nominating.py, against a recording stand-in for the manager's API; the real Kueue
is in test_multikueue_gateway_cluster.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.kueue_watching import KueueWatching
from elasticityops.backends.kubernetes.kueue_workloads import (
    KUEUE_ADMISSION_MANAGER,
    WorkloadView,
    nomination_apply,
)
from elasticityops.backends.kubernetes.labels import ATTEMPT_LABEL, INSTANCE_LABEL, INVOCATION_LABEL
from elasticityops.backends.kubernetes.nominating import Nominator
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import Conflict, NotFound, PermanentError, TemporaryError
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.kueue_notes import NOMINATED, NOT_NOMINATED
from elasticityops.domain.nomination import SHUN_FACTOR, next_nomination, recheck_after, shun, wait_began

WORKERS = ("worker-1", "worker-2", "worker-3")


def test_the_first_worker_is_the_one_with_the_least_work_waiting_the_name_breaking_ties() -> None:
    first = next_nomination(WORKERS, (), 0.0, 0.0, {"worker-1": 4, "worker-2": 1}, {}, 30.0)
    assert first is not None
    assert (first.clusters, first.added) == (("worker-3",), "worker-3")
    assert "worker-3" in first.why
    tie = next_nomination(WORKERS, (), 0.0, 0.0, {}, {}, 30.0)
    assert tie is not None
    assert tie.clusters == ("worker-1",)


def test_a_shunned_worker_is_passed_over_while_it_is_shunned_and_as_a_last_resort() -> None:
    shunned = shun(["worker-1"], now=100.0, wait_s=30.0)
    assert shunned == {"worker-1": 100.0 + SHUN_FACTOR * 30.0}
    during = next_nomination(WORKERS, (), 0.0, 200.0, {"worker-2": 9, "worker-3": 9}, shunned, 30.0)
    assert during is not None
    assert during.added == "worker-2", "busy beats shunned"
    after = next_nomination(WORKERS, (), 0.0, 500.0, {"worker-2": 9, "worker-3": 9}, shunned, 30.0)
    assert after is not None
    assert after.added == "worker-1", "the shun is over"
    only = next_nomination(["worker-1"], (), 0.0, 200.0, {}, shunned, 30.0)
    assert only is not None
    assert only.added == "worker-1", "shunned, but the only one left"


def test_the_next_worker_comes_after_the_wait_until_every_worker_is_nominated() -> None:
    assert next_nomination(WORKERS, ("worker-1",), 10.0, 39.9, {}, {}, 30.0) is None
    more = next_nomination(WORKERS, ("worker-1",), 10.0, 40.0, {"worker-3": 1}, {}, 30.0)
    assert more is not None
    assert (more.clusters, more.added) == (("worker-1", "worker-2"), "worker-2")
    assert "within 30 s" in more.why
    assert next_nomination(WORKERS, WORKERS, 0.0, 1000.0, {}, {}, 30.0) is None


class _Api:
    """The manager as far as nominating goes: status applies, recorded (or refused)."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []
        self.refuse: Exception | None = None
        self.meanwhile: Callable[[], Awaitable[None]] | None = None  # runs while a write is on its way

    async def request(self, method: str, path: str, **options: Any) -> Any:
        if self.refuse is not None:
            raise self.refuse
        if self.meanwhile is not None:
            await self.meanwhile()
        assert method == "PATCH"
        assert options["params"] == {"fieldManager": KUEUE_ADMISSION_MANAGER, "force": "true"}
        assert options["content_type"] == "application/apply-patch+yaml"
        self.patches.append((path, options["body"]["status"]["nominatedClusterNames"]))
        return {}


async def _see(nominator: Nominator, name: str, **fields: Any) -> None:
    view = _view(name, **fields)
    workload = {"metadata": {"name": name, "resourceVersion": "7"}, "status": {}}
    await nominator.seen(view, workload)


def _view(name: str, **fields: Any) -> WorkloadView:
    base: dict[str, Any] = {
        "invocation": f"inv-{name}",
        "attempt": 0,
        "queue": "eops",
        "cluster_queue": "eops",
        "notes": (),
        "pending": False,
        "priority": 0,
        "created": None,
        "preempted": None,
        "deactivated": None,
        "name": name,
        "reserved": True,
    }
    base.update(fields)
    return WorkloadView(**base)


async def _nominating() -> tuple[Nominator, _Api, ManualClock, list[BackendEvent]]:
    """A Nominator over two workers (wait 30 s) on a recording stand-in for the manager, its
    events collected."""
    clock = ManualClock()
    api = _Api()
    events: list[BackendEvent] = []

    async def sink(event: BackendEvent) -> None:
        events.append(event)

    outlet = Outlet(Followed(), cast(Any, None))
    await outlet.open(sink)
    nominator = Nominator(lambda: cast(Any, api), "/w", ["worker-1", "worker-2"], clock, outlet, 30.0)
    return nominator, api, clock, events


async def _settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.anyio
async def test_the_nominator_spreads_the_work_and_adds_a_worker_to_one_left_waiting() -> None:
    nominator, api, clock, events = await _nominating()

    await _see(nominator, "a", reserved=False)  # no quota yet: nothing to dispatch
    assert api.patches == []
    await _see(nominator, "a")
    await _see(nominator, "b")
    assert api.patches == [("/w/a/status", ["worker-1"]), ("/w/b/status", ["worker-2"])]
    # The watch shows our write (or lags behind it): nothing more is written.
    await _see(nominator, "a", nominated=("worker-1",))
    await _see(nominator, "b")
    assert len(api.patches) == 2
    # b is admitted in worker-2; a waits past the wait, and its re-check adds worker-2.
    await _see(nominator, "b", cluster="worker-2", nominated=("worker-2",))
    await _settled()  # the re-checks are asleep on the clock
    clock.advance(30)
    await _settled()
    assert api.patches[2:] == [("/w/a/status", ["worker-1", "worker-2"])]
    assert nominator.waiting() == {"worker-1": 1, "worker-2": 1}
    # worker-1 let a wait: the next Workload goes to worker-2 first, though it is as busy.
    await _see(nominator, "c")
    assert api.patches[3:] == [("/w/c/status", ["worker-2"])]
    said = [e.note.message for e in events if e.note is not None and e.note.kind == NOMINATED]
    assert (
        said[0]
        == "Kueue: the gateway nominated cluster worker-1 to MultiKueue (0 of its workloads waiting there)"
    )
    assert said[2].startswith(
        "Kueue: no worker admitted it within 30 s: the gateway nominated cluster worker-2 too"
    )
    assert [e.invocation_id for e in events] == ["inv-a", "inv-b", "inv-a", "inv-c"]


@pytest.mark.anyio
async def test_a_refused_write_is_tried_again_and_a_gone_workload_forgotten() -> None:
    nominator, api, clock, _ = await _nominating()
    api.refuse = TemporaryError("503 the server is busy")
    await _see(nominator, "a")
    assert api.patches == []
    api.refuse = None
    await _settled()
    clock.advance(5)
    await _settled()
    assert api.patches == [("/w/a/status", ["worker-1"])], "tried again 5 s later"
    api.refuse = NotFound("workloads gone")
    await _see(nominator, "z")
    assert nominator.waiting() == {"worker-1": 1}, "a Workload gone is not counted"
    nominator.forget("a")  # its Job deleted (a cancel) while it waited
    assert nominator.waiting() == {}
    await _see(nominator, "b")
    nominator.clear()  # the backend starts again (a new leader): the first list tells afresh
    assert nominator.waiting() == {}


def test_the_nomination_is_applied_with_the_admission_status_kueue_writes_with_it() -> None:
    """As Kueue's own dispatchers apply it (pkg/workload PrepareWorkloadPatch), as the manager
    `kueue-admission`: whatever that manager owns and the apply left out would be removed."""
    admission = {"clusterQueue": "eops", "podSetAssignments": [{"name": "main", "count": 1}]}
    checks = [{"name": "eops-multikueue", "state": "Pending", "message": "", "lastTransitionTime": "t"}]
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "job-eops-a-1",
            "namespace": "default",
            "uid": "u-1",
            "generation": 1,
            "resourceVersion": "42",
            "labels": {"kueue.x-k8s.io/job-uid": "j"},
            "managedFields": [{"manager": "kueue-admission"}],
        },
        "spec": {"queueName": "eops"},
        "status": {
            "admission": admission,
            "resourceRequests": [{"name": "main"}],
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "PodsReady", "status": "False"},
            ],
            "admissionChecks": checks,
            "requeueState": {},
        },
    }
    body = nomination_apply(workload, ["worker-2"])
    assert body == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "uid": "u-1",
            "name": "job-eops-a-1",
            "namespace": "default",
            "generation": 1,
            "labels": {"kueue.x-k8s.io/job-uid": "j"},
            "resourceVersion": "42",
        },
        "status": {
            "admission": admission,
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admissionChecks": checks,
            "nominatedClusterNames": ["worker-2"],
        },
    }


@pytest.mark.anyio
async def test_a_nomination_refused_for_good_is_told_once_in_the_timeline() -> None:
    """A Role without `patch` on workloads/status: the work would wait unseen; its timeline
    says why, once while the refusal says the same, and a conflict or a busy server (tried
    again, mended by themselves) say nothing."""
    nominator, api, clock, events = await _nominating()
    api.refuse = Conflict("409 Conflict")
    await _see(nominator, "a")
    api.refuse = TemporaryError("503 the server is busy")
    await _see(nominator, "a")
    assert events == []
    api.refuse = PermanentError(
        "workloads/status: 403 Forbidden (the gateway's service account lacks a permission)"
    )
    for _ in range(3):  # its events, and the re-checks every 5 s
        await _see(nominator, "a")
        await _settled()
        clock.advance(5)
        await _settled()
    said = [(e.invocation_id, e.note.kind, e.note.message) for e in events if e.note is not None]
    assert said == [
        (
            "inv-a",
            NOT_NOMINATED,
            "Kueue: the gateway could not nominate cluster worker-1 to MultiKueue, which dispatches "
            "nothing until it can (tried again every 5 s): workloads/status: 403 Forbidden (the "
            "gateway's service account lacks a permission)",
        )
    ]
    api.refuse = None
    clock.advance(5)
    await _settled()
    assert api.patches == [("/w/a/status", ["worker-1"])], "written once it is allowed"
    assert [e.note.kind for e in events if e.note is not None] == [NOT_NOMINATED, NOMINATED]


def test_the_wait_counts_from_the_copy_in_the_worker_or_while_the_worker_keeps_receiving_copies() -> None:
    assert wait_began(10.0, 55.0, 60.0) == 55.0, "its copy is there: from then"
    assert wait_began(10.0, None, None) == 10.0, "no copy anywhere: from its nomination"
    assert wait_began(10.0, None, 50.0) == 50.0, "others' copies still coming: MultiKueue is behind"
    assert wait_began(10.0, None, 5.0) == 10.0


@pytest.mark.anyio
async def test_a_worker_behind_on_copies_is_not_passed_over_and_a_stalled_one_is() -> None:
    """At a thousand Workloads MultiKueue's 5-QPS client makes each copy minutes after its
    nomination: the wait counts from the copy, and a worker that keeps receiving copies waits
    on; one that receives none for the wait gets the next worker added."""
    nominator, api, clock, _ = await _nominating()
    await _see(nominator, "a")
    assert api.patches == [("/w/a/status", ["worker-1"])]
    for _ in range(4):  # copies of other Workloads keep coming to worker-1, not yet a's
        clock.advance(10)
        nominator.copied("other", "worker-1")
        await _settled()
    assert len(api.patches) == 1, "40 s after its nomination, worker-1 is behind, not refusing"
    nominator.copied("a", "worker-1")  # its copy is there now (t=40): 30 s from here
    clock.advance(29)
    await _settled()
    assert len(api.patches) == 1
    clock.advance(1)
    await _settled()
    assert api.patches[1:] == [("/w/a/status", ["worker-1", "worker-2"])]

    # A worker that receives no copy at all for the wait (lost, its link down): passed over.
    await _see(nominator, "b")
    [(_, first)] = api.patches[2:]
    assert len(first) == 1
    await _settled()  # its re-check asleep on the clock
    clock.advance(29)
    await _settled()
    assert len(api.patches) == 3
    clock.advance(1)
    await _settled()
    assert len(api.patches) == 4, "no copy in its worker for 30 s: the other added"


@pytest.mark.anyio
async def test_no_worker_is_added_while_one_has_admitted_its_copy() -> None:
    """The worker's Kueue admitted its copy: it took the work, and the manager's `clusterName`
    waits only on MultiKueue's backlog, so the wait adds no other worker."""
    nominator, api, clock, _ = await _nominating()
    await _see(nominator, "a")
    nominator.copied("a", "worker-1", admitted=True)
    await _settled()
    clock.advance(90)
    await _settled()
    assert api.patches == [("/w/a/status", ["worker-1"])]
    nominator.copied("a", "worker-1", admitted=False)  # evicted there: the wait goes on from here
    await _see(nominator, "a")
    await _settled()
    clock.advance(30)
    await _settled()
    assert api.patches[1:] == [("/w/a/status", ["worker-1", "worker-2"])]


def _worker_copy(name: str, *, admitted: bool) -> dict[str, Any]:
    """MultiKueue's copy of Workload `name` in a worker, its quota reserved there."""
    labels = {INVOCATION_LABEL: f"inv-{name}", ATTEMPT_LABEL: "0", INSTANCE_LABEL: "gw1"}
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""},
        {"type": "Admitted", "status": str(admitted), "reason": "", "message": ""},
    ]
    checks = [] if admitted else [{"name": "dws", "state": "Pending", "message": "no T4 in us-east4"}]
    return {
        "metadata": {"name": name},
        "spec": {
            "queueName": "eops",
            "podSets": [{"name": "main", "template": {"metadata": {"labels": labels}}}],
        },
        "status": {"conditions": conditions, "admissionChecks": checks},
    }


@pytest.mark.anyio
async def test_a_copy_with_quota_whose_capacity_check_waits_does_not_hold_the_next_worker_off() -> None:
    """In worker-1 the copy has quota but is not admitted: its capacity check (DWS) finds no GPU
    in that region. MultiKueue waits for an admission, so after the wait worker-2 is nominated
    as for a copy given nothing at all; an admitted copy holds it off."""
    for admitted, after in ((False, [["worker-1"], ["worker-1", "worker-2"]]), (True, [["worker-1"]])):
        nominator, api, clock, _ = await _nominating()
        followed = Followed()
        followed.launching("inv-a", 0, "nvidia-tesla-t4")
        outlet = Outlet(followed, cast(Any, None))
        await outlet.open(_ignore)
        worker = KueueWatching(
            "default", "gw1", cast(Any, clock), followed, outlet, worker="worker-1", nominator=nominator
        )
        await _see(nominator, "a")
        await worker.on_workload("ADDED", _worker_copy("a", admitted=admitted))
        await _settled()
        clock.advance(30)
        await _settled()
        assert [clusters for _, clusters in api.patches] == after, admitted


async def _ignore(event: BackendEvent) -> None:
    return None


@pytest.mark.anyio
async def test_a_worker_the_work_was_taken_back_from_is_passed_over_for_a_while() -> None:
    """MultiKueue took a Workload back from worker-1 (its Kueue evicted it there: no node in
    time, a stocked-out region): that Workload's next nomination, and the next ones', go to
    worker-2 first until the shun is over."""
    nominator, api, clock, _ = await _nominating()
    nominator.left("worker-1")
    await _see(nominator, "a")
    await _see(nominator, "b")  # worker-2 has one waiting now; worker-1 is still passed over
    clock.advance(SHUN_FACTOR * 30)
    await _see(nominator, "c")
    assert api.patches == [
        ("/w/a/status", ["worker-2"]),
        ("/w/b/status", ["worker-2"]),
        ("/w/c/status", ["worker-1"]),
    ]


@pytest.mark.anyio
async def test_a_nomination_the_worker_admits_before_the_write_returns_is_still_told() -> None:
    """MultiKueue and an idle worker take well under a second: the watch may show the Workload
    admitted there before the gateway's write has returned. Its nomination is still said."""
    nominator, api, _, events = await _nominating()

    async def admitted_there() -> None:
        await _see(nominator, "a", cluster="worker-1")

    api.meanwhile = admitted_there
    await _see(nominator, "a")
    assert api.patches == [("/w/a/status", ["worker-1"])]
    told = [e.note.message for e in events if e.note is not None and e.note.kind == NOMINATED]
    assert told == [
        "Kueue: the gateway nominated cluster worker-1 to MultiKueue (0 of its workloads waiting there)"
    ]
    assert nominator.waiting() == {}, "nothing kept of a Workload already admitted"


@pytest.mark.anyio
async def test_a_worker_the_work_was_taken_back_from_is_not_added_to_a_waiting_nomination() -> None:
    """worker-2 lets the Workload wait, but worker-1 is where MultiKueue just took work back from
    (its region out of GPUs): adding it would likely have the work admitted in both at once, so
    it is added only once its bar is over."""
    nominator, api, clock, _ = await _nominating()
    nominator.left("worker-1")
    await _see(nominator, "a")
    await _settled()
    clock.advance(30)
    await _settled()
    assert api.patches == [("/w/a/status", ["worker-2"])], "worker-1 not added while barred"
    clock.advance(SHUN_FACTOR * 30 - 30)
    await _settled()
    assert api.patches == [("/w/a/status", ["worker-2"]), ("/w/a/status", ["worker-2", "worker-1"])]


def test_the_recheck_of_a_nomination_waits_for_the_wait_then_for_the_first_bar() -> None:
    assert recheck_after(WORKERS, ("worker-1",), 10.0, 20.0, {}, 30.0) == 20.0
    barred = {"worker-2": 100.0, "worker-3": 70.0}
    assert recheck_after(WORKERS, ("worker-1",), 10.0, 50.0, barred, 30.0) == 20.0
    assert recheck_after(WORKERS, ("worker-1",), 10.0, 69.5, barred, 30.0) == 1.0, "at least a second"


@pytest.mark.anyio
async def test_no_worker_is_nominated_while_an_eviction_is_under_way() -> None:
    """Evicted, its quota not yet given back: a copy made now would be deactivated at once, and
    Kueue v0.17.0 never reactivates it (kueue#11598). The nomination waits for the next
    reservation."""
    nominator, api, _, _ = await _nominating()
    await _see(nominator, "a", evicted=True)
    assert api.patches == []
    await _see(nominator, "a")  # the eviction done, quota reserved again
    assert api.patches == [("/w/a/status", ["worker-1"])]
