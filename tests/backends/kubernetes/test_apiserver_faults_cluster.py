"""Faults from the real kube-apiserver of the dev cluster under a burst (issue 16, faults
survived), each with a gateway of its own and at least 50 invocations: the server throttling the
gateway with 429s (API Priority and Fairness), its watches ended by the server and answered 410
Gone (etcd compacted under them), and 5xx answers while etcd is away. Each time every invocation
ends once (succeeded), none ever had two Jobs, one Job each is left, and the gateway's /metrics
count the faults it met, so a test that met none fails.

The session's API server (devcluster/pytest_plugin.py FAULTY_SERVER) serves Job watches from
etcd, compacts it every 10 s and gives a request 10 s; the rest is upstream's."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION
from elasticityops.domain.errors import NotFound
from helpers.server import RunningServer

from .cluster_support import (
    JobCounter,
    burst_ends_once,
    client_metric,
    deploy,
    ensure_priority_classes,
    invoke,
    k8s_gateway,
    start_k8s_gateway,
    status,
    wait_all_ended,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("faults")]

COUNT = 50
RUN = {RUN_SECONDS_ANNOTATION: "2", EXIT_CODE_ANNOTATION: "0"}
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
SERVICE_ACCOUNT = "eops-gateway"


def _burst(server: RunningServer, count: int = COUNT, run: dict[str, str] = RUN) -> list[str]:
    deploy(server, name="work", max_concurrency=COUNT, annotations=run)
    return [invoke(server, "work", {"i": i}) for i in range(count)]


def _admitted(server: RunningServer, ids: list[str], share: int, timeout: float = 60) -> None:
    """Until at least `share` of `ids` have left the queue: the burst is in flight."""
    deadline = time.monotonic() + timeout
    while sum(status(server, i)["state"] != "queued" for i in ids[: share * 2]) < share:
        assert time.monotonic() < deadline, "nothing was admitted"
        time.sleep(0.2)


# --- 429: API Priority and Fairness ------------------------------------------------------------


def _service_account_kubeconfig(dev_cluster: Any, namespace: str, path: Path) -> None:
    """A kubeconfig that is the gateway's service account (cluster-admin, for the test), not the
    cluster's admin (system:masters is exempt from priority and fairness)."""
    with dev_cluster.api() as api:
        api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT}},
        )
        api.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"eops-faults-{namespace}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}],
            },
        )
        token = api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{SERVICE_ACCOUNT}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )["status"]["token"]
    ca = base64.b64encode(dev_cluster.credentials.ca_cert.read_bytes()).decode()
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "dev", "cluster": {"server": dev_cluster.server, "certificate-authority-data": ca}}
        ],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": SERVICE_ACCOUNT}}],
        "current-context": "dev",
    }
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)


def _priority_levels(dev_cluster: Any) -> dict[str, dict[str, str]]:
    """The API server's own account of each priority level (its APF debug dump)."""
    text = dev_cluster.kubectl("get", "--raw", "/debug/api_priority_and_fairness/dump_priority_levels").stdout
    rows = [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line.strip()]
    head, *body = rows
    return {row[0]: dict(zip(head, row, strict=False)) for row in body}


@contextlib.contextmanager
def _throttled(dev_cluster: Any, namespace: str) -> Iterator[str]:
    """A priority level with one seat's worth of concurrency and a queue of 10, and a FlowSchema
    that puts the gateway's service account in it; both deleted afterwards (other tests' clients
    are the admin, exempt anyway). Yields the level's name."""
    name = f"eops-faults-{namespace}"
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 10},
                },
            },
        },
    }
    everything = {
        "verbs": ["*"],
        "apiGroups": ["*"],
        "resources": ["*"],
        "namespaces": ["*"],
        "clusterScope": True,
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 100,  # before service-accounts (9000) and global-default (9900)
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {
                            "kind": "ServiceAccount",
                            "serviceAccount": {"name": SERVICE_ACCOUNT, "namespace": namespace},
                        }
                    ],
                    "resourceRules": [everything],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    with dev_cluster.api() as api:
        api.create(f"{FLOWCONTROL}/prioritylevelconfigurations", level)
        try:
            api.create(f"{FLOWCONTROL}/flowschemas", schema)
            deadline = time.monotonic() + 30
            while name not in _priority_levels(dev_cluster):  # the server's APF config caught up
                assert time.monotonic() < deadline, "the priority level never took effect"
                time.sleep(0.2)
            yield name
        finally:
            for path in (
                f"{FLOWCONTROL}/flowschemas/{name}",
                f"{FLOWCONTROL}/prioritylevelconfigurations/{name}",
            ):
                with contextlib.suppress(NotFound):
                    api.delete(path)
            with contextlib.suppress(NotFound):
                api.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/eops-faults-{namespace}")


