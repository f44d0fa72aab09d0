"""The kube-apiserver restarted mid-burst (issue 16, faults survived): a real gateway has 60
invocations in flight (some queued, some being created as Jobs, some running) when the dev
cluster's API server is stopped for a few seconds and started again on the same port and etcd.
The gateway's requests meet dropped connections, its watches drop and resume (or start over on
410 Gone); afterwards every invocation ends once (succeeded), no invocation ever had two Jobs,
and no Job is left behind but one per invocation."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION

from .cluster_support import (
    TERMINAL,
    JobCounter,
    deploy,
    ensure_priority_classes,
    invoke,
    jobs_of,
    k8s_gateway,
    remove_empty_autoscaled_nodes,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("faults")]

COUNT = 60
DOWN_S = 5.0


def _states(gw: Any) -> dict[str, str]:
    answer = httpx.get(
        f"{gw.url}/v1/invocations", params={"function": "work", "limit": 100}, headers=gw.auth, timeout=30
    )
    assert answer.status_code == 200, answer.text
    return {item["id"]: item["state"] for item in answer.json()["items"]}


def test_a_restarted_api_server_mid_burst_loses_and_doubles_nothing(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ensure_priority_classes(dev_cluster)
    with k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw") as gw:
        deploy(
            gw,
            name="work",
            max_concurrency=COUNT,
            annotations={RUN_SECONDS_ANNOTATION: "4", EXIT_CODE_ANNOTATION: "0"},
        )
        with JobCounter(dev_cluster, dev_namespace) as counter:
            ids = [invoke(gw, "work", {"i": i}) for i in range(COUNT)]
            deadline = time.monotonic() + 60
            while sum(s != "queued" for s in _states(gw).values()) < COUNT // 3:
                assert time.monotonic() < deadline, "nothing was admitted"
                time.sleep(0.1)
            at_restart = Counter(_states(gw).values())
            unreachable = dev_cluster.restart_apiserver(down_s=DOWN_S)
            print(f"API server down {unreachable:.1f} s with {dict(at_restart)} in flight")
            # The gateway answers throughout (its store is its own), and accepts more work.
            late = invoke(gw, "work", {"i": "after"})
            ids.append(late)
            deadline = time.monotonic() + 240
            while True:
                states = _states(gw)
                if all(states[i] in TERMINAL for i in ids):
                    break
                assert time.monotonic() < deadline, (Counter(states[i] for i in ids), gw.output()[-4000:])
                time.sleep(0.5)
        assert Counter(states[i] for i in ids) == Counter({"succeeded": COUNT + 1}), gw.output()[-4000:]
        assert max(counter.most.values()) == 1, "an invocation had two Jobs at once"
        names = sorted(j["metadata"]["name"] for j in jobs_of(dev_cluster, dev_namespace))
        assert names == sorted(f"eops-{inv}" for inv in ids), "one Job each, none left over"
        assert unreachable >= DOWN_S
    # The simulated cloud's leftovers would cost the next tests minutes (remove_empty_autoscaled_nodes).
    print(f"removed {remove_empty_autoscaled_nodes(dev_cluster)} empty autoscaled nodes")
