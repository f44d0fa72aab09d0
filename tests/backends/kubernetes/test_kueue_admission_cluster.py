"""`eops serve --backend kubernetes --admission kueue` against the real Kueue (the `kueue` lane's
dev cluster) over HTTP: every invocation's Job goes to the LocalQueue at once and Kueue decides
when it starts; the timeline names what Kueue does, queue positions come from its Workloads, and
a preemption by Kueue is retried as the function's `retries` say, with one Job per attempt."""

from __future__ import annotations

import functools
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, COMPONENT_LABEL, GPU_RESOURCE
from elasticityops.backends.kubernetes.manifests import job_name
from elasticityops.backends.kubernetes.warm_objects import WARM_COMPONENT
from elasticityops.devcluster.kwok_provider import t4_group
from elasticityops.devcluster.node_stages import STOCKOUT_REASON
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL, ZONES, node_ready
from helpers.kueue import kueue_queues, queued_job, wait_for
from helpers.pg_cluster import PgCluster, create_database
from helpers.server import RunningServer

from .cluster_support import (
    JobCounter,
    deploy,
    ensure_priority_classes,
    invoke,
    jobs_of,
    k8s_gateway,
    leading,
    pods_of,
    remove_empty_autoscaled_nodes,
    runs,
    start_k8s_gateway,
    start_replica,
    status,
    wait_all_ended,
    wait_state,
)

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_lane("kueue"), pytest.mark.slow]

KUEUE_ADMISSION = {"EOPS_ADMISSION": "kueue"}


@pytest.fixture(scope="module")
def cluster(dev_cluster: Any) -> Any:
    ensure_priority_classes(dev_cluster)
    return dev_cluster


def _kinds(server: RunningServer, inv: str) -> list[str]:
    return [note["kind"] for note in status(server, inv)["notes"]]