def test_a_burst_the_api_server_throttles_with_429s_loses_and_doubles_nothing(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ensure_priority_classes(dev_cluster)
    kubeconfig = tmp_path / "gateway.kubeconfig"
    _service_account_kubeconfig(dev_cluster, dev_namespace, kubeconfig)
    with _throttled(dev_cluster, dev_namespace) as level:
        # Queued on a paused gateway, then started on the same data dir: the dispatcher admits
        # all 50 in its first cycle and the launch workers create their Jobs at once.
        paused = start_k8s_gateway(
            dev_cluster,
            dev_namespace,
            tmp_path / "gw",
            kubeconfig=kubeconfig,
            env={"EOPS_DISPATCH_PAUSED": "true"},
        )
        try:
            ids = _burst(paused)
        finally:
            paused.stop()
        with (
            k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw", kubeconfig=kubeconfig) as gw,
            JobCounter(dev_cluster, dev_namespace) as counter,
        ):
            wait_all_ended(gw, ids, timeout=240, dev_cluster=dev_cluster, namespace=dev_namespace)
            burst_ends_once(dev_cluster, dev_namespace, gw, ids)
            throttled = client_metric(gw, "eops_kube_api_errors_total", code="429")
            retries = client_metric(gw, "eops_kube_api_retries_total")
            server = _priority_levels(dev_cluster)[level]
        assert max(counter.most.values()) == 1, "an invocation had two Jobs at once"
    refused = int(server["RejectedRequests"]) + int(server["TimedoutRequests"])
    print(f"429s: the gateway met {throttled:g} (retried {retries:g}), the API server refused {refused}")
    assert throttled > 0, "the API server never throttled the gateway: no fault was tested"
    assert throttled <= refused, "every 429 the gateway counted is one the server says it sent"
    assert retries > 0


# --- 410 Gone and watches the server ends -----------------------------------------------------


@contextlib.contextmanager
def _compacting(dev_cluster: Any, every_s: float) -> Iterator[list[int]]:
    """etcd compacted at its current revision every `every_s` seconds meanwhile (what the API
    server's compactor does, sooner): a Job watch resuming from before is answered 410 Gone."""
    done = threading.Event()
    revisions: list[int] = []

    def run() -> None:
        while not done.wait(every_s):
            with contextlib.suppress(Exception):  # a compaction is a nudge, not the test
                revisions.append(dev_cluster.compact_etcd())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield revisions
    finally:
        done.set()
        thread.join(30)


def test_watches_the_server_ends_and_answers_410_gone_lose_and_double_nothing(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ensure_priority_classes(dev_cluster)
    # The server ends every watch of this gateway after 2 s (its timeoutSeconds), so each one
    # resumes dozens of times during the burst, and the Job watch resumes after compactions.
    with k8s_gateway(
        dev_cluster, dev_namespace, tmp_path / "gw", env={"EOPS_KUBE_WATCH_TIMEOUT_SECONDS": "2"}
    ) as gw:
        # Each Job quiet for 10 s while it runs: a Job watch that resumes then finds its
        # resourceVersion compacted away by the compaction of the second before.
        with (
            JobCounter(dev_cluster, dev_namespace) as counter,
            _compacting(dev_cluster, every_s=1.0) as revisions,
        ):
            ids = _burst(gw, run={RUN_SECONDS_ANNOTATION: "10", EXIT_CODE_ANNOTATION: "0"})
            wait_all_ended(gw, ids, timeout=240, dev_cluster=dev_cluster, namespace=dev_namespace)
        burst_ends_once(dev_cluster, dev_namespace, gw, ids)
        assert max(counter.most.values()) == 1, "an invocation had two Jobs at once"
        expired = client_metric(gw, "eops_kube_watch_restarts_total", reason="expired")
        ended = client_metric(gw, "eops_kube_watch_restarts_total", reason="ended")
        gone = client_metric(gw, "eops_kube_api_errors_total", code="410")
    print(f"watches: {ended:g} ended by the server, {expired:g} expired (410), {len(revisions)} compactions")
    assert revisions, "etcd was never compacted"
    assert expired >= 1, "no watch was answered 410 Gone: no fault was tested"
    assert gone >= expired
    assert ended >= 10


# --- 5xx: etcd away ---------------------------------------------------------------------------


def test_a_burst_while_etcd_is_away_and_the_server_answers_5xx_loses_and_doubles_nothing(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ensure_priority_classes(dev_cluster)
    with k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw") as gw:
        with JobCounter(dev_cluster, dev_namespace) as counter:
            ids = _burst(gw, count=COUNT // 2)
            _admitted(gw, ids, COUNT // 8)
            outage: list[float] = []
            restart = threading.Thread(target=lambda: outage.append(dev_cluster.restart_etcd(down_s=6.0)))
            restart.start()
            time.sleep(1.0)
            # Accepted while etcd is away (the gateway's store is its own): their Jobs' creates
            # hang in the API server until it answers 504 (its 10 s), and are tried again.
            ids += [invoke(gw, "work", {"i": i}) for i in range(COUNT // 2, COUNT)]
            restart.join(120)
            wait_all_ended(gw, ids, timeout=240, dev_cluster=dev_cluster, namespace=dev_namespace)
        burst_ends_once(dev_cluster, dev_namespace, gw, ids)
        assert max(counter.most.values()) == 1, "an invocation had two Jobs at once"
        errors = {
            code: client_metric(gw, "eops_kube_api_errors_total", code=code)
            for code in ("500", "503", "504", "connection")
        }
    print(f"etcd away {outage} s; the gateway met {errors}")
    assert errors["500"] + errors["503"] + errors["504"] > 0, "no 5xx answer: no fault was tested"
