"""`eops rehearse` end to end on the dev cluster (real autoscaler, 10 s node boots): a 1-minute
trace of 10 requests under `none`, through a real `eops serve --backend kubernetes`. About 1.5
minutes: the trace itself, the drain and the namespace's deletion."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers.server import EOPS, REPO, base_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("nodes")]

ARRIVALS = [0.0, 4.0, 7.5, 15.5, 22.0, 29.0, 35.0, 41.5, 50.5, 59.0]
DURATIONS = [6.0, 10.0, 4.0, 7.5, 5.0, 9.0, 4.5, 7.0, 5.5, 8.0]


def test_rehearse_none_measures_and_predicts_and_cleans_up(dev_cluster: Any, tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "arrival_s,duration_s\n" + "".join(f"{a},{d}\n" for a, d in zip(ARRIVALS, DURATIONS, strict=True))
    )
    out = tmp_path / "out"
    prefix = f"rh-{secrets.token_hex(2)}"
    with dev_cluster.knobs(provision_delay="fixed:10", driver_delay="fixed:0"):
        done = subprocess.run(
            [
                EOPS,
                "rehearse",
                "--state-dir",
                str(dev_cluster.state_dir),
                "--trace",
                str(trace),
                "--out",
                str(out),
                "--headroom",
                "none",
                "--namespace-prefix",
                prefix,
                "--sample-interval",
                "2",
                "--settle-timeout",
                "60",
                "--drain-timeout",
                "60",
            ],
            capture_output=True,
            text=True,
            env=base_env(),
            cwd=REPO,
            timeout=300,
            check=False,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    (run,) = summary["policies"]
    measured, predicted = run["measured"], run["predicted"]
    assert run["send_failures"] == 0
    assert run["not_started"] == 0
    assert run["not_finished"] == 0
    # kwok runs each pod its annotated time plus under a second.
    assert measured["busy_gpu_s"] == pytest.approx(sum(DURATIONS), abs=len(DURATIONS) * 2.0)
    assert predicted["busy_gpu_s"] == pytest.approx(sum(DURATIONS))
    assert 0 <= measured["p50_wait_s"] <= measured["p95_wait_s"] <= measured["p99_wait_s"] < 120
    baseline = dev_cluster.autoscaler_settings.baseline
    assert measured["peak_nodes"] >= baseline
    assert predicted["peak_nodes"] >= baseline
    # The baseline nodes alone are up the whole window: idle is what they and any new node
    # held beyond the busy time.
    start, window = run["measured_window_s"]
    assert start == 0
    assert window >= ARRIVALS[-1] + DURATIONS[-1]
    # (less the measured busy time: kwok runs each pod up to a second past its annotation; and
    # node time is sampled every 2 s, so up to a sample per node may be missed at the edges)
    assert measured["idle_gpu_s"] >= baseline * window - measured["busy_gpu_s"] - 2 * 2 * baseline
    assert set(run["difference"]) == set(measured)
    assert summary["cluster"]["autoscaler"]["provision_delay"] == "fixed:10"
    assert (out / "wait_cdf.png").is_file()
    assert (out / "nodes_vs_demand.png").is_file()
    assert run["namespace_deleted"] is True
    with dev_cluster.api() as api:
        namespaces, _ = api.list("/api/v1/namespaces")
    assert not [n for n in namespaces if n["metadata"]["name"].startswith(prefix)]
