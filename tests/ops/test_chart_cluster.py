"""The chart against the dev cluster's real API server, and the dashboard's autoscaler metrics
against its real cluster-autoscaler.

kwok runs no containers, so "installed and serving" is shown in two halves: `helm install` puts
every object of the chart into the cluster (the API server accepts and stores them), then the
chart's own container, as the installed Deployment states it (command, arguments, environment,
its Secret and field references resolved as the kubelet would), runs as a local process that
authenticates as the chart's ServiceAccount (a TokenRequest token, in place of the pod's
mounted one). Its /readyz answering, and an invocation run to its end, show that the chart's
RBAC and settings are what the gateway needs; a second install with replicas shows the same for
leader election (one leader, one follower)."""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from backends.kubernetes.cluster_support import deploy, ensure_priority_classes, invoke, wait_state
from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION
from helpers.server import RunningServer, start_server

from .promql import dashboard_queries, metric_names
from .test_chart import CHART_DIR, _helm
from .test_dashboard import AUTOSCALER_PREFIX, DASHBOARD_PATH, declared_autoscaler_metrics

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# Labelled counters the autoscaler exports only from their first event (a scale-up, a
# scale-down, a failed scale-up): checked against its source instead when not yet there.
AFTER_FIRST_EVENT = {
    "cluster_autoscaler_scaled_up_nodes_total",
    "cluster_autoscaler_scaled_down_nodes_total",
    "cluster_autoscaler_failed_scale_ups_total",
}


@pytest.fixture(scope="module")
def cluster(dev_cluster: Any, servicemonitor_crd: Path) -> Any:
    ensure_priority_classes(dev_cluster)  # the dev cluster's own: the chart is told not to make them
    # The operator's own CRD (the cluster runs no operator): its schema, not ours, judges the
    # rendered ServiceMonitor under the API server's strict field validation.
    dev_cluster.kubectl("apply", "--server-side", "-f", str(servicemonitor_crd))
    dev_cluster.kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com")
    return dev_cluster


def _helm_k(helm: str, cluster: Any, *argv: str) -> Any:
    return _helm(helm, f"--kubeconfig={cluster.kubeconfig_path}", *argv)


def _values_file(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / f"values-{secrets.token_hex(3)}.json"
    path.write_text(json.dumps(values))
    return str(path)


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param(
            {
                "replicas": 3,
                "database": {"secretName": "eops-db"},
                "serviceMonitor": {"enabled": True, "interval": "15s"},
                "gpuBudget": "nvidia-tesla-t4=8",
                "storage": {"storageClass": "standard"},
            },
            id="replicas-budget-monitor",
        ),
    ],
)
def test_helm_template_is_accepted_by_the_api_server(
    cluster: Any, dev_namespace: str, helm_binary: str, tmp_path: Path, values: dict[str, Any]
) -> None:
    rendered = _helm(
        helm_binary,
        "template",
        "eops",
        str(CHART_DIR),
        "-n",
        dev_namespace,
        "-f",
        _values_file(tmp_path, values),
    )
    assert rendered.returncode == 0, rendered.stderr
    path = tmp_path / "rendered.yaml"
    path.write_text(rendered.stdout)
    done = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-n", dev_namespace, "-f", str(path), check=False
    )
    assert done.returncode == 0, done.stderr
    kinds = {line.split("/")[0] for line in done.stdout.splitlines()}
    assert {"serviceaccount", "role.rbac.authorization.k8s.io", "deployment.apps", "service"} <= kinds
    if values:
        assert {"poddisruptionbudget.policy", "servicemonitor.monitoring.coreos.com"} <= kinds


def _dry_run_service_monitor(cluster: Any, namespace: str, tmp_path: Path, endpoint: dict[str, str]) -> Any:
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": {"selector": {}, "endpoints": [endpoint]},
    }
    path = tmp_path / f"monitor-{secrets.token_hex(3)}.yaml"
    path.write_text(yaml.safe_dump(monitor))
    return cluster.kubectl("apply", "--server-side", "--dry-run=server", "-f", str(path), check=False)


def test_a_misspelt_service_monitor_field_is_refused(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    # The operator's CRD defines every field of an endpoint (it preserves unknown fields
    # nowhere), so strict field validation catches a misspelling the chart could make. Spelt
    # right, the same object is accepted: the refusal is the misspelling's, not another field's.
    good = _dry_run_service_monitor(cluster, dev_namespace, tmp_path, {"port": "http", "interval": "15s"})
    assert good.returncode == 0, good.stderr
    bad = _dry_run_service_monitor(cluster, dev_namespace, tmp_path, {"port": "http", "intervall": "15s"})
    assert bad.returncode != 0
    assert "intervall" in bad.stderr, bad.stderr


def _bound_token(cluster: Any, namespace: str) -> tuple[str, str]:
    """A token of the chart's ServiceAccount bound to a Secret of its own, as a pod's projected
    token is bound to its pod: deleting the Secret revokes the token. (token, the Secret's name)"""
    name = f"sa-bound-{secrets.token_hex(3)}"
    with cluster.api() as api:
        made = api.create(
            f"/api/v1/namespaces/{namespace}/secrets",
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}},
        )
        answer = api.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/elasticityops/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {
                    "expirationSeconds": 3600,
                    "boundObjectRef": {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "name": name,
                        "uid": made["metadata"]["uid"],
                    },
                },
            },
        )
    return answer["status"]["token"], name


