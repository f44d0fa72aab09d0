"""What a MultiKueue worker grants the gateway (`eops render worker-rbac`) is exactly what the
gateway's worker-side code asks of it: the backend runs against two stand-in API servers, the
manager and one worker (its kubeconfig in --kube-workers), does everything it does in a worker
(watches, a payload Secret, logs), and every request the worker saw is one right of
WORKER_RULES, and every right of WORKER_RULES was used."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.backend import KubernetesBackend
from elasticityops.backends.kubernetes.kueue_workloads import KUEUE_API
from elasticityops.backends.kubernetes.labels import KEEP_LOG_FINALIZER
from elasticityops.backends.kubernetes.manifests import job_name
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.worker_rbac import (
    WORKER_ACCOUNT,
    WORKER_CLUSTER_RULES,
    WORKER_RULES,
    WORKER_TOKEN_SECRET,
    build_worker_rbac,
    granted,
    kubeconfig_steps,
    worker_cluster_role,
)
from elasticityops.domain.clock import ManualClock
from helpers.eops_in_process import run_eops
from helpers.server import REPO, base_env

from .builders import INV, T0, invocation, job, pod, ts
from .scripted_server import Reply, ScriptedServer, scripted

NS = "elasticityops"
PODS = f"/api/v1/namespaces/{NS}/pods"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
EVENTS = f"/api/v1/namespaces/{NS}/events"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
WORKLOADS = f"{KUEUE_API}/namespaces/{NS}/workloads"
NODES = "/api/v1/nodes"
EMPTY = {"items": [], "metadata": {"resourceVersion": "1"}}


def quiet_routes(**extra: list[Reply]) -> dict[str, list[Reply]]:
    """Routes of a cluster with nothing of ours: empty lists, watches that stay open (`extra`
    first: a request takes the first route it matches)."""
    routes: dict[str, list[Reply]] = dict(extra)
    for path in (JOBS, PODS, EVENTS, WORKLOADS, NODES):
        routes.setdefault(f"^GET {re.escape(path)}\\?.*watch=true", [Reply(hold=True)])
        routes.setdefault(f"^GET {re.escape(path)}\\?", [Reply(200, EMPTY)])
    return routes


def request_right(method: str, target: str) -> tuple[str, str, str]:
    """(API group, resource[/subresource], verb) that RBAC checks for one request in the
    namespace or of a cluster-scoped resource, as the API server's request info makes it."""
    url = urlsplit(target)
    parts = url.path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"]:
        assert rest[1] == NS, target
        rest = rest[2:]
    resource, name, sub = [*rest, None, None][:3]
    if method == "POST":
        verb = "create"
    elif method == "GET" and name is None:
        verb = "watch" if "watch=true" in url.query else "list"
    elif method == "GET":
        verb = "get"
    else:
        verb = {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return group, f"{resource}/{sub}" if sub else str(resource), verb


def worker_kubeconfig(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "worker-1.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "w",
                "clusters": [{"name": "w", "cluster": {"server": url}}],
                "users": [{"name": "w", "user": {"token": "t"}}],
                "contexts": [{"name": "w", "context": {"cluster": "w", "user": "w"}}],
            }
        )
    )
    return path


async def _until(srv: ScriptedServer, *wanted: tuple[str, str, str]) -> None:
    for _ in range(400):
        if set(wanted) <= {request_right(s.method, s.target) for s in srv.seen}:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"the worker never saw {wanted}")


