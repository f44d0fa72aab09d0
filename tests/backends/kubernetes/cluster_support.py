"""Helpers of the Kubernetes backend's cluster tests: a real `eops serve --backend kubernetes`
against the dev cluster, functions deployed and invoked over HTTP, objects read back from the
API server."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import httpx

from elasticityops.backends.kubernetes.deploy import priority_classes
from elasticityops.backends.kubernetes.labels import INVOCATION_LABEL
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL
from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION
from elasticityops.domain.errors import Conflict, EopsError, NotFound
from helpers.server import RunningServer, start_server

TERMINAL = {"succeeded", "failed", "cancelled", "timed_out"}


def ensure_priority_classes(dev_cluster: Any) -> None:
    """The Jobs name eops-* PriorityClasses; `eops render deploy` creates them in a real cluster."""
    with dev_cluster.api() as api:
        for pc in priority_classes():
            with contextlib.suppress(Conflict):  # created by an earlier test
                api.create("/apis/scheduling.k8s.io/v1/priorityclasses", pc)


@contextmanager
def k8s_gateway(
    dev_cluster: Any,
    namespace: str,
    data_dir: Path,
    port: int | None = None,
    kubeconfig: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[RunningServer]:
    server = start_k8s_gateway(dev_cluster, namespace, data_dir, port, kubeconfig, env)
    try:
        yield server
    finally:
        server.stop()


def start_k8s_gateway(
    dev_cluster: Any,
    namespace: str,
    data_dir: Path,
    port: int | None = None,
    kubeconfig: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> RunningServer:
    """`kubeconfig`: another identity than the cluster's admin (a service account's token);
    `env`: the gateway's settings."""
    return start_server(
        data_dir,
        "--backend",
        "kubernetes",
        "--kubeconfig",
        str(kubeconfig or dev_cluster.kubeconfig_path),
        "--namespace",
        namespace,
        port=port,
        env=env,
    )


# The replicas' lease, short so that a takeover is seen within seconds.
REPLICA_LEASE = {
    "EOPS_LEASE_DURATION": "3",
    "EOPS_LEASE_RENEW_DEADLINE": "2",
    "EOPS_LEASE_RETRY_PERIOD": "0.5",
}


def start_replica(
    dev_cluster: Any, namespace: str, data_dir: Path, database: str, name: str, **env: str
) -> RunningServer:
    """A `--leader-elect` gateway named `name` on the database the replicas share, with the
    short REPLICA_LEASE; `env` on top."""
    replica_env = {
        "EOPS_LEADER_ELECT": "true",
        "EOPS_DATABASE_URL": database,
        "EOPS_LEADER_IDENTITY": name,
        **REPLICA_LEASE,
        **env,
    }
    return start_k8s_gateway(dev_cluster, namespace, data_dir, env=replica_env)


def leading(replicas: list[RunningServer]) -> RunningServer | None:
    """The replica whose /readyz says leader, if any (the first, should two say so)."""
    for replica in replicas:
        try:
            ready = httpx.get(f"{replica.url}/readyz", timeout=2)
        except httpx.TransportError:
            continue
        if ready.status_code == 200 and ready.json().get("role") == "leader":
            return replica
    return None


def deploy(server: RunningServer, **spec: Any) -> None:
    body = {"image": "worker:1", "command": ["python", "worker.py"], **spec}
    answer = httpx.put(
        f"{server.url}/v1/functions/{spec['name']}", json=body, headers=server.auth, timeout=30
    )
    assert answer.status_code in (200, 201), answer.text