def _mount_service_account(cluster: Any, namespace: str, into: Path) -> tuple[dict[str, str], str]:
    """What the kubelet gives a pod of the chart: its ServiceAccount's token, the cluster's CA
    and the namespace in a directory, and the API server's address in KUBERNETES_SERVICE_HOST
    and _PORT. The gateway finds its way in from those alone, as it does in a cluster. (The
    environment, the bound Secret's name.)"""
    config = yaml.safe_load(cluster.kubeconfig_path.read_text())
    server = httpx.URL(cluster.server)
    into.mkdir(mode=0o700)
    token, bound = _bound_token(cluster, namespace)
    (into / "token").write_text(token)
    (into / "namespace").write_text(namespace)
    (into / "ca.crt").write_bytes(
        base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
    )
    env = {
        "KUBERNETES_SERVICE_HOST": str(server.host),
        "KUBERNETES_SERVICE_PORT": str(server.port),
        "EOPS_KUBE_SERVICE_ACCOUNT_DIR": str(into),
        "KUBECONFIG": str(into / "no-kubeconfig"),  # not read: the service account comes first
    }
    return env, bound


def _until_refused(cluster: Any, token: str, ca: Path, timeout: float = 30) -> None:
    """Until the API server refuses `token` (its bound object deleted: the server may take a
    moment to notice)."""
    trust = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + timeout
    with httpx.Client(verify=trust, timeout=10) as http:
        while (
            http.get(f"{cluster.server}/api", headers={"Authorization": f"Bearer {token}"}).status_code != 401
        ):
            assert time.monotonic() < deadline, "a token bound to a deleted Secret is still accepted"
            time.sleep(0.5)