@pytest.mark.anyio
async def test_the_gateway_asks_a_worker_for_exactly_the_rights_its_role_grants(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    running = pod(node="n", phase="Running", state={"running": {"startedAt": ts(1)}})
    worker_job = job()
    worker_job["metadata"] = {**worker_job["metadata"], "uid": "worker-copy-uid"}
    worker_routes = quiet_routes(
        **{
            f"^GET {re.escape(JOBS)}/{job_name(INV, 0)}$": [Reply(200, worker_job)],
            f"^POST {re.escape(SECRETS)}": [Reply(201, {})],
            f"^GET {re.escape(PODS)}\\?labelSelector=[^&]*invocation": [
                Reply(200, {"items": [running], "metadata": {}})
            ],
            f"^GET {re.escape(PODS)}/[^/?]+/log": [Reply(200, raw=b"hello from the worker\n")],
            f"^PATCH {re.escape(PODS)}/[^/?]+$": [Reply(200, {})],
        }
    )

    async def material(invocation_id: str) -> tuple[bytes, str]:
        return b'{"x": 1}', "token"

    async with scripted([], quiet_routes()) as manager, scripted([], worker_routes) as worker:
        settings = KubernetesSettings(
            namespace=NS,
            max_retries=1,
            concurrency=4,
            local_queue="eops",
            workers=f"worker-1={worker_kubeconfig(tmp_path, worker.url)}",
        )
        backend = KubernetesBackend(
            settings,
            clock,
            KubeApi.at(manager.url, settings, clock),
            watch_gpu_nodes=True,
            launch_material=material,
        )

        async def sink(event: Any) -> None:
            pass

        await backend.start(sink)
        try:
            # The watches of the worker's pods, Events and Workloads list, then watch.
            await _until(
                worker,
                *((group, resource, verb) for group, resource in _WATCHED for verb in ("list", "watch")),
            )
            # MultiKueue named the worker: the payload Secret goes there, owned by its Job's copy.
            backend._worker_secrets.place(INV, 0, "worker-1")
            await _until(worker, ("", "secrets", "create"))
            in_worker = replace(invocation(), cluster="worker-1")
            logs = [chunk async for chunk in backend.logs(in_worker, follow=False)]
            # The pod ended: its log is kept, and the pod let go of (its finalizer taken off).
            ended = pod(node="n", phase="Succeeded", state={"terminated": {"exitCode": 0}})
            ended["metadata"]["finalizers"] = [KEEP_LOG_FINALIZER]
            await backend._watching.on_worker_pod("worker-1", "MODIFIED", ended)
            await _until(worker, ("", "pods", "patch"))
        finally:
            await backend.stop()
    assert b"".join(logs) == b"hello from the worker\n"
    asked = {request_right(s.method, s.target) for s in worker.seen}
    assert asked == granted(WORKER_RULES) | granted(WORKER_CLUSTER_RULES)
    namespaced = {request_right(s.method, s.target) for s in worker.seen if f"/namespaces/{NS}/" in s.target}
    assert namespaced == granted(WORKER_RULES), "the ClusterRole gives only what is cluster-scoped"


_WATCHED = (("", "pods"), ("", "events"), ("kueue.x-k8s.io", "workloads"), ("", "nodes"))


@pytest.mark.parametrize(
    ("method", "target", "right"),
    [
        ("GET", f"{PODS}?labelSelector=a%3Db&watch=true&resourceVersion=1", ("", "pods", "watch")),
        ("GET", f"{PODS}?labelSelector=a%3Db", ("", "pods", "list")),
        ("GET", f"{PODS}/p-1/log?container=job", ("", "pods/log", "get")),
        ("GET", f"{JOBS}/eops-x", ("batch", "jobs", "get")),
        ("POST", SECRETS, ("", "secrets", "create")),
        ("PATCH", f"{PODS}/p-1", ("", "pods", "patch")),
        ("DELETE", f"{JOBS}/eops-x", ("batch", "jobs", "delete")),
        ("GET", f"{WORKLOADS}?watch=true", ("kueue.x-k8s.io", "workloads", "watch")),
        ("GET", f"{NODES}?labelSelector=x&watch=true", ("", "nodes", "watch")),
    ],
)
def test_a_request_is_the_right_rbac_checks(method: str, target: str, right: tuple[str, str, str]) -> None:
    assert request_right(method, target) == right


def test_the_worker_objects_bind_the_role_to_the_account_its_token_is_for() -> None:
    objects = build_worker_rbac("gpu")
    assert [o["kind"] for o in objects] == [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Secret",
    ]
    namespace, account, role, binding, cluster_role, cluster_binding, secret = objects
    assert namespace["metadata"]["name"] == "gpu"
    assert all(o["metadata"]["namespace"] == "gpu" for o in (account, role, binding, secret))
    assert "namespace" not in cluster_role["metadata"]
    assert "namespace" not in cluster_binding["metadata"]
    assert cluster_role["metadata"]["name"] == worker_cluster_role("gpu") != worker_cluster_role("ml")
    assert cluster_role["rules"] == WORKER_CLUSTER_RULES
    assert cluster_binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": worker_cluster_role("gpu"),
    }
    assert cluster_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": WORKER_ACCOUNT, "namespace": "gpu"}
    ]
    assert account["metadata"]["name"] == WORKER_ACCOUNT
    assert role["rules"] == WORKER_RULES
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": WORKER_ACCOUNT, "namespace": "gpu"}]
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert secret["metadata"]["name"] == WORKER_TOKEN_SECRET
    assert secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": WORKER_ACCOUNT}


def test_render_worker_rbac_prints_the_objects_and_how_to_make_the_kubeconfig() -> None:
    code, out, err = run_eops(["render", "worker-rbac", "--namespace", "gpu"], base_env(), REPO)
    assert code == 0, err
    assert list(yaml.safe_load_all(out)) == build_worker_rbac("gpu")
    for line in kubeconfig_steps("gpu"):
        assert line in err
    code, out, err = run_eops(["render", "worker-rbac", "--namespace", "Not_A_Namespace"], base_env(), REPO)
    assert code == 2
    assert "--namespace" in err
    assert "Traceback" not in err


def rights_text(rules: list[dict[str, Any]]) -> str:
    """The rules as docs/multi-cluster.md words them: `list and watch pods and events; get ...`."""
    return "; ".join(
        " and ".join(rule["verbs"])
        + " "
        + " and ".join(
            f"{resource}.{group}" if group else resource
            for group in rule["apiGroups"]
            for resource in rule["resources"]
        )
        for rule in rules
    )


def test_the_docs_say_the_rights_and_the_steps_the_code_has() -> None:
    page = " ".join((REPO / "docs" / "multi-cluster.md").read_text().split())
    assert rights_text(WORKER_RULES) in page
    assert (
        f"cluster-wide (a ClusterRole, named for the namespace), {rights_text(WORKER_CLUSTER_RULES)}" in page
    )
    lines = (REPO / "docs" / "multi-cluster.md").read_text()
    for line in kubeconfig_steps("NS", "worker-1", "worker-1-admin"):
        assert line in lines, line