def invoke(
    server: RunningServer, function: str, payload: Any = None, annotations: Mapping[str, str] | None = None
) -> str:
    """Invoke over HTTP; `annotations` go as the invocation's own (?annotation=KEY=VALUE)."""
    answer = httpx.post(
        f"{server.url}/v1/functions/{function}/invocations",
        params=[("annotation", f"{key}={value}") for key, value in (annotations or {}).items()],
        json=payload if payload is not None else {"n": 1},
        headers=server.auth,
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    return str(answer.json()["id"])


def status(server: RunningServer, inv: str) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/v1/invocations/{inv}", headers=server.auth, timeout=30)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def wait_state(server: RunningServer, inv: str, states: set[str], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = status(server, inv)
        if current["state"] in states:
            return current
        if current["state"] in TERMINAL or time.monotonic() > deadline:
            raise AssertionError(
                f"{inv} is {current['state']}, expected {states}: {current}\n{server.output()[-3000:]}"
            )
        time.sleep(0.2)


def runs(seconds: float, exit_code: int = 0) -> dict[str, str]:
    """The annotations that make the dev cluster's kwok run a pod this long, ending with this code."""
    return {RUN_SECONDS_ANNOTATION: str(seconds), EXIT_CODE_ANNOTATION: str(exit_code)}


def _ours(dev_cluster: Any, path: str, inv: str | None) -> list[dict[str, Any]]:
    selector = "app.kubernetes.io/managed-by=elasticityops"
    if inv:
        selector += f",{INVOCATION_LABEL}={inv}"
    found: list[dict[str, Any]]
    with dev_cluster.api() as api:
        found, _ = api.list(path, {"labelSelector": selector})
    return found


def jobs_of(dev_cluster: Any, namespace: str, inv: str | None = None) -> list[dict[str, Any]]:
    return _ours(dev_cluster, f"/apis/batch/v1/namespaces/{namespace}/jobs", inv)


def pods_of(dev_cluster: Any, namespace: str, inv: str | None = None) -> list[dict[str, Any]]:
    return _ours(dev_cluster, f"/api/v1/namespaces/{namespace}/pods", inv)


def remove_empty_autoscaled_nodes(dev_cluster: Any) -> int:
    """Delete the autoscaled GPU nodes no pending or running pod is bound to, and return how
    many: a test that needs its pod to wait for a new node must not find a free one, and the
    autoscaler would take minutes to remove what the API-server restart test leaves (the kwok
    provider under it adds nodes past --max-nodes-total while the API server is away: 116-374
    seen after 60 invocations, removed 10 per 10 s loop). The provider counts a group's nodes by
    listing them, so a deleted empty node is simply gone, as a VM deleted from the console."""
    with dev_cluster.api() as api:
        nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_AUTOSCALED}"})
        pods, _ = api.list("/api/v1/pods", {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"})
        busy = {(p.get("spec") or {}).get("nodeName") for p in pods}
        empty = [n["metadata"]["name"] for n in nodes if n["metadata"]["name"] not in busy]
        for name in empty:
            with contextlib.suppress(NotFound):  # the autoscaler removed it meanwhile
                api.delete(f"/api/v1/nodes/{name}")
    return len(empty)


def wait_node_gone(dev_cluster: Any, name: str, timeout: float = 120) -> None:
    """Until the autoscaler has removed node `name` (10 s unneeded in the test session)."""
    deadline = time.monotonic() + timeout
    with dev_cluster.api() as api:
        while True:
            try:
                api.get(f"/api/v1/nodes/{name}")
            except NotFound:
                return
            assert time.monotonic() < deadline, f"{name} was not removed within {timeout:g}s"
            time.sleep(1.0)


class Sampler:
    """A look at the cluster every half second, in a thread of its own, while the API server
    answers (a look that fails, as during a restart test, is skipped); `look` says what."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def look(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self.look()
            except (EopsError, OSError):
                continue  # the API server is down: nothing to count

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


class JobCounter(Sampler):
    """The namespace's Jobs: the most Jobs each invocation ever had at once (a duplicate Job
    shows as 2)."""

    def __init__(self, dev_cluster: Any, namespace: str) -> None:
        super().__init__()
        self.most: Counter[str] = Counter()
        self._cluster = dev_cluster
        self._namespace = namespace

    def look(self) -> None:
        jobs = jobs_of(self._cluster, self._namespace)
        for inv, n in Counter(j["metadata"]["labels"][INVOCATION_LABEL] for j in jobs).items():
            self.most[inv] = max(self.most[inv], n)


def client_metric(server: RunningServer, name: str, **labels: str) -> float:
    """One sample of the gateway's /metrics (0 when it has none yet)."""
    answer = httpx.get(f"{server.url}/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in answer.text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def burst_ends_once(dev_cluster: Any, namespace: str, server: RunningServer, ids: list[str]) -> None:
    """Every one of `ids` succeeded, none ever had two Jobs at once (`JobCounter` ran meanwhile),
    and exactly one Job each is left."""
    states = {i: status(server, i)["state"] for i in ids}
    assert Counter(states.values()) == Counter({"succeeded": len(ids)}), server.output()[-4000:]
    names = sorted(j["metadata"]["name"] for j in jobs_of(dev_cluster, namespace))
    assert names == sorted(f"eops-{inv}" for inv in ids), "one Job each, none left over"


def wait_all_ended(
    server: RunningServer,
    ids: list[str],
    timeout: float,
    dev_cluster: Any | None = None,
    namespace: str = "",
) -> None:
    """Until every one of `ids` has ended. A test that waits in vain names what the first few
    left are doing, and with `dev_cluster` what their pods are doing as the API server says
    (a pod kwok never finished, or a gateway that missed its end)."""
    deadline = time.monotonic() + timeout
    left = set(ids)
    while left:
        answer = httpx.get(
            f"{server.url}/v1/invocations", params={"limit": 500}, headers=server.auth, timeout=30
        )
        assert answer.status_code == 200, answer.text
        ended = {item["id"] for item in answer.json()["items"] if item["state"] in TERMINAL}
        left -= ended
        assert time.monotonic() < deadline, (
            f"{len(left)} of {len(ids)} still active",
            [_what_it_is_doing(server, inv, dev_cluster, namespace) for inv in sorted(left)[:3]],
            server.output()[-4000:],
        )
        time.sleep(0.5)


def _what_it_is_doing(
    server: RunningServer, inv: str, dev_cluster: Any | None, namespace: str
) -> dict[str, Any]:
    """What a test that waited in vain reports of an invocation: its state and timeline, and
    with `dev_cluster` its Jobs' and pods' status."""
    current = status(server, inv)
    keep = (
        "id",
        "state",
        "attempt",
        "message",
        "node",
        "queue_position",
        "queue_reason",
        "timeline",
        "notes",
    )
    found = {key: current[key] for key in keep if key in current}
    if dev_cluster is not None:
        found["jobs"] = [job.get("status") for job in jobs_of(dev_cluster, namespace, inv)]
        found["pods"] = [
            {"node": (pod.get("spec") or {}).get("nodeName"), "status": pod.get("status")}
            for pod in pods_of(dev_cluster, namespace, inv)
        ]
    return found
