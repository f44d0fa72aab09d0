"""summary.json's shape and the relative differences."""

from __future__ import annotations

import json

import numpy as np
import pytest

from elasticityops.planner.trace import Trace
from elasticityops.rehearse.measure import METRIC_NAMES, Metrics
from elasticityops.rehearse.summary import (
    PolicyRun,
    describe_trace,
    difference,
    relative_difference,
    summary_payload,
    table_cells,
)

MEASURED = Metrics(2.0, 40.0, 60.0, 1000.0, 4000.0, 12)
PREDICTED = Metrics(1.0, 46.0, 60.0, 850.0, 4000.0, 15)


@pytest.mark.parametrize(
    ("measured", "predicted", "want"),
    [(10.0, 11.5, 0.15), (10.0, 8.0, -0.2), (0.0, 0.0, 0.0), (0.0, 3.0, None)],
    ids=["over", "under", "both-zero", "measured-zero"],
)
def test_relative_difference(measured: float, predicted: float, want: float | None) -> None:
    got = relative_difference(measured, predicted)
    assert got == (None if want is None else pytest.approx(want))


def test_difference_has_every_metric() -> None:
    diff = difference(MEASURED, PREDICTED)
    assert set(diff) == set(METRIC_NAMES)
    assert diff["p95_wait_s"] == pytest.approx(0.15)
    assert diff["idle_gpu_s"] == pytest.approx(-0.15)
    assert diff["peak_nodes"] == pytest.approx(0.25)


def test_summary_payload_is_json_with_measured_predicted_and_difference() -> None:
    trace = Trace(np.array([0.0, 10.0]), np.array([30.0, 60.0]), ("a", "a"))
    runs = [
        PolicyRun("none", "rehearse-none-abc", MEASURED, PREDICTED, requests=2),
        PolicyRun("warm:3", "rehearse-warm-3-def", None, PREDICTED, error="GatewayFailed: exited 2"),
    ]
    payload = summary_payload(
        runs,
        trace=describe_trace(trace, "t.csv"),
        cluster={"where": "dev cluster"},
        planner_settings={"baseline": 2},
        notes=["n"],
    )
    data = json.loads(json.dumps(payload))
    first, second = data["policies"]
    for part in ("measured", "predicted"):
        assert set(first[part]) == set(METRIC_NAMES)
    assert first["difference"]["p95_wait_s"] == pytest.approx(0.15)
    assert second["measured"] is None
    assert second["difference"] is None
    assert second["error"].startswith("GatewayFailed")
    assert data["trace"]["requests"] == 2
    assert data["trace"]["last_end_s"] == 70.0
    assert data["trace"]["busy_gpu_s"] == 90.0
    assert data["cluster"] == {"where": "dev cluster"}


def test_table_cells_show_dashes_where_nothing_was_measured() -> None:
    cells = table_cells(PolicyRun("x", "ns", None, PREDICTED))
    assert cells[1] == ("p95 wait (s)", "-", "46.0", "-")
    cells = table_cells(PolicyRun("x", "ns", MEASURED, PREDICTED))
    assert cells[1] == ("p95 wait (s)", "40.0", "46.0", "+15%")
