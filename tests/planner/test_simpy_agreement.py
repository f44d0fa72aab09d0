"""The engine and the plain SimPy implementation of the same model (bench/planner_simpy.py) agree
exactly on a trace with no simultaneous events."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from elasticityops.planner.model import simulate
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.synthetic import SyntheticSpec, generate

pytest.importorskip("simpy")


def _reference() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "planner_simpy.py"
    spec = importlib.util.spec_from_file_location("planner_simpy", path)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("planner_simpy", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "cluster",
    [
        pytest.param(ClusterSettings(), id="defaults"),
        pytest.param(ClusterSettings(baseline=20, max_nodes=300), id="baseline-and-quota"),
        pytest.param(
            ClusterSettings(stockout_probability=0.3, seed=7, scale_down_after_s=120.0), id="stockouts"
        ),
        pytest.param(ClusterSettings(empty_node_pick="first-fit"), id="first-fit"),
        pytest.param(
            ClusterSettings(empty_node_pick="first-fit", baseline=20, max_nodes=300, soft_taint_count=0),
            id="first-fit-no-taints",
        ),
        pytest.param(ClusterSettings(pending_order="newest-first"), id="newest-first"),
        pytest.param(
            ClusterSettings(pending_order="newest-first", empty_node_pick="first-fit", baseline=20),
            id="newest-first-first-fit",
        ),
        pytest.param(ClusterSettings(pending_order="random", seed=3), id="random-order"),
    ],
)
def test_engine_matches_simpy_reference(cluster: ClusterSettings) -> None:
    trace = generate(
        SyntheticSpec(days=0.3, seed=11, bursts_per_day=6, burst_peak_min=300, burst_peak_max=400)
    )
    # an offset no scan, arrival or duration shares, so no two events are simultaneous
    arrivals = (trace.arrival_s + 0.000123).tolist()
    durations = (trace.duration_s + 0.0000017).tolist()
    ours = simulate(arrivals, durations, cluster)
    ref = _reference().simulate_simpy(arrivals, durations, cluster)
    assert ours.start_s == pytest.approx(ref.start_s, abs=1e-9)
    assert ours.node == ref.node
    assert ours.node_created_s == ref.node_created_s
    assert ours.node_deleted_s == ref.node_deleted_s
    assert ours.horizon_s == pytest.approx(ref.horizon_s)
    assert max(s - a for s, a in zip(ours.start_s, arrivals, strict=True)) > 0  # something waited