def test_a_quota_of_three_runs_three_and_queues_two_with_kueues_reason(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ns = dev_namespace
    budget = "nvidia-tesla-t4=3"
    with (
        cluster.api() as api,
        kueue_queues(api, ns, budget),
        k8s_gateway(cluster, ns, tmp_path, env=KUEUE_ADMISSION) as gw,
        JobCounter(cluster, ns) as counter,
    ):
        deploy(gw, name="render", annotations=runs(20))
        ids = [invoke(gw, "render") for _ in range(5)]
        # Every Job is made at once, held by Kueue: none waits in the gateway's own queue.
        wait_for(lambda: len(jobs_of(cluster, ns)) == 5, 60, "five Jobs")

        def three_admitted() -> dict[str, list[str]] | None:
            kinds = {inv: _kinds(gw, inv) for inv in ids}
            admitted = [inv for inv, k in kinds.items() if "KueueAdmitted" in k]
            waiting = [inv for inv, k in kinds.items() if "KueueQueued" in k and "KueueAdmitted" not in k]
            return (
                {"admitted": admitted, "waiting": waiting}
                if len(admitted) == 3 and len(waiting) == 2
                else None
            )

        split = wait_for(three_admitted, 90, "three admitted by Kueue and two waiting")
        waiting = [status(gw, inv) for inv in split["waiting"]]
        assert {w["state"] for w in waiting} == {"pending"}
        assert sorted(w["queue_position"] for w in waiting) == [1, 2], waiting
        for w in waiting:
            said = next(n["message"] for n in w["notes"] if n["kind"] == "KueueQueued")
            assert said.startswith("Kueue: waiting in LocalQueue eops:"), said
            assert "quota" in said, said
            assert w["queue_reason"] == said
        wait_all_ended(gw, ids, 240, cluster, ns)
        assert Counter(status(gw, inv)["state"] for inv in ids) == Counter(succeeded=5)
        for inv in split["waiting"]:
            kinds = _kinds(gw, inv)
            assert kinds.index("KueueQueued") < kinds.index("KueueAdmitted"), kinds
    assert set(counter.most.values()) == {1}, "one Job per invocation"


def test_a_high_priority_invocation_preempts_a_low_one_through_kueue_which_is_retried(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ns = dev_namespace
    budget = "nvidia-tesla-t4=1"
    with (
        cluster.api() as api,
        kueue_queues(api, ns, budget),
        k8s_gateway(cluster, ns, tmp_path, env=KUEUE_ADMISSION) as gw,
    ):
        deploy(gw, name="batch", priority="low", retries=1, annotations=runs(15))
        deploy(gw, name="urgent", priority="high", annotations=runs(5))
        low = invoke(gw, "batch")
        wait_for(lambda: "KueueAdmitted" in _kinds(gw, low), 90, "the low one admitted")
        high = invoke(gw, "urgent")

        def requeued() -> dict[str, Any] | None:
            now = status(gw, low)
            return now if now["attempt"] == 1 else None

        now = wait_for(requeued, 90, "the low one preempted by Kueue and requeued")
        preempted = [n for n in now["notes"] if n["kind"] == "PreemptedOutside"]
        assert preempted, now["notes"]
        assert preempted[0]["message"].startswith("Kueue preempted it"), preempted
        assert "requeued as attempt 1 (retry 1 of 1)" in preempted[0]["message"]
        wait_all_ended(gw, [low, high], 240, cluster, ns)
        assert status(gw, high)["state"] == "succeeded"
        assert status(gw, low)["state"] == "succeeded"
        names = sorted(j["metadata"]["name"] for j in jobs_of(cluster, ns, low))
        assert names == [job_name(low, 1)], "the preempted attempt's Job was deleted, not run again"


def test_a_job_kueue_admits_lands_on_a_warm_node(cluster: Any, dev_namespace: str, tmp_path: Path) -> None:
    """Warm capacity is the gateway's, outside Kueue's quota: a placeholder holds a T4 node, and
    the Job Kueue admits takes it (no wait for a 30 s boot)."""
    ns = dev_namespace
    budget = "nvidia-tesla-t4=1"
    env = {**KUEUE_ADMISSION, "EOPS_HEADROOM": "warm:1", "EOPS_HEADROOM_SYNC": "2"}
    warm = f"{COMPONENT_LABEL}={WARM_COMPONENT}"

    def placeholder_running() -> bool:
        with cluster.api() as api:
            pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": warm})
        return any((p.get("status") or {}).get("phase") == "Running" for p in pods)

    with (
        cluster.knobs(provision_delay="fixed:30", driver_delay="fixed:0"),
        cluster.api() as api,
        kueue_queues(api, ns, budget),
        k8s_gateway(cluster, ns, tmp_path, env=env) as gw,
    ):
        deploy(gw, name="render", annotations=runs(5))
        wait_for(placeholder_running, 240, "a warm placeholder running")
        time.sleep(3)  # requests come to warm capacity, not at the second it turns ready
        inv = invoke(gw, "render")
        wait_all_ended(gw, [inv], 120, cluster, ns)
        done = status(gw, inv)
        assert done["state"] == "succeeded", done
        kinds = [n["kind"] for n in done["notes"]]
        assert "KueueAdmitted" in kinds, kinds
        assert "WarmUnits" in kinds, kinds
        timeline = done["timeline"]
        waited = datetime.fromisoformat(timeline["started"]) - datetime.fromisoformat(timeline["accepted"])
        assert waited.total_seconds() < 20, timeline


def test_a_gateway_killed_while_kueue_holds_its_jobs_loses_and_doubles_nothing(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """Killed (no shutdown) with one invocation running and two waiting in Kueue's queue, then
    started again on the same data dir: all three end once, one Job each, and the timeline
    keeps each Kueue step once though the new gateway's watch tells every Workload again."""
    ns = dev_namespace
    budget = "nvidia-tesla-t4=1"
    with cluster.api() as api, kueue_queues(api, ns, budget), JobCounter(cluster, ns) as counter:
        gw = start_k8s_gateway(cluster, ns, tmp_path, env=KUEUE_ADMISSION)
        try:
            deploy(gw, name="render", annotations=runs(8))
            ids = [invoke(gw, "render") for _ in range(3)]
            wait_for(
                lambda: sum("KueueQueued" in _kinds(gw, inv) for inv in ids) >= 2,
                90,
                "two invocations waiting in Kueue",
            )
            gw.kill()
            gw = gw.again()
            wait_all_ended(gw, ids, 240, cluster, ns)
            assert Counter(status(gw, inv)["state"] for inv in ids) == Counter(succeeded=3)
            admitted = [_kinds(gw, inv).count("KueueAdmitted") for inv in ids]
            # Once at most, though the new gateway's watch tells every Workload again; the one
            # running at the kill keeps its note. A queued one that Kueue admitted and ran whole
            # while no gateway watched (a slow restart under load: seen in a CI rehearsal) has
            # no admission left to tell, only its end.
            assert max(admitted) == 1, [_kinds(gw, inv) for inv in ids]
        finally:
            gw.stop()
    assert set(counter.most.values()) == {1}, "one Job per invocation"


def test_capacity_provisioned_all_or_nothing_is_named_step_by_step(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """DWS-style: quota reserved, then the ProvisioningRequest admission check waits while
    upstream's autoscaler provisions the capacity (best-effort-atomic-scale-up), turns Ready,
    and Kueue admits; each step a note of the invocation's timeline, in that order."""
    ns = dev_namespace
    budget = "nvidia-tesla-t4=1"
    provisioning = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    with (
        cluster.api() as api,
        kueue_queues(api, ns, budget, provisioning),
        k8s_gateway(cluster, ns, tmp_path, env=KUEUE_ADMISSION) as gw,
    ):
        deploy(gw, name="render", annotations=runs(3))
        inv = invoke(gw, "render")
        wait_all_ended(gw, [inv], 240, cluster, ns)
        done = status(gw, inv)
        assert done["state"] == "succeeded", done
        notes = [(n["kind"], n["message"]) for n in done["notes"] if n["kind"].startswith("Kueue")]
        kinds = [kind for kind, _ in notes]
        assert kinds.index("KueueQuotaReserved") < kinds.index("KueueAdmitted"), notes
        checks = [message for kind, message in notes if kind == "KueueAdmissionCheck"]
        assert checks, notes
        assert all(m.startswith("Kueue: admission check eops-provisioning ") for m in checks), checks
        assert "Ready" in checks[-1], checks
        assert kinds.index("KueueAdmissionCheck") < kinds.index("KueueAdmitted"), notes


def test_a_leader_killed_while_kueue_holds_its_jobs_is_followed_by_one_that_doubles_nothing(
    cluster: Any, dev_namespace: str, own_postgres: PgCluster, tmp_path: Path
) -> None:
    """Two replicas on one PostgreSQL with Kueue admission: the leader is killed with one
    invocation running and two waiting in Kueue; the follower takes over, follows Kueue's
    Workloads, and all three end once, one Job each."""
    ns = dev_namespace
    budget = "nvidia-tesla-t4=1"
    database = create_database(own_postgres, "eops_kueue_replicas")
    replicas = [
        start_replica(cluster, ns, tmp_path / name, database, name, **KUEUE_ADMISSION) for name in ("a", "b")
    ]
    try:
        with cluster.api() as api, kueue_queues(api, ns, budget), JobCounter(cluster, ns) as counter:
            leader = wait_for(lambda: leading(replicas), 30, "a leader")
            follower = next(r for r in replicas if r is not leader)
            deploy(follower, name="render", annotations=runs(8))
            ids = [invoke(follower, "render") for _ in range(3)]
            wait_for(
                lambda: sum("KueueQueued" in _kinds(follower, inv) for inv in ids) >= 2,
                90,
                "two invocations waiting in Kueue",
            )
            leader.kill()
            wait_for(lambda: leading([follower]), 30, "the follower leading")
            wait_all_ended(follower, ids, 240, cluster, ns)
            assert Counter(status(follower, inv)["state"] for inv in ids) == Counter(succeeded=3)
            assert all(status(follower, inv)["attempt"] == 0 for inv in ids)
        assert set(counter.most.values()) == {1}, "one Job per invocation"
    finally:
        for replica in replicas:
            replica.stop()


CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
PROVISIONING_TIMEOUT_S = 15  # the gateway's; far below how long the held one is watched


def _static_pool_only(cluster: Any) -> None:
    """Until no autoscaled T4 node is left (empty ones deleted as they empty) and no earlier
    ProvisioningRequest books capacity: an earlier test's node whose pods are still going would
    turn free mid-test and take what should find none."""

    def settled() -> bool:
        remove_empty_autoscaled_nodes(cluster)
        with cluster.api() as api:
            nodes, _ = api.list(
                "/api/v1/nodes",
                {"labelSelector": f"{ROLE_LABEL}={ROLE_AUTOSCALED},{ACCELERATOR_LABEL}=nvidia-tesla-t4"},
            )
        return not nodes

    wait_for(settled, 120, "only the static pool's T4 nodes")

    def unbooked() -> bool:
        # A Provisioned request keeps its capacity booked in the autoscaler's simulation for 10
        # minutes wherever its pod ran (processors/provreq/processor.go): an earlier test's would
        # make a free node look taken, and every new request scale up beside it.
        with cluster.api() as api:
            requests, _ = api.list("/apis/autoscaling.x-k8s.io/v1/provisioningrequests")
        return not requests

    wait_for(unbooked, 120, "no ProvisioningRequest left by an earlier test")


def _free_t4_nodes(cluster: Any, booting_too: bool = False) -> int:
    """Ready T4 nodes no live pod asking for a GPU is bound to; `booting_too`: and those the
    autoscaler made that are not Ready yet (a pod may be put on them once they are)."""
    with cluster.api() as api:
        nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ACCELERATOR_LABEL}=nvidia-tesla-t4"})
        pods, _ = api.list("/api/v1/pods", {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"})
    busy = {
        (p.get("spec") or {}).get("nodeName")
        for p in pods
        if any(
            GPU_RESOURCE in ((c.get("resources") or {}).get("requests") or {})
            for c in (p.get("spec") or {}).get("containers") or []
        )
    }
    return sum(
        1
        for n in nodes
        if (booting_too or node_ready(n))
        and not (n.get("spec") or {}).get("unschedulable")
        and not n["metadata"].get("deletionTimestamp")
        and n["metadata"]["name"] not in busy
    )


def _provisioning_requests(cluster: Any, ns: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each ProvisioningRequest of the namespace and its conditions (what a failure shows)."""
    with cluster.api() as api:
        found, _ = api.list(f"/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/provisioningrequests")
    return [
        (
            pr["metadata"]["name"],
            [
                (c["type"], c["status"], c.get("message", ""))
                for c in (pr.get("status") or {}).get("conditions") or []
            ],
        )
        for pr in found
    ]


def test_check_capacity_admits_on_a_free_node_and_holds_one_when_none_is_free(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """`check-capacity.autoscaling.x-k8s.io`: upstream's autoscaler admits what fits on the nodes
    there now and never adds one. With one invocation more than free T4 nodes (quota for all of
    them), those that fit are admitted ("Capacity is found in the cluster") and run; the last is
    held by Kueue with the ProvisioningRequest's own message ("Capacity is not found, CA will
    try to find it later."), in its timeline and its `kueue` phase, and the gateway leaves it
    pending past its provisioning timeout (which counts from Kueue's admission) until cancelled."""
    ns = dev_namespace
    _static_pool_only(cluster)  # a count of free nodes that holds
    assert _free_t4_nodes(cluster) >= 1, "the kueue lane's cluster has its static T4 pool"
    # One free node, not several: a request found keeps its capacity booked in the autoscaler's
    # simulation for ten minutes on a node beside the one its pod took (bookCapacity), so with two
    # free the second is found or not as the autoscaler's loop and the first's binding race.
    free = 1
    env = {**KUEUE_ADMISSION, "EOPS_KUBE_PROVISIONING_TIMEOUT_SECONDS": str(PROVISIONING_TIMEOUT_S)}
    with (
        cluster.api() as api,
        kueue_queues(api, ns, f"nvidia-tesla-t4={free + 1}", CHECK_CAPACITY),
        k8s_gateway(cluster, ns, tmp_path, env=env) as gw,
    ):
        _hold_t4_nodes(cluster, api, ns, leave=free)
        deploy(gw, name="render", annotations=runs(5))
        ids = [invoke(gw, "render") for _ in range(free + 1)]

        def checked(inv: str) -> list[str]:
            return [n["message"] for n in status(gw, inv)["notes"] if n["kind"] == "KueueAdmissionCheck"]

        seen: dict[str, list[str]] = {}

        def decided() -> dict[str, list[str]] | None:
            said = {inv: checked(inv) for inv in ids}
            seen.update(said)
            # A request may be "not found" for a loop and found in the next (the autoscaler's
            # view of a node freed a moment ago lags): what counts is each one's latest word.
            found = [inv for inv, m in said.items() if any("Ready: Capacity is found" in x for x in m)]
            held = [inv for inv, m in said.items() if m and "Capacity is not found" in m[-1]]
            return {"found": found, "held": held} if len(found) == free and len(held) == 1 else None

        try:
            split = wait_for(decided, 120, f"{free} found capacity and one held by its ProvisioningRequest")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; notes: {seen}; {_provisioning_requests(cluster, ns)}") from None
        [held] = split["held"]
        assert checked(held)[-1] == (
            "Kueue: admission check eops-provisioning Pending: "
            "Capacity is not found, CA will try to find it later."
        ), checked(held)
        wait_all_ended(gw, split["found"], 120, cluster, ns)
        for inv in split["found"]:
            done = status(gw, inv)
            assert done["state"] == "succeeded", done
            phases = [p["name"] for p in done["timeline"]["phases"]]
            assert phases == ["queue", "kueue", "capacity", "start", "run"], done["timeline"]

        # Kueue holds it, not the gateway: past the provisioning timeout it is pending still,
        # with no pod, its time in the `kueue` phase.
        dispatched = datetime.fromisoformat(status(gw, held)["timeline"]["dispatched"])
        while (datetime.now(dispatched.tzinfo) - dispatched).total_seconds() < PROVISIONING_TIMEOUT_S + 5:
            time.sleep(1)
        now = status(gw, held)
        assert now["state"] == "pending", (now["failure_reason"], now["message"], now["notes"])
        assert "KueueAdmitted" not in [n["kind"] for n in now["notes"]], now["notes"]
        assert [(p["name"], p["end"]) for p in now["timeline"]["phases"]][-1] == ("kueue", None)
        assert pods_of(cluster, ns, held) == []
        answer = httpx.post(f"{gw.url}/v1/invocations/{held}/cancel", headers=gw.auth, timeout=30)
        assert answer.status_code in (200, 202), answer.text
        assert wait_state(gw, held, {"cancelled"}, 60)["state"] == "cancelled"


BEST_EFFORT = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
PRIORITY_EXPANDER = "cluster-autoscaler-priority-expander"  # upstream's ConfigMap name
STRANDED_TIMEOUT_S = 40


def _stocked_out_nodes(cluster: Any, group: str) -> set[str]:
    """The nodes of `group` the simulated cloud failed for a stockout (its Events, one per node:
    upstream's own ScaleUpFailed Events share one object, and client-go's spam filter drops them
    after a busy lane)."""
    with cluster.api() as api:
        events, _ = api.list(
            "/api/v1/namespaces/default/events", {"fieldSelector": f"reason={STOCKOUT_REASON}"}
        )
    return {
        str((e.get("involvedObject") or {}).get("name"))
        for e in events
        if str((e.get("involvedObject") or {}).get("name") or "").startswith(f"{group}-")
    }


def test_a_stocked_out_zone_never_fails_a_best_effort_provisioning_request(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    """What upstream does (docs/kueue.md, "A stocked-out zone"), pinned so that a change shows:
    with every free T4 node taken and the autoscaler preferring a stocked-out zone, the
    ProvisioningRequest is `Provisioned` as soon as the scale-up is asked for, Kueue admits the
    Job, the instance fails (the cloud's stockout) and the request never says so; the pod, which names
    the request, is left out of the autoscaler's ordinary scale-up and gets no node in another
    zone, and the gateway fails it `no_capacity` at its provisioning timeout, counted from
    Kueue's admission."""
    ns = dev_namespace
    stocked = ZONES[0]
    group = t4_group(stocked)
    _static_pool_only(cluster)
    priorities: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": PRIORITY_EXPANDER},
        "data": {"priorities": f"20:\n- {group}\n10:\n- .*\n"},
    }
    env = {**KUEUE_ADMISSION, "EOPS_KUBE_PROVISIONING_TIMEOUT_SECONDS": str(STRANDED_TIMEOUT_S)}
    with (
        cluster.api() as api,
        kueue_queues(api, ns, "nvidia-tesla-t4=1", BEST_EFFORT),
        k8s_gateway(cluster, ns, tmp_path, env=env) as gw,
    ):
        _hold_t4_nodes(cluster, api, ns, leave=0)  # every T4 node taken first
        with cluster.knobs(stockout_zones=(f"{stocked}/nvidia-tesla-t4",)):
            api.create("/api/v1/namespaces/kube-system/configmaps", priorities)
            time.sleep(2)  # the autoscaler reads it through its informer
            try:
                _strands(cluster, gw, ns, group)
            finally:
                api.delete(f"/api/v1/namespaces/kube-system/configmaps/{PRIORITY_EXPANDER}")


def _hold_t4_nodes(cluster: Any, api: Any, ns: str, leave: int) -> None:
    """Every T4 node but `leave` taken by plain high-priority Jobs outside Kueue: through Kueue each
    holder's request would stay booked in the autoscaler's simulation on a node beside the one its
    pod took (processors/provreq/processor.go bookCapacity), and each next one scale up."""
    holders = 0
    settled = 0
    while settled < 2:  # `leave` free at two looks, three autoscaler loops apart
        if _free_t4_nodes(cluster, booting_too=True) <= leave:
            settled += 1
            time.sleep(6)
            continue
        settled = 0
        assert holders < 6, "T4 nodes kept turning free"
        name = f"hold-{holders}"
        job = queued_job(name, "none", run_seconds=600)
        del job["metadata"]["labels"]  # no LocalQueue: Kueue leaves it alone
        # Above the invocation's priority, else the scheduler preempts a holder for it.
        job["spec"]["template"]["spec"]["priorityClassName"] = "eops-high"
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job)
        holders += 1
        wait_for(functools.partial(_job_running, api, ns, name), 120, f"{name} running")


def _job_running(api: Any, ns: str, job: str) -> bool:
    pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods", {"labelSelector": f"job-name={job}"})
    return any((p.get("status") or {}).get("phase") == "Running" for p in pods)


def _strands(cluster: Any, gw: RunningServer, ns: str, group: str) -> None:
    """One invocation through the best-effort check while `group` is stocked out and preferred."""
    stocked_before = _stocked_out_nodes(cluster, group)
    deploy(gw, name="render", annotations=runs(3))
    inv = invoke(gw, "render")
    wait_for(lambda: "KueueAdmitted" in _kinds(gw, inv), 120, "Kueue admitting it on the ask")
    checks = [n["message"] for n in status(gw, inv)["notes"] if n["kind"] == "KueueAdmissionCheck"]
    assert checks[-1] == "Kueue: admission check eops-provisioning Ready: Capacity is found in the cluster", (
        checks
    )
    try:
        wait_for(lambda: _stocked_out_nodes(cluster, group) - stocked_before, 60, f"a stockout in {group}")
    except AssertionError as exc:
        now = status(gw, inv)
        said = [(n["kind"], n["message"][:120]) for n in now["notes"]]
        raise AssertionError(f"{exc}; it is {now['state']} on {now['node']}: {said}") from None
    # The request still says Provisioned, and nothing failed: one, never retried.
    [request] = [conds for name, conds in _provisioning_requests(cluster, ns) if inv in name]
    assert ("Provisioned", "True", "Capacity is found in the cluster") in request, request
    assert all(kind != "Failed" for kind, _, _ in request), request
    done = wait_state(gw, inv, {"failed"}, STRANDED_TIMEOUT_S + 60)
    assert done["failure_reason"] == "no_capacity", done
    assert done["message"].startswith(
        f"no GPU node within the provisioning timeout of {STRANDED_TIMEOUT_S} s"
    ), done
    assert done["node"] is None, done
    assert done["timeline"]["capacity_ready"] is None, done
    assert [p["name"] for p in done["timeline"]["phases"]] == ["queue", "kueue", "capacity"]
    kinds = _kinds(gw, inv)
    assert kinds.count("KueueAdmitted") == 1, kinds  # admitted once, never retried
    assert "KueueEvicted" not in kinds, kinds
