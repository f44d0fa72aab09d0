"""Per-invocation annotations on the real control plane: each invocation of one function sets
its own simulated run time (`eops.dev/run-seconds`), over the function's, as `eops rehearse`
needs to replay a trace whose requests each have their own duration."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION

from .cluster_support import deploy, ensure_priority_classes, invoke, jobs_of, k8s_gateway, wait_state

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("headroom")]


def _at(final: dict[str, Any], milestone: str) -> datetime:
    return datetime.fromisoformat(final["timeline"][milestone])


def test_two_invocations_of_one_function_run_for_their_own_times(
    dev_cluster: Any, dev_namespace: str, tmp_path: Path
) -> None:
    ensure_priority_classes(dev_cluster)
    # Baseline nodes enough for both pods at once, even with another test's pod still on one or
    # two (each pod takes a node whole): neither waits for a new node, so they start together.
    # knobs() puts the session's baseline back afterwards; set_baseline waits for the nodes.
    with dev_cluster.knobs(baseline=4), k8s_gateway(dev_cluster, dev_namespace, tmp_path / "gw") as gw:
        dev_cluster.set_baseline(4)
        # The function's own run time is far from both, so each pod shows whose value it ran.
        deploy(gw, name="trace", annotations={RUN_SECONDS_ANNOTATION: "60"}, timeout_seconds=300)
        short = invoke(gw, "trace", {"i": 0}, annotations={RUN_SECONDS_ANNOTATION: "2"})
        long = invoke(gw, "trace", {"i": 1}, annotations={RUN_SECONDS_ANNOTATION: "12"})
        for inv, seconds in ((short, "2"), (long, "12")):
            wait_state(gw, inv, {"pending", "running", "succeeded"}, timeout=60)
            [job] = jobs_of(dev_cluster, dev_namespace, inv)
            assert job["spec"]["template"]["metadata"]["annotations"][RUN_SECONDS_ANNOTATION] == seconds
        finals = {inv: wait_state(gw, inv, {"succeeded"}, timeout=120) for inv in (short, long)}

    assert finals[short]["annotations"] == {RUN_SECONDS_ANNOTATION: "2"}
    assert finals[long]["annotations"] == {RUN_SECONDS_ANNOTATION: "12"}
    runs = {inv: final["durations"]["run"] for inv, final in finals.items()}
    # kwok ends a pod at its start (to the second) + run-seconds + 1: each runs at least its own
    # time and under a second more, plus the watch's delay in seeing it.
    assert 2 <= runs[short] < 6, runs
    assert 12 <= runs[long] < 16, runs
    assert 8 <= runs[long] - runs[short] <= 12, runs
    # Started together on warm nodes, they finish about 10 s apart.
    started_apart = abs((_at(finals[long], "started") - _at(finals[short], "started")).total_seconds())
    finished_apart = (_at(finals[long], "finished") - _at(finals[short], "finished")).total_seconds()
    assert started_apart < 3, finals
    assert 8 <= finished_apart <= 13, finals
