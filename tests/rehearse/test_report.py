"""The files a rehearsal leaves: summary.json, per-policy CSVs and the two plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.trace import Trace
from elasticityops.rehearse.driver import PolicyRecord
from elasticityops.rehearse.measure import InvocationTimes, NodeSample, NodeSeen, measured_metrics
from elasticityops.rehearse.predict import predict
from elasticityops.rehearse.report import write_outputs
from elasticityops.rehearse.summary import PolicyRun, summary_payload

TRACE = Trace(np.array([0.0, 5.0, 12.0]), np.array([30.0, 20.0, 40.0]))


def _record(policy: str, failed: bool = False) -> PolicyRecord:
    invs = [
        InvocationTimes(0.0, 0.1, 2.0, 32.0, "succeeded"),
        InvocationTimes(5.0, 5.1, 40.0, 60.0, "succeeded"),
        InvocationTimes(12.0, 12.1, None, None, "pending"),
    ]
    samples = [NodeSample(float(t), (NodeSeen("a", -10.0, True),)) for t in range(0, 70, 5)]
    prediction = predict(TRACE, ClusterSettings(baseline=1, min_billed_s=0.0), "none")
    run = PolicyRun(
        policy,
        f"ns-{policy}",
        None if failed else measured_metrics(invs, samples, 65.0),
        prediction.metrics,
        error="GatewayFailed: exited 2" if failed else "",
    )
    return PolicyRecord(run, [] if failed else invs, [] if failed else samples, prediction)


def test_outputs_are_written(tmp_path: Path) -> None:
    records = [_record("none"), _record("warm:2", failed=True)]
    payload = summary_payload(
        [r.run for r in records], trace={"requests": 3}, cluster={}, planner_settings={}, notes=[]
    )
    written = write_outputs(tmp_path, records, payload)
    names = {p.name for p in written}
    assert names == {
        "summary.json",
        "invocations-none.csv",
        "invocations-warm_2.csv",
        "series-none.csv",
        "predicted-series-none.csv",
        "predicted-series-warm_2.csv",
        "wait_cdf.png",
        "nodes_vs_demand.png",
    }
    series = list(csv.DictReader((tmp_path / "series-none.csv").open()))
    assert len(series) == 14
    assert {r["gpu_nodes"] for r in series} == {"1"}
    # Accepted at 0.1, 5.1 and 12.1 s: at 0, 5, 10 and 15 s.
    assert [r["demand"] for r in series[:4]] == ["0", "1", "2", "3"]
    for png in ("wait_cdf.png", "nodes_vs_demand.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((tmp_path / "invocations-none.csv").open()))
    assert [r["wait_s"] for r in rows] == ["1.900", "34.900", ""]
    assert rows[2]["state"] == "pending"
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["policies"][0]["measured"]["busy_gpu_s"] == 30.0 + 20.0
