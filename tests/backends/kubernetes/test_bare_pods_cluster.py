"""The `pod` workload (EOPS_KUBE_WORKLOAD=pod) against the real control plane: each invocation
is one bare Pod the gateway creates, times and deletes after its TTL, with no Job anywhere; the
same guarantees the Job gave (bench/k8s_burst.py's `eops-pods` phase measures why: a throttled
Job controller paces a burst). Adoption after the gateway is killed mid-flight is test_cluster.py's
test_gateway_killed_mid_flight_finishes_everything_once, run for both workloads."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .cluster_support import (
    deploy,
    ensure_priority_classes,
    invoke,
    jobs_of,
    k8s_gateway,
    pods_of,
    runs,
    wait_state,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BARE = {"EOPS_KUBE_WORKLOAD": "pod"}


@pytest.fixture(scope="module")
def cluster(dev_cluster: Any) -> Any:
    ensure_priority_classes(dev_cluster)
    return dev_cluster


def _secret(cluster: Any, namespace: str, name: str) -> dict[str, Any] | None:
    with cluster.api() as api:
        secrets, _ = api.list(
            f"/api/v1/namespaces/{namespace}/secrets", {"fieldSelector": f"metadata.name={name}"}
        )
    return secrets[0] if secrets else None


def _until(what: str, check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.5)


def test_bare_pods_succeed_fail_time_out_cancel_and_go_after_their_ttl(
    cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    with k8s_gateway(
        cluster, dev_namespace, tmp_path / "gw", env={**BARE, "EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS": "3"}
    ) as gw:
        deploy(gw, name="ok", annotations=runs(1), timeout_seconds=300)
        deploy(gw, name="fails", annotations=runs(1, exit_code=3))
        deploy(gw, name="slow", annotations=runs(600), timeout_seconds=4)
        deploy(gw, name="long", annotations=runs(600))
        ok, failing, slow, long = (invoke(gw, name) for name in ("ok", "fails", "slow", "long"))

        # The pod is the workload: the Job's pod under the Job's name, its deadline on it, and the
        # payload Secret owned by it.
        _until("the pod of ok", lambda: pods_of(cluster, dev_namespace, ok))
        [pod] = pods_of(cluster, dev_namespace, ok)
        assert pod["metadata"]["name"] == f"eops-{ok}"
        assert "ownerReferences" not in pod["metadata"]
        assert pod["spec"]["activeDeadlineSeconds"] == 300
        assert pod["spec"]["restartPolicy"] == "Never"
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
        _until("the Secret of ok", lambda: _secret(cluster, dev_namespace, f"eops-{ok}") is not None)
        secret = _secret(cluster, dev_namespace, f"eops-{ok}")
        assert secret is not None
        [owner] = secret["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("Pod", pod["metadata"]["uid"])

        done = wait_state(gw, ok, {"succeeded"}, timeout=180)
        assert done["exit_code"] == 0
        assert done["node"]
        failed = wait_state(gw, failing, {"failed"}, timeout=180)
        assert (failed["failure_reason"], failed["exit_code"]) == ("exit_code", 3)
        # Its timeout counts from its creation, waiting for a node included, as a Job's did.
        timed_out = wait_state(gw, slow, {"timed_out"}, timeout=180)
        assert timed_out["failure_reason"] == "timeout"
        assert "timeout of 4 s" in timed_out["message"]

        wait_state(gw, long, {"running"}, timeout=180)
        answer = httpx.post(f"{gw.url}/v1/invocations/{long}/cancel", headers=gw.auth, timeout=30)
        assert answer.status_code == 200, answer.text
        assert wait_state(gw, long, {"cancelled"}, timeout=60)["state"] == "cancelled"

        # Every pod goes: the ended ones 3 s after their end (the TTL), the timed-out and the
        # cancelled one at once; their Secrets with them (the garbage collector, by owner).
        for inv in (ok, failing, slow, long):
            _until(f"the pod of {inv} deleted", lambda inv=inv: not pods_of(cluster, dev_namespace, inv), 90)
            _until(
                f"the Secret of {inv} deleted",
                lambda inv=inv: _secret(cluster, dev_namespace, f"eops-{inv}") is None,
                90,
            )
        assert jobs_of(cluster, dev_namespace) == []
