"""A replica whose clock is 6 s behind (issue 16, faults survived): two `eops serve --backend
kubernetes --leader-elect` replicas on one real PostgreSQL, the leader run under libfaketime
(FAKETIME=-6, its wall clock only; its monotonic clock is the machine's). Leadership stays
single and with the skewed replica, the Lease never changes hands, and a burst of 50 accepted
through both replicas has timelines on one clock: each invocation's acceptance lies between the
moments the test sent its request and got the answer (on the test's clock, the machine's),
admission comes after acceptance, and the start the cluster stamped comes after admission.

Without the shared clock (ha/shared_clock.py) the skewed leader stamps acceptances 6 s early and
its admissions of the other replica's acceptances fall before them (clamped to the acceptance:
no queue time at all)."""

from __future__ import annotations

import glob
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION
from helpers.pg_cluster import PgCluster, create_database
from helpers.server import RunningServer

from .cluster_support import (
    JobCounter,
    burst_ends_once,
    deploy,
    ensure_priority_classes,
    start_replica,
    status,
    wait_all_ended,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("faults")]

COUNT = 50
SKEW_S = -6


def _faketime() -> dict[str, str]:
    """The environment that runs a process 6 s behind: Debian's libfaketime (scripts/test
    installs the `faketime` package)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if not found:
        pytest.fail("libfaketime is missing: apt-get install faketime (scripts/test does)", pytrace=False)
    return {"LD_PRELOAD": found[0], "FAKETIME": str(SKEW_S), "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def _role(server: RunningServer) -> str:
    try:
        return str(httpx.get(f"{server.url}/readyz", timeout=2).json().get("role", ""))
    except (httpx.TransportError, ValueError):
        return ""


class RoleWatch:
    """Both replicas' /readyz every 0.2 s meanwhile: which said leader, each time, and whether
    each said its role at all. No answer in 2 s, or a 503 "not ready" (the store's ping over
    2 s), is no evidence either way; one of the two was seen under a burst in a CI rehearsal."""

    def __init__(self, replicas: dict[str, RunningServer]) -> None:
        self.samples: list[tuple[str, ...]] = []
        self.answered: list[bool] = []  # each sample: did every replica say its role?
        self._replicas = replicas
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            roles = {n: _role(r) for n, r in self._replicas.items()}
            self.samples.append(tuple(n for n, role in roles.items() if role == "leader"))
            self.answered.append("" not in roles.values())

    def __enter__(self) -> RoleWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def _lease(dev_cluster: Any, namespace: str) -> dict[str, Any]:
    with dev_cluster.api() as api:
        spec: dict[str, Any] = api.get(
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/elasticityops"
        )["spec"]
    return spec


def _invoke(server: RunningServer, i: int) -> tuple[str, datetime, datetime]:
    sent = datetime.now(UTC)
    answer = httpx.post(
        f"{server.url}/v1/functions/work/invocations", json={"i": i}, headers=server.auth, timeout=30
    )
    got = datetime.now(UTC)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"]), sent, got


def _at(text: str | None) -> datetime:
    assert text is not None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_leader_with_a_skewed_clock_keeps_leadership_single_and_timelines_on_one_clock(
    dev_cluster: Any, dev_namespace: str, own_postgres: PgCluster, tmp_path: Path
) -> None:
    ensure_priority_classes(dev_cluster)
    database = create_database(own_postgres, "eops_skew")
    # Leadership must never move here, so a lease that a loaded machine's slow renewal does not
    # lose (the suite's short REPLICA_LEASE steps a leader down after 2 s without a renewal).
    steady = {"EOPS_LEASE_DURATION": "15", "EOPS_LEASE_RENEW_DEADLINE": "10", "EOPS_LEASE_RETRY_PERIOD": "1"}
    skewed = start_replica(
        dev_cluster, dev_namespace, tmp_path / "a", database, "gw-skewed", **_faketime(), **steady
    )
    replicas = {"gw-skewed": skewed}
    try:
        deadline = time.monotonic() + 15
        while _role(skewed) != "leader":
            assert time.monotonic() < deadline, skewed.output()[-3000:]
            time.sleep(0.1)
        replicas["gw-true"] = true = start_replica(
            dev_cluster, dev_namespace, tmp_path / "b", database, "gw-true", **steady
        )
        assert _role(true) == "follower"
        before = _lease(dev_cluster, dev_namespace)
        deploy(
            true,
            name="work",
            max_concurrency=COUNT,
            annotations={RUN_SECONDS_ANNOTATION: "2", EXIT_CODE_ANNOTATION: "0"},
        )
        with RoleWatch(replicas) as roles, JobCounter(dev_cluster, dev_namespace) as counter:
            both = [skewed, true]
            with ThreadPoolExecutor(max_workers=8) as pool:
                sent = list(pool.map(lambda i: (i % 2, *_invoke(both[i % 2], i)), range(COUNT)))
            ids = [inv for _, inv, _, _ in sent]
            wait_all_ended(true, ids, timeout=180)
        burst_ends_once(dev_cluster, dev_namespace, true, ids)
        assert max(counter.most.values()) == 1, "an invocation had two Jobs at once"
        after = _lease(dev_cluster, dev_namespace)
        timelines = {inv: status(true, inv)["timeline"] for inv in ids}
    finally:
        for replica in replicas.values():
            replica.stop()

    measured = re.findall(r"this replica's clock is ([-+][0-9.]+) s", skewed.output())
    assert measured, "the skewed replica never said its clock is off: did faketime run?"
    assert float(measured[0]) == pytest.approx(SKEW_S, abs=0.1)
    # Never two leaders; whenever both said their role, the skewed one led; and enough such looks.
    assert all(len(leaders) <= 1 for leaders in roles.samples), Counter(roles.samples)
    full = [leaders for leaders, answered in zip(roles.samples, roles.answered, strict=True) if answered]
    assert Counter(full) == Counter({("gw-skewed",): len(full)}), Counter(roles.samples)
    assert len(full) >= 5, (len(full), len(roles.samples))
    assert after["holderIdentity"] == before["holderIdentity"] == "gw-skewed"
    assert after.get("leaseTransitions", 0) == before.get("leaseTransitions", 0)

    slack = timedelta(milliseconds=100)  # two offsets measured, each to half a round trip
    for replica, inv, sent_at, answered_at in sent:
        line = timelines[inv]
        accepted, dispatched = _at(line["accepted"]), _at(line["dispatched"])
        via = "the skewed leader" if replica == 0 else "the follower"
        assert sent_at - slack <= accepted <= answered_at + slack, (inv, via, sent_at, line)
        assert accepted < dispatched, (inv, via, line)
        # Kubernetes stamps a container's start in whole seconds, on its own (this machine's) clock.
        assert dispatched < _at(line["started"]) + timedelta(seconds=1) + slack, (inv, via, line)
