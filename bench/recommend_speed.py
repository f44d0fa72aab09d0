"""`eops plan recommend` speed: one whole search (the default scale-down windows 300, 600 and 1200
s, p95 target 10 s, the cluster defaults) over a trace, timed by the wall clock and by the CPU time
of this process and its worker processes, with the setting it recommends.

It runs whatever `elasticityops` is importable, so the code before a change is measured by
pointing PYTHONPATH at a checkout of it (a `git worktree` of the older commit), side by side:

    PYTHONPATH=/tmp/before/src .venv/bin/python bench/recommend_speed.py --label before
    PYTHONPATH=src .venv/bin/python bench/recommend_speed.py --label after [--workers 2]

Default trace: the shared two-day GenTD26 window scaled to ~100 GPUs (`../shared/traces/`).
Prints a line per figure and, last, one JSON document (also to --json FILE).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine_info import machine

SCALED = "gentd26_2024-12-02T12_2d_scaled100.csv"


def default_trace() -> Path | None:
    """The shared scaled window beside this checkout, or beside the main one from a worktree."""
    root = Path(__file__).resolve().parents[1]
    roots = [root]
    marker = root / ".git"
    if marker.is_file() and marker.read_text().startswith("gitdir:"):
        roots.append(Path(marker.read_text().removeprefix("gitdir:").strip()).parents[2])
    for base in roots:
        path = base.parent / "shared" / "traces" / SCALED
        if path.is_file():
            return path
    return None


def cpu_seconds() -> float:
    """User + system CPU of this process and of its children that have ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, default=None, help="planner trace CSV (default: shared window)")
    parser.add_argument("--windows", default="300,600,1200")
    parser.add_argument("--p95-wait", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=None, help="worker processes, where supported")
    parser.add_argument("--label", default="", help="name of this run in the output")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    trace_path = args.trace or default_trace()
    if trace_path is None:
        sys.exit("no --trace, and ../shared/traces/" + SCALED + " is not beside this checkout")

    import elasticityops
    from elasticityops.planner.recommend import recommend
    from elasticityops.planner.settings import ClusterSettings
    from elasticityops.planner.trace import load_trace

    trace, _ = load_trace(trace_path)
    windows = tuple(float(w) for w in args.windows.split(","))
    kwargs: dict[str, Any] = {"windows": windows}
    if args.workers is not None and "workers" in inspect.signature(recommend).parameters:
        kwargs["workers"] = args.workers
    info = machine()
    print(f"code: {Path(elasticityops.__file__).parent}")
    print(f"machine: {json.dumps(info)}")
    c0, t0 = cpu_seconds(), time.perf_counter()
    rec = recommend(trace, ClusterSettings(), args.p95_wait, **kwargs)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    chosen = rec.best or rec.closest
    s = chosen.summary
    figures = {
        "label": args.label,
        "trace": trace_path.name,
        "requests": len(trace),
        "windows": list(windows),
        "workers": kwargs.get("workers"),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "settings_simulated": len(rec.evaluated),
        "recommended": chosen.label if rec.best else None,
        "closest": rec.closest.label,
        "p95_s": s.time_to_start_s.p95,
        "cost_usd": round(s.cost_usd, 2),
        "idle_gpu_hours": round(s.idle_gpu_hours, 1),
        "peak_nodes": s.peak_nodes,
        "evaluated": [
            [c.label, round(c.summary.time_to_start_s.p95, 1), round(c.summary.cost_usd)]
            for c in rec.evaluated
        ],
        "machine": info,
        "loadavg_after": os.getloadavg(),
    }
    print(
        f"{args.label or 'run'}: {len(rec.evaluated)} settings simulated, "
        f"wall {wall:.1f} s, CPU {cpu:.1f} s; "
        f"recommended {figures['recommended']} (p95 {s.time_to_start_s.p95:.1f} s, ${s.cost_usd:,.0f}, "
        f"idle {s.idle_gpu_hours:,.0f} GPU-h, peak {s.peak_nodes:,})"
    )
    print(json.dumps(figures))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
