"""A MultiKueue set on this machine (`eops dev-cluster up --multikueue`): the real Kueue v0.17.0
as a manager dispatches a batch/v1 Job to one of two worker dev clusters, mirrors its status
back, and stops sending work to a worker whose API server is gone until it is back.

The set (a manager and two workers) is the session's (tests/helpers/multikueue.py), shared with
the gateway's tests on it; its lane gives it a worker process to itself in a parallel run."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from cli.runner import Eops
from elasticityops.devcluster.cluster_set import ClusterSet, cluster_states
from helpers.doctor import run_doctor
from helpers.kueue import queued_job, workload_of

from .helpers import job_condition, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("multikueue")]

NS = "default"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"


@pytest.fixture
def clusters(multikueue_set: ClusterSet) -> ClusterSet:
    """The session's set (tests/helpers/multikueue.py), shared with the gateway's tests on it."""
    return multikueue_set


def _eops(clusters: ClusterSet, *args: str) -> Any:
    return Eops(None)("dev-cluster", *args, "--state-dir", str(clusters.root))


def _pods_by_worker(clusters: ClusterSet, job: str) -> dict[str, list[str]]:
    """The nodes the Job's pods were bound to, on each worker that has any."""
    seen: dict[str, list[str]] = {}
    for name in clusters.record.worker_names:
        worker = clusters.cluster(name)
        if not worker.processes_alive().get("kube-apiserver"):
            continue
        with worker.api() as api:
            pods, _ = api.list(f"/api/v1/namespaces/{NS}/pods", {"labelSelector": f"job-name={job}"})
        nodes = [str(p["spec"].get("nodeName")) for p in pods if p["spec"].get("nodeName")]
        if nodes:
            seen[name] = nodes
    return seen


def _run_on_the_manager(clusters: ClusterSet) -> tuple[str, dict[str, list[str]]]:
    """Create a Job on the manager in LocalQueue `eops`, wait until the manager's Job is Complete;
    return the worker its Workload names and where pods were seen running meanwhile."""
    name = f"mk-{secrets.token_hex(3)}"
    ran_on: dict[str, list[str]] = {}
    with clusters.manager.api() as api:
        created = api.create(JOBS, queued_job(name, "eops", run_seconds=4))
        # Kueue's webhook on the manager hands the Job to MultiKueue: its Job controller leaves it.
        assert created["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"

        def complete() -> str | None:
            ran_on.update(_pods_by_worker(clusters, name))
            return job_condition(api, NS, name)

        assert wait_for(complete, timeout=120, interval=0.5, what=f"Job {name} to end") == "Complete"
        job = api.get(f"{JOBS}/{name}")
        assert job["status"].get("succeeded") == 1, "the worker's status, mirrored to the manager's Job"
        workload = workload_of(api, NS, name)
        assert workload is not None
        local_pods, _ = api.list(f"/api/v1/namespaces/{NS}/pods")
        assert local_pods == [], "nothing runs on the manager"
    return str(workload["status"].get("clusterName")), ran_on


def _doctor(clusters: ClusterSet) -> list[dict[str, str]]:
    """`eops doctor --admission kueue` on the manager, as a process: its findings."""
    flags = ("--admission", "kueue", "--kube-local-queue", "eops")
    return run_doctor(clusters.manager.kubeconfig_path, NS, *flags, timeout=120)[1]


def test_a_job_on_the_manager_runs_on_a_worker_that_its_workload_names(clusters: ClusterSet) -> None:
    assert cluster_states(clusters.manager) == {"worker-1": True, "worker-2": True}
    findings = _doctor(clusters)
    [connected] = [f for f in findings if f["check"] == "kueue-multikueue"]
    assert (connected["status"], connected["message"]) == (
        "pass",
        "MultiKueue connected to worker cluster(s) worker-1, worker-2",
    )
    # On a manager the right to mend a stale pod count is reviewed by the real API server.
    [stale] = [f for f in findings if f["check"] == "kueue-stale-jobs"]
    assert stale["status"] == "pass", stale
    worker, ran_on = _run_on_the_manager(clusters)
    assert worker in ("worker-1", "worker-2")
    assert list(ran_on) == [worker], f"pods seen on {ran_on}, the Workload names {worker}"
    with clusters.cluster(worker).api() as api:
        nodes, _ = api.list("/api/v1/nodes")
    assert set(ran_on[worker]) <= {n["metadata"]["name"] for n in nodes}
    # Each worker is a region of its own: the nodes it ran on are there.
    region = {"worker-1": "us-central1", "worker-2": "us-east4"}[worker]
    assert {n["metadata"]["labels"]["topology.kubernetes.io/region"] for n in nodes} == {region}


def test_with_a_worker_stopped_the_next_job_runs_on_the_other(clusters: ClusterSet) -> None:
    stopped = _eops(clusters, "stop", "--cluster", "worker-1")
    assert stopped.code == 0, stopped.output
    try:
        wait_for(
            lambda: cluster_states(clusters.manager).get("worker-1") is False,
            timeout=60,
            interval=1,
            what="worker-1's MultiKueueCluster to turn Active=False",
        )
        status = _eops(clusters, "status")
        assert status.code == 1, "a stopped cluster is a process not running"
        assert "MultiKueue: inactive" in status.stdout
        [lost] = [f for f in _doctor(clusters) if f["check"] == "kueue-multikueue"]
        assert lost["status"] == "fail", lost
        assert "worker cluster worker-1 is not connected" in lost["message"]
        assert "region us-east4" in status.stdout
        worker, ran_on = _run_on_the_manager(clusters)
        assert worker == "worker-2"
        assert list(ran_on) == ["worker-2"]
    finally:
        started = _eops(clusters, "start", "--cluster", "worker-1")
    assert started.code == 0, started.output
    # Kueue retries a lost worker with a back-off doubling from 5 s: seconds to a minute here.
    wait_for(
        lambda: cluster_states(clusters.manager).get("worker-1") is True,
        timeout=180,
        interval=1,
        what="worker-1's MultiKueueCluster to turn Active=True again",
    )
    kubeconfig = _eops(clusters, "kubeconfig", "--cluster", "worker-1")
    assert kubeconfig.code == 0, kubeconfig.output
    assert Path(kubeconfig.stdout.strip()) == clusters.root / "worker-1" / "kubeconfig"


def test_a_workers_zones_stock_out_and_back_live(clusters: ClusterSet) -> None:
    worker = clusters.cluster("worker-2")

    def stocked_out() -> list[str]:
        return list(worker.cloud_status()["settings"]["stockout_zones"])

    wrong = _eops(clusters, "stockout", "--cluster", "worker-2", "--zone", "us-central1-a")
    assert wrong.code == 2, wrong.output
    assert "region us-east4" in wrong.stderr, "worker-2's zones are its region's"
    out = _eops(clusters, "stockout", "--cluster", "worker-2", "--all")
    assert out.code == 0, out.output
    # The running cloud re-reads its knobs every second.
    wait_for(
        lambda: stocked_out() == ["us-east4-a", "us-east4-b", "us-east4-c"], timeout=10, what="the stockout"
    )
    back = _eops(clusters, "stockout", "--cluster", "worker-2", "--all", "--off")
    assert back.code == 0, back.output
    wait_for(lambda: not stocked_out(), timeout=10, what="the zones back")
