"""bench/rehearse_prediction_spread.py against the kept evidence of a rehearsal: it predicts the
run again (its own settings give its recorded prediction) and under other seeds and orders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = ROOT / "docs" / "evidence" / "rehearse-real-2026-12-07"


def _spread(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rehearse_prediction_spread.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        cwd=tmp_path,
        check=False,
    )


@pytest.mark.slow
def test_the_none_run_is_predicted_again_and_under_other_seeds(tmp_path: Path) -> None:
    out = tmp_path / "spread.json"
    done = _spread(
        tmp_path,
        str(EVIDENCE / "none" / "summary.json"),
        str(EVIDENCE / "trace.csv"),
        "--seeds",
        "2",
        "--orders",
        "newest-first",
        "--json-out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    # today's planner still makes the recorded prediction from the run's own settings
    assert "does not come out again" not in done.stderr
    assert "none: measured p95 14.3 s" in done.stdout
    figures = json.loads(out.read_text())
    p95 = figures["orders"]["newest-first"]["p95_wait_s"]
    assert figures["orders"]["newest-first"]["seeds"] == 2
    assert 0.0 < p95["p10"] <= p95["median"] <= p95["p90"] < 60.0


def test_a_missing_file_or_an_unknown_order_is_refused_by_name(tmp_path: Path) -> None:
    missing = _spread(tmp_path, str(tmp_path / "summary.json"), str(EVIDENCE / "trace.csv"))
    assert missing.returncode == 2
    assert "summary.json not found" in missing.stderr
    unknown = _spread(
        tmp_path, str(EVIDENCE / "none" / "summary.json"), str(EVIDENCE / "trace.csv"), "--orders", "lifo"
    )
    assert unknown.returncode == 2
    assert "--orders: unknown ['lifo']" in unknown.stderr


def test_a_summary_of_several_policies_needs_one_named(tmp_path: Path) -> None:
    run = json.loads((EVIDENCE / "none" / "summary.json").read_text())
    run["policies"].append({**run["policies"][0], "policy": "warm:2"})
    both = tmp_path / "summary.json"
    both.write_text(json.dumps(run))
    refused = _spread(tmp_path, str(both), str(EVIDENCE / "trace.csv"))
    assert refused.returncode == 2
    assert "--policy: name one of none, warm:2" in refused.stderr
