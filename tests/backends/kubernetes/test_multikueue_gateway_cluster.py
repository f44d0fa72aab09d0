"""`eops serve --admission kueue --kube-workers ...` on a MultiKueue manager (the set of
`eops dev-cluster up --multikueue`, the real Kueue v0.17.0): the gateway submits to the manager
only, MultiKueue runs each Job in a worker, and the gateway still follows every invocation to its
end there: the worker that ran it (timeline, record, cost), the payload Secret MultiKueue does
not copy (put in that worker, owned by its Job), the pod's progress and logs, and cancel."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from elasticityops.backends.kubernetes.manifests import PAYLOAD_KEY, job_name
from elasticityops.devcluster.cluster_set import ClusterSet
from elasticityops.devcluster.stages import SIMULATED_OUTPUT
from elasticityops.domain.errors import NotFound
from elasticityops.domain.kueue_notes import DISPATCHED, IN_WORKER
from helpers.kueue import wait_for
from helpers.multikueue import gateway_env, hold_queue
from helpers.server import RunningServer

from .cluster_support import deploy, invoke, pods_of, runs, start_k8s_gateway, status, wait_state

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("multikueue")]

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
NS = "default"  # where the set's LocalQueue `eops` is, on the manager and every worker


@pytest.fixture(scope="module")
def gateway(multikueue_set: ClusterSet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    # Each worker through the identity `eops render worker-rbac` makes (a ServiceAccount's token,
    # its Role's rights and no more), as docs/multi-cluster.md sets it up: every test below is
    # also the proof that those rights suffice on a real API server with RBAC on.
    env = gateway_env(multikueue_set, NS, tmp_path_factory.mktemp("workers"))
    server = start_k8s_gateway(multikueue_set.manager, NS, tmp_path_factory.mktemp("gw"), env=env)
    try:
        yield server
    finally:
        server.stop()


def _worker_object(clusters: ClusterSet, worker: str, path: str) -> dict[str, Any] | None:
    with clusters.cluster(worker).api() as api:
        try:
            return api.get(path)
        except NotFound:
            return None


def test_an_invocation_runs_in_a_worker_and_the_gateway_follows_it_to_its_end(
    multikueue_set: ClusterSet, gateway: RunningServer
) -> None:
    # Long enough that what only exists while it runs (its GPU in use, MultiKueue's copy of the
    # Job in the worker) is still there to read on a loaded machine: with 8 s, a CI rehearsal at
    # load 13 read the capacity after the run had ended.
    deploy(gateway, name="far", annotations=runs(30))
    payload = {"region": "anywhere", "n": 7}
    inv = invoke(gateway, "far", payload)
    running = wait_state(gateway, inv, {"running"}, timeout=150)
    worker = running["cluster"]
    assert worker in multikueue_set.record.worker_names, running
    assert running["node"], "the worker's pod told the gateway its node"
    # The capacity page splits the GPUs in use by the worker that runs them.
    capacity = httpx.get(f"{gateway.url}/v1/capacity", headers=gateway.auth, timeout=30).json()
    assert capacity["in_use_by_cluster"] == {worker: {"nvidia-tesla-t4": 1}}, capacity
    # ...and the GPU nodes by state, each worker's watched there through the gateway's own
    # least-privilege identity: the node its pod runs on is one of its worker's, in use.
    by_cluster = capacity["nodes_by_cluster"]
    assert sorted(by_cluster) == sorted(multikueue_set.record.worker_names), capacity
    assert by_cluster[worker]["ready"] >= 1, capacity
    assert capacity["nodes"] == {
        state: sum(counts[state] for counts in by_cluster.values()) for state in capacity["nodes"]
    }, "the manager has no GPU nodes: the total is the workers'"

    # The payload Secret is in the worker, owned by MultiKueue's copy of the Job.
    name = job_name(inv)
    worker_job = _worker_object(multikueue_set, worker, f"/apis/batch/v1/namespaces/{NS}/jobs/{name}")
    assert worker_job is not None
    secret = _worker_object(multikueue_set, worker, f"/api/v1/namespaces/{NS}/secrets/{name}")
    assert secret is not None, "the pod's payload Secret in the worker that runs it"
    assert [o["uid"] for o in secret["metadata"]["ownerReferences"]] == [worker_job["metadata"]["uid"]]
    assert json.loads(base64.b64decode(secret["data"][PAYLOAD_KEY])) == payload

    def dispatched() -> list[str]:
        return [n["message"] for n in status(gateway, inv)["notes"] if n["kind"] == DISPATCHED]

    # The worker's pod and the manager's Workload are two watches, either of which the gateway
    # may hear first: the pod can say "running" (naming its worker) a moment before the note of
    # MultiKueue's dispatch is written, so the note is waited for, not read at that instant.
    wait_for(dispatched, 30, "the note of MultiKueue's dispatch")
    assert dispatched() == [f"Kueue: MultiKueue runs it in cluster {worker}"], status(gateway, inv)["notes"]
    logs = httpx.get(f"{gateway.url}/v1/invocations/{inv}/logs", headers=gateway.auth, timeout=30)
    assert (logs.status_code, logs.text) == (200, "".join(f"{line}\n" for line in SIMULATED_OUTPUT))

    done = wait_state(gateway, inv, {"succeeded", "failed"}, timeout=120)
    assert (done["state"], done["exit_code"], done["cluster"]) == ("succeeded", 0, worker)
    # MultiKueue deletes the worker's copy as the work ends, and the pod goes with it once the
    # gateway has kept its log and taken its finalizer off: the log is still there to read.
    wait_for(
        lambda: _worker_object(multikueue_set, worker, f"/apis/batch/v1/namespaces/{NS}/jobs/{name}") is None,
        90,
        "MultiKueue to delete the worker's copy of the Job",
    )
    wait_for(
        lambda: not pods_of(multikueue_set.cluster(worker), NS, inv), 90, "the worker's pod to be let go"
    )
    logs = httpx.get(f"{gateway.url}/v1/invocations/{inv}/logs", headers=gateway.auth, timeout=30)
    assert (logs.status_code, logs.text) == (200, "".join(f"{line}\n" for line in SIMULATED_OUTPUT))
    cost = httpx.get(
        f"{gateway.url}/v1/cost", params={"since": "1h", "by": "cluster"}, headers=gateway.auth, timeout=30
    ).json()
    by_cluster = {g["cluster"]: g["total_node_seconds"] for g in cost["groups"]}
    assert by_cluster.get(worker, 0) > 0, cost


def test_a_cancel_takes_the_work_out_of_its_worker(
    multikueue_set: ClusterSet, gateway: RunningServer
) -> None:
    deploy(gateway, name="long", annotations=runs(300))
    inv = invoke(gateway, "long")
    worker = wait_state(gateway, inv, {"running"}, timeout=150)["cluster"]
    name = job_name(inv)
    assert _worker_object(multikueue_set, worker, f"/apis/batch/v1/namespaces/{NS}/jobs/{name}") is not None
    answer = httpx.post(f"{gateway.url}/v1/invocations/{inv}/cancel", headers=gateway.auth, timeout=30)
    assert answer.status_code == 200, answer.text
    assert status(gateway, inv)["state"] == "cancelled"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if _worker_object(multikueue_set, worker, f"/apis/batch/v1/namespaces/{NS}/jobs/{name}") is None:
            break
        time.sleep(1)
    assert _worker_object(multikueue_set, worker, f"/apis/batch/v1/namespaces/{NS}/jobs/{name}") is None, (
        "MultiKueue removes the worker's copy once the manager's Job is gone"
    )


def test_why_the_work_went_where_it_did_is_in_its_timeline(
    multikueue_set: ClusterSet, gateway: RunningServer
) -> None:
    """Each worker's Kueue says why it did not take the work (its copy of the Workload, which
    MultiKueue deletes once another worker has it): the timeline keeps it, naming the worker."""
    deploy(gateway, name="placed", annotations=runs(2))
    workers = multikueue_set.record.worker_names
    try:
        for worker in workers:
            hold_queue(multikueue_set, worker, True)
        inv = invoke(gateway, "placed")
        waiting = {
            f"{w}: Kueue: waiting in LocalQueue eops: Inadmissible: ClusterQueue eops is inactive"
            for w in workers
        }

        def told() -> set[str]:
            return {n["message"] for n in status(gateway, inv)["notes"] if n["kind"] == IN_WORKER}

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not waiting <= told():
            time.sleep(0.5)
        assert waiting <= told(), told()
        hold_queue(multikueue_set, "worker-2", False)
        done = wait_state(gateway, inv, {"succeeded", "failed"}, timeout=120)
    finally:
        for worker in workers:
            hold_queue(multikueue_set, worker, False)
    assert (done["state"], done["cluster"]) == ("succeeded", "worker-2")
    kinds = [n["kind"] for n in done["notes"]]
    assert kinds.index(IN_WORKER) < kinds.index(DISPATCHED), "why it waited, then where it went"
