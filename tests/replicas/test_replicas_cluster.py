"""A follower's log follow on the Kubernetes backend, against the dev cluster: the leader (its
dispatcher and watches running) runs the Jobs; the follower (dispatch=False: a backend never
started, no watches) follows by asking the API server about the invocation's pod and Job.

kwok serves no container output (the dev cluster runs no ClusterLogs), so once the container
has started the pod log API answers an error, which the follower must pass on naming the pod
it asked for (tests/backends/kubernetes/test_cluster.py says the same of a single gateway); the
output itself is streamed in tests/backends/kubernetes/test_backend.py against a scripted API
server. What the cluster shows: the follow waits for the pod the leader's Job makes and asks
for its log, and a follow of an invocation that ends before its container starts ends."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION, SIMULATED_OUTPUT
from elasticityops.domain.invocations import State

from .support import replica

pytestmark = [pytest.mark.anyio, pytest.mark.cluster, pytest.mark.slow]


def _kubernetes(dev_cluster: Any, namespace: str) -> dict[str, str]:
    return {
        "EOPS_BACKEND": "kubernetes",
        "EOPS_KUBECONFIG": str(dev_cluster.kubeconfig_path),
        "EOPS_KUBE_NAMESPACE": namespace,
    }


def _function(name: str, run_seconds: float) -> bytes:
    return orjson.dumps(
        {
            "name": name,
            "image": "worker:1",
            "command": ["python", "worker.py"],
            "annotations": {RUN_SECONDS_ANNOTATION: str(run_seconds)},
        }
    )


async def test_a_follower_follows_the_log_of_a_job_the_leader_runs_and_sees_its_end(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path, database_url: str
) -> None:
    from backends.kubernetes.cluster_support import ensure_priority_classes

    ensure_priority_classes(dev_cluster)
    env = _kubernetes(dev_cluster, dev_namespace)
    async with (
        replica(tmp_path / "leader", database_url, dispatch=True, **env) as leader,
        replica(tmp_path / "follower", database_url, dispatch=False, **env) as follower,
    ):
        await leader.deploy(_function("talks", 10))
        inv_id = (await follower.http.post("/v1/functions/talks/invocations", content=b"{}")).json()["id"]
        started = time.monotonic()
        answer = await follower.http.get(
            f"/v1/invocations/{inv_id}/logs", params={"follow": "true"}, timeout=300
        )
        took = time.monotonic() - started
        # The container started (the leader's watch says so): the follower read its log from the
        # API server (kwok's simulated lines), and the follow, whose stream kwok never ends,
        # ended with the invocation, which the follower learnt from the database.
        assert (answer.status_code, answer.text) == (200, "".join(f"{line}\n" for line in SIMULATED_OUTPUT))
        assert (await follower.state_of(inv_id)).state is State.succeeded
        assert took < 240

        # One cancelled through the follower before its pod could start: the follow ends.
        await leader.deploy(_function("waits", 30))
        second = (await follower.http.post("/v1/functions/waits/invocations", content=b"{}")).json()["id"]
        following = asyncio.create_task(
            follower.http.get(f"/v1/invocations/{second}/logs", params={"follow": "true"}, timeout=300)
        )
        await asyncio.sleep(0.5)
        cancelled = await follower.http.post(f"/v1/invocations/{second}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        ended = await asyncio.wait_for(following, 120)
        # Empty when the cancel came first; kwok's lines when a warm node let the container
        # start within the half second. Either way the follow ended.
        assert ended.status_code == 200, ended.text
        assert (await follower.state_of(second)).state is State.cancelled
