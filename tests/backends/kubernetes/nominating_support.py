"""A gateway that is MultiKueue's external dispatcher on the session's MultiKueue set: the manager's
Kueue restarted with `multiKueue.dispatcherName` set to the gateway's, the gateway serving with
`--kube-nominate-wait`, both undone afterwards. Shared by the cluster tests of nominations."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from elasticityops.devcluster.cluster_set import ClusterSet
from elasticityops.domain.errors import NotFound
from helpers.kueue import wait_for
from helpers.multikueue import GATEWAY_DISPATCHER, dispatched_by, gateway_env
from helpers.server import RunningServer

from .cluster_support import start_k8s_gateway


@contextlib.contextmanager
def nominating_gateway(
    clusters: ClusterSet, namespace: str, tmp_path_factory: pytest.TempPathFactory, wait_s: float
) -> Iterator[RunningServer]:
    env = {
        **gateway_env(clusters, namespace, tmp_path_factory.mktemp("workers")),
        "EOPS_KUBE_NOMINATE_WAIT": f"{wait_s:g}",
    }
    with dispatched_by(clusters, GATEWAY_DISPATCHER):
        no_work_left(clusters, namespace)
        server = start_k8s_gateway(clusters.manager, namespace, tmp_path_factory.mktemp("gw"), env=env)
        try:
            yield server
        finally:
            server.stop()


def no_work_left(clusters: ClusterSet, namespace: str) -> None:
    """The set is the lane's: an earlier test's Job whose Workload has not finished would be
    this gateway's to nominate too (it follows every Job of its instance in the namespace), and
    its count of Workloads waiting would not start at 0. Each one is shown (for what left it)
    and its Job deleted, and the test starts once their Workloads are gone."""
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"

    def unfinished() -> list[dict[str, Any]]:
        with clusters.manager.api() as api:
            workloads, _ = api.list(path)
        return [
            w
            for w in workloads
            if not any(
                c.get("type") == "Finished" and c.get("status") == "True"
                for c in (w.get("status") or {}).get("conditions") or []
            )
        ]

    left = unfinished()
    for workload in left:
        status = workload.get("status") or {}
        print(
            "left by an earlier test:",
            workload["metadata"]["name"],
            [(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []],
            status.get("clusterName"),
            status.get("nominatedClusterNames"),
        )
        for owner in workload["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Job":
                with clusters.manager.api() as api, contextlib.suppress(NotFound):
                    api.delete(f"/apis/batch/v1/namespaces/{namespace}/jobs/{owner['name']}")
    if left:
        wait_for(lambda: not unfinished(), 90, "the earlier tests' Workloads to go")
