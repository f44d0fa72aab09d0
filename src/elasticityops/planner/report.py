"""Files out: summary.json, invocations.csv, PNG plots and a self-contained HTML report."""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from elasticityops.planner.model.result import SimResult
from elasticityops.planner.summary import Summary
from elasticityops.planner.trace import Trace


def write_json(path: Path, payload: dict[str, Any]) -> Path:
    path.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    return path


def write_invocations(path: Path, trace: Trace, result: SimResult) -> Path:
    """One row per request: arrival_s,start_s,end_s,wait_s,node,restarts (seconds, ms precision)."""
    start = np.asarray(result.start_s)
    rows = zip(
        trace.arrival_s.tolist(),
        start.tolist(),
        result.end_s,
        (start - trace.arrival_s).tolist(),
        result.node,
        result.restarts,
        strict=True,
    )
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("arrival_s,start_s,end_s,wait_s,node,restarts\n")
        out.writelines(f"{a:.3f},{s:.3f},{e:.3f},{w:.3f},{n},{k}\n" for a, s, e, w, n, k in rows)
    return path


def safe_name(policy: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in policy)


_ROWS: list[tuple[str, Callable[[Summary], str]]] = [
    ("p50 wait (s)", lambda s: f"{s.time_to_start_s.p50:.1f}"),
    ("p95 wait (s)", lambda s: f"{s.time_to_start_s.p95:.1f}"),
    ("p99 wait (s)", lambda s: f"{s.time_to_start_s.p99:.1f}"),
    ("max wait (s)", lambda s: f"{s.time_to_start_s.max:.1f}"),
    ("mean wait (s)", lambda s: f"{s.time_to_start_s.mean:.1f}"),
    ("waited for a node", lambda s: f"{100 * s.waited_share:.1f}%"),
    ("node-hours billed", lambda s: f"{s.node_hours_billed:,.0f}"),
    ("busy GPU-hours", lambda s: f"{s.busy_gpu_hours:,.0f}"),
    ("idle GPU-hours", lambda s: f"{s.idle_gpu_hours:,.0f}"),
    ("cost (USD)", lambda s: f"{s.cost_usd:,.0f}"),
    ("peak nodes", lambda s: f"{s.peak_nodes:,}"),
    ("quota hits", lambda s: f"{s.quota_hits:,}"),
]


def table_rows(summaries: Sequence[Summary]) -> list[tuple[str, list[str]]]:
    """(metric, one cell per policy), shared by the console table and the HTML report."""
    return [(label, [fmt(s) for s in summaries]) for label, fmt in _ROWS]


def write_html(
    path: Path, title: str, summaries: Sequence[Summary], images: Sequence[Path], notes: Sequence[str] = ()
) -> Path:
    """A single HTML file with the table and the PNGs embedded as base64 data URIs."""
    head = "".join(f"<th>{html.escape(s.policy)}</th>" for s in summaries)
    body = "".join(
        f"<tr><td>{html.escape(label)}</td>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        for label, cells in table_rows(summaries)
    )
    figures = "".join(
        f'<figure><img alt="{html.escape(p.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode("ascii")}"/></figure>'
        for p in images
    )
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}
td:first-child{{text-align:left}}img{{max-width:100%}}</style></head>
<body><h1>{html.escape(title)}</h1>
<table><tr><th>metric</th>{head}</tr>{body}</table>
<ul>{items}</ul>{figures}</body></html>
"""
    path.write_text(page, encoding="utf-8")
    return path
