"""Two `eops serve --backend kubernetes --leader-elect` replicas on one real PostgreSQL and the
dev cluster: one leads (dispatches), the other follows (serves the API); SIGKILL the leader with
work in flight and the follower takes over within the lease duration, adopts the work, and every
invocation ends once, with one Job each."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION
from elasticityops.ha.settings import JITTER_FACTOR
from helpers.pg_cluster import PgCluster, create_database
from helpers.server import RunningServer

from .cluster_support import (
    REPLICA_LEASE,
    JobCounter,
    deploy,
    ensure_priority_classes,
    invoke,
    jobs_of,
    start_replica,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("faults")]

COUNT = 100  # issue 16: the leader killed during a burst of 100 in the suite (1,000 in the bench)
# the longest a follower waits between two looks
LOOK = float(REPLICA_LEASE["EOPS_LEASE_RETRY_PERIOD"]) * (1 + JITTER_FACTOR)
# expiry on the follower's clock, two looks, a margin; doubled, since on a machine half as fast
# (a CI rehearsal with a busy loop beside it) a follower took 6.9 s against 6.2. Still well under
# the default lease (15 s), which a follower that ignored the short one would wait out.
LEASE_BOUND = 2 * (float(REPLICA_LEASE["EOPS_LEASE_DURATION"]) + 2 * LOOK + 1.0)
LEADING = {"status": "ready", "role": "leader"}


def _ready(server: RunningServer) -> tuple[int, dict[str, Any]]:
    try:
        answer = httpx.get(f"{server.url}/readyz", timeout=2)
    except httpx.TransportError:
        return 0, {}
    return answer.status_code, answer.json()


def _leader_of(replicas: list[RunningServer], timeout: float) -> RunningServer:
    """The one replica whose /readyz says leader (200: its dispatcher runs)."""
    deadline = time.monotonic() + timeout
    while True:
        leading = [
            r
            for r in replicas
            if _ready(r) == (200, {"status": "ready", "role": "leader", "leader": _name(r)})
        ]
        if len(leading) == 1:
            return leading[0]
        assert len(leading) < 2, "two leaders"
        assert time.monotonic() < deadline, (
            [_ready(r) for r in replicas],
            [line for r in replicas for line in r.output().splitlines() if "leader election" in line][-20:],
        )
        time.sleep(0.1)


def _name(server: RunningServer) -> str:
    return server.extra_env["EOPS_LEADER_IDENTITY"]


def _states(server: RunningServer) -> dict[str, dict[str, Any]]:
    with server.client() as client:
        answer = client.get("/v1/invocations", params={"function": "work", "limit": 100})
    assert answer.status_code == 200, answer.text
    return {item["id"]: item for item in answer.json()["items"]}


def _leader_gauge(server: RunningServer) -> str:
    with server.client() as client:
        text = client.get("/metrics").text
    return next(line for line in text.splitlines() if line.startswith("eops_leader "))


def test_the_follower_takes_over_a_killed_leader_and_every_invocation_ends_once(
    dev_cluster: Any, dev_namespace: str, own_postgres: PgCluster, tmp_path: Path
) -> None:
    ensure_priority_classes(dev_cluster)
    database = create_database(own_postgres, "eops_replicas")
    replicas = [
        start_replica(dev_cluster, dev_namespace, tmp_path / "a", database, "gw-a"),
    ]
    try:
        replicas.append(start_replica(dev_cluster, dev_namespace, tmp_path / "b", database, "gw-b"))
        leader = _leader_of(replicas, timeout=15)
        follower = next(r for r in replicas if r is not leader)
        assert _ready(follower) == (200, {"status": "ready", "role": "follower", "leader": _name(leader)})
        assert _leader_gauge(leader) == "eops_leader 1.0"
        assert _leader_gauge(follower) == "eops_leader 0.0"

        # Every replica accepts: the work goes in through the follower, the leader dispatches it.
        deploy(
            follower,
            name="work",
            max_concurrency=COUNT,
            annotations={RUN_SECONDS_ANNOTATION: "3", EXIT_CODE_ANNOTATION: "0"},
        )
        with JobCounter(dev_cluster, dev_namespace) as counter:
            with ThreadPoolExecutor(max_workers=8) as pool:
                ids = list(pool.map(lambda i: invoke(follower, "work", {"i": i}), range(COUNT)))
            deadline = time.monotonic() + 30
            while sum(s["state"] != "queued" for s in _states(follower).values()) < COUNT // 3:
                assert time.monotonic() < deadline, "the leader admits nothing"
                time.sleep(0.1)

            leader.kill()  # SIGKILL by PID: no release, the lease goes silent
            killed = time.monotonic()
            while _leader_gauge(follower) != "eops_leader 1.0":
                assert time.monotonic() - killed < LEASE_BOUND, f"no takeover within {LEASE_BOUND:.1f} s"
                time.sleep(0.1)
            took = time.monotonic() - killed
            # Its dispatcher runs: adoption done. Under CI load a renewal can miss the 2-s renew
            # deadline, and the replica steps down (stopping its dispatcher, up to a 10-s drain)
            # and campaigns again: allowed, and given the time for it.
            _leader_of([follower], timeout=90)
            ready = time.monotonic() - killed
            finals = _wait_all(follower, ids, timeout=150)
        assert all(f["state"] == "succeeded" for f in finals.values()), Counter(
            f["state"] for f in finals.values()
        )
        assert all(f["attempt"] == 0 for f in finals.values())
        assert max(counter.most.values()) == 1, "an invocation had two Jobs at once"
        names = sorted(j["metadata"]["name"] for j in jobs_of(dev_cluster, dev_namespace))
        assert names == sorted(f"eops-{inv}" for inv in ids), "one Job each, none left over"
        print(f"lease taken {took:.1f}s and ready as leader {ready:.1f}s after the SIGKILL")
    finally:
        codes = [replica.stop(timeout=60) for replica in replicas]
    with dev_cluster.api() as api:
        lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{dev_namespace}/leases/elasticityops")
    election = [line for r in replicas for line in r.output().splitlines() if "leader election" in line]
    assert lease["spec"]["holderIdentity"] == "", (
        f"the last leader released the lease on SIGTERM (exit codes {codes}):\n" + "\n".join(election[-10:])
    )


def _wait_all(server: RunningServer, ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        states = _states(server)
        ours = {inv: states[inv] for inv in ids}
        if all(s["state"] in ("succeeded", "failed", "cancelled", "timed_out") for s in ours.values()):
            return ours
        assert time.monotonic() < deadline, (
            Counter(s["state"] for s in ours.values()),
            server.output()[-3000:],
        )
        time.sleep(0.5)