def _container_env(cluster: Any, namespace: str, container: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The container's environment as the kubelet would give it: Secret keys read, the pod's
    name where a field reference asks for it."""
    env: dict[str, str] = {}
    with cluster.api() as api:
        for item in container["env"]:
            source = item.get("valueFrom")
            if source is None:
                env[item["name"]] = item["value"]
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret = api.get(f"/api/v1/namespaces/{namespace}/secrets/{ref['name']}")
                env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
            else:
                assert source == {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}, source
                env[item["name"]] = pod_name
    return env


def _charts_gateway(
    cluster: Any, namespace: str, workdir: Path, pod_name: str
) -> tuple[RunningServer, Path, str]:
    """The installed Deployment's container as a local process, as the chart's ServiceAccount
    mounted as in its pod. (The gateway, its token file, the Secret the token is bound to.)"""
    with cluster.api() as api:
        deployment = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/elasticityops")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "elasticityops"
    [container] = pod["containers"]
    command = container["command"]
    assert command[:2] == ["eops", "serve"], command
    # start_server binds 127.0.0.1 on a free port and gives the data dir (/data is the volume's):
    # what the container says of those three is all that is replaced.
    args, rest = [], iter(command[2:])
    for word in rest:
        if word in ("--host", "--port"):
            next(rest)
        else:
            args.append(word)
    env = _container_env(cluster, namespace, container, pod_name)
    assert env.pop("EOPS_DATA_DIR") == "/data"
    assert not any(k.startswith("EOPS_KUBECONFIG") for k in env), "the chart's pod has no kubeconfig"
    mounted = workdir / f"{pod_name}-serviceaccount"
    sa_env, bound = _mount_service_account(cluster, namespace, mounted)
    return start_server(workdir / pod_name, *args, env={**env, **sa_env}), mounted / "token", bound


def _until_leader(server: RunningServer, timeout: float) -> None:
    """Until the replica leads and its dispatcher runs. On the way it answers 200 as a follower
    (campaigning for the Lease), then 503 `not_ready` while its dispatcher starts (the backend's
    first lists, the GPU nodes' records read back): both are waited through."""
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.get(f"{server.url}/readyz", timeout=10)
        if answer.status_code == 200 and answer.json()["role"] == "leader":
            return
        not_yet = answer.status_code == 200 or answer.json()["error"]["code"] == "not_ready"
        assert not_yet, answer.text
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.2)


def _readyz(server: RunningServer) -> dict[str, Any]:
    answer = httpx.get(f"{server.url}/readyz", timeout=10)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@pytest.fixture
def namespaces(cluster: Any) -> Iterator[list[str]]:
    """Namespaces the test makes (helm installs into one that exists), deleted afterwards."""
    made: list[str] = []
    yield made
    with cluster.api() as api:
        for name in made:
            api.delete(f"/api/v1/namespaces/{name}")


def _namespace(cluster: Any, made: list[str]) -> str:
    name = f"t-{secrets.token_hex(4)}"
    with cluster.api() as api:
        api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    made.append(name)
    return name


def test_helm_install_serves_readyz_as_the_charts_service_account(
    cluster: Any, namespaces: list[str], helm_binary: str, tmp_path: Path, postgres: Any
) -> None:
    from helpers.pg_cluster import fresh_database

    single = _namespace(cluster, namespaces)
    installed = _helm_k(
        helm_binary,
        cluster,
        "install",
        "eops",
        str(CHART_DIR),
        "-n",
        single,
        "--set",
        "priorityClasses.create=false",
    )
    assert installed.returncode == 0, installed.stderr
    assert "STATUS: deployed" in installed.stdout
    # Replicas on PostgreSQL in a second namespace: a second release beside the first.
    replicated = _namespace(cluster, namespaces)
    with cluster.api() as api:
        url = base64.b64encode(fresh_database(postgres).encode()).decode()
        api.create(
            f"/api/v1/namespaces/{replicated}/secrets",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "eops-db"},
                "data": {"database-url": url},
            },
        )
    values = {"replicas": 2, "database": {"secretName": "eops-db"}, "priorityClasses": {"create": False}}
    installed = _helm_k(
        helm_binary,
        cluster,
        "install",
        "eops",
        str(CHART_DIR),
        "-n",
        replicated,
        "-f",
        _values_file(tmp_path, values),
    )
    assert installed.returncode == 0, installed.stderr
    with cluster.api() as api:
        api.get(f"/apis/policy/v1/namespaces/{replicated}/poddisruptionbudgets/elasticityops")
        api.get(f"/api/v1/namespaces/{single}/persistentvolumeclaims/elasticityops-data")

    with ExitStack() as running:
        gateway, token_file, bound = _charts_gateway(cluster, single, tmp_path, "elasticityops-7d9c-single")
        running.callback(gateway.stop)
        assert _readyz(gateway) == {"status": "ready", "role": "leader"}
        # The chart's Role lets it create the Job and its Secret and follow them to the end.
        deploy(gateway, name="hello", annotations={RUN_SECONDS_ANNOTATION: "1", EXIT_CODE_ANNOTATION: "0"})
        done = wait_state(gateway, invoke(gateway, "hello"), {"succeeded"}, timeout=120)
        assert done["exit_code"] == 0
        # The kubelet rotates the token: a new one in the file, the old one revoked. The
        # gateway's next request is refused (401), it reads the file again and goes on.
        old_token = token_file.read_text()
        token, _ = _bound_token(cluster, single)
        token_file.write_text(token)
        with cluster.api() as api:
            api.delete(f"/api/v1/namespaces/{single}/secrets/{bound}")
        _until_refused(cluster, old_token, token_file.parent / "ca.crt")
        done = wait_state(gateway, invoke(gateway, "hello"), {"succeeded"}, timeout=120)
        assert done["exit_code"] == 0
        metrics = httpx.get(f"{gateway.url}/metrics", timeout=10).text
        [refreshes] = [
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith("eops_kube_api_credential_refreshes_total ")
        ]
        assert refreshes >= 1, "the old token was never refused: the rotation was not exercised"

        first, _, _ = _charts_gateway(cluster, replicated, tmp_path, "elasticityops-5f8b-aaaaa")
        running.callback(first.stop)
        _until_leader(first, timeout=30)
        second, _, _ = _charts_gateway(cluster, replicated, tmp_path, "elasticityops-5f8b-bbbbb")
        running.callback(second.stop)
        assert _readyz(second) == {
            "status": "ready",
            "role": "follower",
            "leader": "elasticityops-5f8b-aaaaa",
        }

    for namespace in (single, replicated):
        removed = _helm_k(helm_binary, cluster, "uninstall", "eops", "-n", namespace)
        assert removed.returncode == 0, removed.stderr


def test_every_autoscaler_metric_of_the_dashboard_is_exported(cluster: Any) -> None:
    dashboard = json.loads(DASHBOARD_PATH.read_text())
    wanted = {
        name
        for _, expr in dashboard_queries(dashboard)
        for name in metric_names(expr)
        if name.startswith(AUTOSCALER_PREFIX)
    }
    port = cluster.state.ports.autoscaler_metrics
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    exported = {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")
    }
    missing = wanted - exported
    assert missing <= AFTER_FIRST_EVENT, f"not exported by the running autoscaler: {sorted(missing)}"
    assert missing <= declared_autoscaler_metrics()
    assert {"cluster_autoscaler_nodes_count", "cluster_autoscaler_unschedulable_pods_count"} <= exported
