"""summary.json of a rehearsal: per policy `measured`, `predicted` and their `difference`, the
cluster settings and the trace (pure: plain data in, a JSON-ready dict out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from elasticityops.planner.trace import Trace
from elasticityops.rehearse.measure import METRIC_NAMES, Metrics


@dataclass(frozen=True)
class PolicyRun:
    """One policy's outcome; `measured` None when the run failed (`error` says why), `predicted`
    None when the planner cannot model it (`prediction_note` says why)."""

    policy: str
    namespace: str
    measured: Metrics | None
    predicted: Metrics | None
    error: str = ""
    prediction_note: str = ""
    requests: int = 0
    send_failures: int = 0
    not_started: int = 0
    not_finished: int = 0
    late_sends: int = 0  # sent more than a second after their arrival offset
    settle_s: float = 0.0  # waited before it for the cluster to return to its baseline
    settled: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def relative_difference(measured: float, predicted: float) -> float | None:
    """(predicted - measured) / measured; 0 when both are 0, None when only measured is."""
    if measured == 0:
        return 0.0 if predicted == 0 else None
    return (predicted - measured) / abs(measured)


def difference(measured: Metrics, predicted: Metrics) -> dict[str, float | None]:
    return {
        name: relative_difference(float(getattr(measured, name)), float(getattr(predicted, name)))
        for name in METRIC_NAMES
    }


def describe_trace(trace: Trace, path: str, warmup_s: float = 0.0) -> dict[str, Any]:
    ends = trace.arrival_s + trace.duration_s
    functions = sorted(set(trace.function)) if trace.function else []
    return {
        "path": path,
        "requests": len(trace),
        "warmup_s": warmup_s,
        "measured_requests": int(np.count_nonzero(trace.arrival_s >= warmup_s)),
        "span_s": trace.span_s,
        "last_end_s": float(ends.max()) if len(trace) else 0.0,
        "mean_duration_s": float(np.mean(trace.duration_s)) if len(trace) else 0.0,
        "busy_gpu_s": float(np.sum(trace.duration_s)),
        "functions": functions,
    }


def policy_dict(run: PolicyRun) -> dict[str, Any]:
    out: dict[str, Any] = {
        "policy": run.policy,
        "namespace": run.namespace,
        "measured": asdict(run.measured) if run.measured else None,
        "predicted": asdict(run.predicted) if run.predicted else None,
        "difference": difference(run.measured, run.predicted) if run.measured and run.predicted else None,
        "requests": run.requests,
        "send_failures": run.send_failures,
        "not_started": run.not_started,
        "not_finished": run.not_finished,
        "late_sends": run.late_sends,
        "settle_s": run.settle_s,
        "settled": run.settled,
    }
    if run.error:
        out["error"] = run.error
    if run.prediction_note:
        out["prediction_note"] = run.prediction_note
    out.update(run.extra)
    return out


def summary_payload(
    runs: Sequence[PolicyRun],
    *,
    trace: dict[str, Any],
    cluster: dict[str, Any],
    planner_settings: dict[str, Any],
    notes: Sequence[str],
) -> dict[str, Any]:
    """Everything summary.json holds; `difference` is relative, (predicted - measured) / measured."""
    return {
        "policies": [policy_dict(r) for r in runs],
        "trace": trace,
        "cluster": cluster,
        "planner_settings": planner_settings,
        "notes": list(notes),
    }


TABLE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("p50 wait (s)", "p50_wait_s", "{:.1f}"),
    ("p95 wait (s)", "p95_wait_s", "{:.1f}"),
    ("p99 wait (s)", "p99_wait_s", "{:.1f}"),
    ("idle GPU-s", "idle_gpu_s", "{:,.0f}"),
    ("busy GPU-s", "busy_gpu_s", "{:,.0f}"),
    ("peak nodes", "peak_nodes", "{:,}"),
)


def table_cells(run: PolicyRun) -> list[tuple[str, str, str, str]]:
    """(metric, measured, predicted, difference) per row, as text; a dash where there is none."""
    diff = difference(run.measured, run.predicted) if run.measured and run.predicted else {}
    cells = []
    for label, name, fmt in TABLE_ROWS:
        m = fmt.format(getattr(run.measured, name)) if run.measured else "-"
        p = fmt.format(getattr(run.predicted, name)) if run.predicted else "-"
        d = diff.get(name)
        cells.append((label, m, p, "-" if d is None else f"{100 * d:+.0f}%"))
    return cells
