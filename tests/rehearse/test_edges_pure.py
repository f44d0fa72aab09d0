"""The pure helpers of the driver, the gateway command and the node samples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.devcluster.nodes import gpu_node
from elasticityops.domain.invocations import State
from elasticityops.planner.trace import Trace
from elasticityops.rehearse.cluster import node_seen
from elasticityops.rehearse.driver import function_spec, namespace_name, times_of
from elasticityops.rehearse.gateway import serve_command
from elasticityops.wire import InvocationOut, TimelineOut

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_namespace_names_are_dns_labels() -> None:
    assert namespace_name("rehearse", "warm:3", "ab12cd") == "rehearse-warm-3-ab12cd"
    assert namespace_name("Re_H", "predictive:7.5", "x1") == "re-h-predictive-7-5-x1"
    long = namespace_name("p" * 80, "scheduled:08:00=50,20:00=5", "abcdef")
    assert len(long) <= 63
    assert long.endswith("-abcdef")
    assert "--" not in long


def test_function_outlasts_the_longest_run_after_the_longest_wait() -> None:
    spec = function_spec(Trace(np.array([0.0, 1.0]), np.array([5.0, 4000.4])))
    # The Job's deadline counts from its creation: the gateway's 900 s provisioning bound too.
    assert spec.timeout_seconds >= 4001 + KubernetesSettings().provisioning_timeout_seconds
    assert spec.gpu.type == "nvidia-tesla-t4"
    assert spec.gpu.count == 1
    assert spec.max_concurrency >= 2


def test_headroom_goes_to_the_gateway_unless_none() -> None:
    none = serve_command(Path("/d"), Path("/k"), "ns", "none")
    warm = serve_command(Path("/d"), Path("/k"), "ns", "warm:3")
    assert "--headroom" not in none
    assert warm[-2:] == ["--headroom", "warm:3"]
    assert none[none.index("--namespace") + 1] == "ns"
    assert none[none.index("--backend") + 1] == "kubernetes"
    assert none[none.index("--port") + 1] == "0"


def test_times_are_relative_to_the_replay_start() -> None:
    def at(s: float) -> datetime:
        return T0 + timedelta(seconds=s)

    inv = InvocationOut(
        id="inv-1",
        function="rehearse",
        state=State.succeeded,
        priority="normal",
        timeline=TimelineOut(accepted=at(10), dispatched=at(10.1), started=at(14), finished=at(44)),
        durations={},
    )
    t = times_of(inv, 9.9, T0.timestamp())
    assert (t.arrival_s, t.accepted_s, t.started_s, t.finished_s) == (9.9, 10.0, 14.0, 44.0)
    assert t.wait_s == 4.0


def test_a_node_counts_ready_only_with_its_gpu() -> None:
    stamp = "2026-12-01T12:00:30Z"
    node = gpu_node("n1", pool="p", zone="z", role="autoscaled", now=stamp)
    node["metadata"]["creationTimestamp"] = stamp
    seen = node_seen(node, T0.timestamp(), 40.0)
    assert (seen.name, seen.created_s, seen.ready) == ("n1", 30.0, True)
    node["status"]["allocatable"]["nvidia.com/gpu"] = "0"  # the driver is not installed yet
    assert not node_seen(node, T0.timestamp(), 40.0).ready


def test_a_compressed_day_keeps_the_normal_load_shape() -> None:
    from elasticityops.planner.synthetic import concurrency_profile
    from elasticityops.rehearse.loads import compressed_day

    trace = compressed_day(20.0, seed=1)
    assert trace.span_s <= 20 * 60
    assert trace.span_s > 19 * 60
    assert float(np.mean(trace.duration_s)) == pytest.approx(300.0, rel=0.1)
    _, conc = concurrency_profile(trace, step_s=30.0)
    # Little's law lags a 20-minute day by a 300 s run time: the peak comes out damped.
    assert 120 <= int(conc.max()) <= 230
    assert compressed_day(20.0, seed=1).arrival_s.tolist() == trace.arrival_s.tolist()


def test_varying_gpu_types_and_priorities_are_noted(tmp_path: Path) -> None:
    from elasticityops.rehearse.prepare import read_trace

    path = tmp_path / "t.csv"
    path.write_text(
        "arrival_s,duration_s,function,gpu_type,priority\n"
        "0,10,a,nvidia-tesla-t4,0\n1,10,b,nvidia-l4,0\n2,10,a,nvidia-tesla-t4,0\n"
    )
    trace, notes = read_trace(path)
    assert len(trace) == 3
    assert any("2 functions" in n for n in notes)
    assert any("gpu_type column holds 2 values" in n for n in notes)
    assert not any("priority column" in n for n in notes)


def test_a_slice_of_the_normal_load_runs_at_its_hour() -> None:
    from elasticityops.planner.synthetic import concurrency_profile
    from elasticityops.rehearse.loads import normal_slice

    at_eight = normal_slice(40.0, start_hour=8.0, seed=3)
    at_peak = normal_slice(40.0, start_hour=14.0, seed=3)
    assert 39 * 60 < at_eight.span_s <= 40 * 60
    # After one run time or two the concurrency settles near the day's curve at that hour:
    # 120 at 08:00, 180 at the 14:00 peak (Poisson noise and the lognormal tail on top).
    _, eight = concurrency_profile(at_eight)
    _, peak = concurrency_profile(at_peak)
    assert 95 <= float(np.mean(eight[15:40])) <= 145
    assert 150 <= float(np.mean(peak[15:40])) <= 210
