"""The MultiKueue set of the cluster tests (`eops dev-cluster up --multikueue` with two workers, the
real Kueue v0.17.0): one per session, started by the first test of the `multikueue` lane that
asks for it and stopped by PID at the session's end (or at exit, should the session die first)."""

from __future__ import annotations

import atexit
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from elasticityops.devcluster.cluster import DevCluster
from elasticityops.devcluster.cluster_set import ClusterSet, down_set, up_set
from elasticityops.devcluster.kueue_setup import DISPATCHERS, MultiKueueManager

# A worker lost for this long has its work run elsewhere (upstream's 15 min would outlast a test;
# counted from when the work was dispatched there, so a lost worker's work moves at once), and
# orphans are swept from a worker back again within seconds.
TIMINGS = MultiKueueManager(worker_lost_timeout_s=20.0, gc_interval_s=10.0)
# A worker's Kueue evicts work whose pod is not ready this long after admission (waitForPodsReady),
# and MultiKueue dispatches it again: how work leaves a stocked-out region. Above what a pod takes
# here on a loaded machine (a scale-up is ~10 s), below a test's patience.
PODS_READY_S = 60.0


@pytest.fixture(scope="session")
def multikueue_set(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    from elasticityops.cli.devcluster_set import set_objects
    from elasticityops.devcluster.build import ensure_built
    from elasticityops.devcluster.config import ClusterConfig
    from elasticityops.devcluster.errors import DevClusterError
    from elasticityops.devcluster.pytest_plugin import TEST_KNOBS

    root = tmp_path_factory.mktemp("multikueue")
    allow_build = os.environ.get("EOPS_DEV_CLUSTER_BUILD", "") == "1"
    atexit.register(down_set, root)
    try:
        tc = ensure_built(allow_build=allow_build, autoscaler="required", kueue=True)
        cfg = ClusterConfig(state_dir=root, autoscaler=TEST_KNOBS, pods_ready_timeout_s=PODS_READY_S)
        started = up_set(root, cfg, 2, set_objects(2, TEST_KNOBS.max_nodes), tc, TIMINGS)
    except DevClusterError as exc:
        pytest.fail(f"the MultiKueue set did not start: {exc}", pytrace=False)
    try:
        yield started
    finally:
        down_set(root)
        atexit.unregister(down_set)


def least_privilege_kubeconfig(cluster: DevCluster, namespace: str, out: Path, timeout: float = 60.0) -> Path:
    """A kubeconfig of `cluster` (a worker) with only the rights `eops render worker-rbac` gives:
    its objects applied as an administrator would, then the ServiceAccount's token and the
    cluster's CA, once the token controller has filled them in, written as the docs' steps do."""
    import base64
    import time

    import yaml

    from elasticityops.backends.kubernetes.worker_rbac import (
        WORKER_ACCOUNT,
        WORKER_TOKEN_SECRET,
        build_worker_rbac,
    )
    from elasticityops.domain.errors import Conflict

    plural = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "Secret": "secrets"}
    rbac = {"Role": "roles", "RoleBinding": "rolebindings"}
    cluster_rbac = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}
    with cluster.api() as api:
        for obj in build_worker_rbac(namespace):
            kind = obj["kind"]
            if kind == "Namespace":
                path = "/api/v1/namespaces"
            elif kind in cluster_rbac:
                path = f"/apis/rbac.authorization.k8s.io/v1/{cluster_rbac[kind]}"
            elif kind in rbac:
                path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{rbac[kind]}"
            else:
                path = f"/api/v1/namespaces/{namespace}/{plural[kind]}"
            with contextlib.suppress(Conflict):  # `default` is there; a second call finds its own
                api.create(path, obj)
        deadline = time.monotonic() + timeout
        while True:
            data = api.get(f"/api/v1/namespaces/{namespace}/secrets/{WORKER_TOKEN_SECRET}").get("data") or {}
            if data.get("token") and data.get("ca.crt"):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the token controller did not fill {WORKER_TOKEN_SECRET} in {timeout:g} s"
                )
            time.sleep(0.5)
    admin = yaml.safe_load(cluster.kubeconfig_path.read_text())
    server = admin["clusters"][0]["cluster"]["server"]
    name = out.stem
    token = base64.b64decode(data["token"]).decode()
    context = {"cluster": name, "user": WORKER_ACCOUNT, "namespace": namespace}
    out.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": name,
                        "cluster": {"server": server, "certificate-authority-data": data["ca.crt"]},
                    },
                ],
                "users": [{"name": WORKER_ACCOUNT, "user": {"token": token}}],
                "contexts": [{"name": name, "context": context}],
                "current-context": name,
            }
        )
    )
    return out


def gateway_env(clusters: ClusterSet, namespace: str, keys: Path) -> dict[str, str]:
    """The settings of a gateway on the set's manager: Kueue admission, and each worker reached
    through a least-privilege kubeconfig (written under `keys`), as docs/multi-cluster.md sets
    it up."""
    keys.mkdir(parents=True, exist_ok=True)
    workers = ",".join(
        f"{name}={least_privilege_kubeconfig(clusters.cluster(name), namespace, keys / f'{name}.kubeconfig')}"
        for name in clusters.record.worker_names
    )
    return {"EOPS_ADMISSION": "kueue", "EOPS_KUBE_WORKERS": workers}


GATEWAY_DISPATCHER = DISPATCHERS["gateway"]
"""The external dispatcher's name the tests give the manager's Kueue (any name not Kueue's own)."""


@contextlib.contextmanager
def dispatched_by(clusters: ClusterSet, dispatcher: str) -> Iterator[None]:
    """The manager's Kueue restarted with `multiKueue.dispatcherName` set to `dispatcher`, and
    back to what it was afterwards (restarted again): Kueue reads it at its start only."""
    import yaml

    path = clusters.manager.layout.kueue / "config.yaml"
    before = path.read_text()
    config = yaml.safe_load(before)
    config["multiKueue"]["dispatcherName"] = dispatcher
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    try:
        clusters.manager.restart_kueue()
        yield
    finally:
        path.write_text(before)
        clusters.manager.restart_kueue()


def hold_queue(clusters: ClusterSet, worker: str, hold: bool) -> None:
    """Stop (or let go again) the worker's ClusterQueue: Kueue admits nothing there meanwhile.
    A hold counts once the worker's Kueue says its queue is inactive: a Kueue whose watches are
    still coming back (its API server restarted by an earlier test of the lane) may not have
    read the patch yet, and would admit the work."""
    path = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/eops"
    with clusters.cluster(worker).api() as api:
        api.patch(path, {"spec": {"stopPolicy": "Hold" if hold else "None"}})
        if not hold:
            return
        deadline = time.monotonic() + 60
        while True:
            conditions = (api.get(path).get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Active" and c.get("status") == "False" for c in conditions):
                return
            assert time.monotonic() < deadline, f"{worker}'s ClusterQueue still active: {conditions}"
            time.sleep(0.5)
