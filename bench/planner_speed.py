"""Planner speed: simulated requests per second of wall time, on one core.

Replays the same synthetic 30-day trace (diurnal 60-180 concurrent jobs, bursts to 3,000-4,000)
through the planner's engine and through a plain SimPy implementation of the same model
(bench/planner_simpy.py), side by side in one process pinned to one CPU, and checks that both give
the same start times. Usage:

    .venv/bin/python bench/planner_speed.py [--days 30] [--repeat 3] [--skip-simpy]

End to end, as users run it (issue 42's measure: `eops plan run --no-plots --baseline 60
--max-nodes 4500` on an 8-day synthetic trace, ~310,000 requests), each run a fresh process with
the package that PYTHONPATH names, so that two checkouts compare side by side:

    PYTHONPATH=src .venv/bin/python bench/planner_speed.py --plan-run 5
    PYTHONPATH=/path/to/old/checkout/src .venv/bin/python bench/planner_speed.py --plan-run 5
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from elasticityops.planner.model import simulate
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.synthetic import SyntheticSpec, concurrency_profile, generate
from machine_info import cpu_model, memory_gib
from planner_simpy import simulate_simpy


def machine() -> dict[str, str]:
    cpu = cpu_model() or "unknown"
    gib = memory_gib()
    mem = "unknown" if gib is None else f"{gib:.1f} GiB"
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "memory": mem, "python": platform.python_version()}


def timed(fn, *args):  # type: ignore[no-untyped-def]
    """(result, wall seconds, CPU seconds of this process)."""
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0, time.process_time() - c0


def waits(arrivals: list[float], starts: list[float]) -> str:
    w = np.asarray(starts) - np.asarray(arrivals)
    p50, p95, p99 = np.percentile(w, [50, 95, 99])
    return f"wait p50 {p50:.1f} s, p95 {p95:.1f} s, p99 {p99:.1f} s, mean {w.mean():.2f} s"


def plan_run(runs: int, days: float, seed: int) -> dict[str, object]:
    """`eops plan run --no-plots` over a synthetic trace, `runs` fresh processes: wall and CPU
    (user + system) of each, start-up and imports included, as a user waits for it."""
    code = "import sys; from elasticityops.cli.main import main; sys.argv[0] = 'eops'; main()"
    cmd = [sys.executable, "-c", code]
    with tempfile.TemporaryDirectory(prefix="eops-plan-speed-") as tmp:
        trace = Path(tmp) / "trace.csv"
        made = subprocess.run(
            [*cmd, "plan", "trace", "--days", str(days), "--seed", str(seed), "--out", str(trace)],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            sys.exit(f"eops plan trace failed (is PYTHONPATH a checkout's src?): {made.stderr.strip()}")
        requests = sum(1 for _ in trace.open()) - 1
        run = [*cmd, "plan", "run", "--trace", str(trace), "--no-plots", "--baseline", "60"]
        run += ["--max-nodes", "4500", "--out", str(Path(tmp) / "out")]
        walls: list[float] = []
        cpus: list[float] = []
        for _ in range(runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            done = subprocess.run(run, capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if done.returncode != 0:
                sys.exit(f"eops plan run failed: {done.stderr.strip()}")
        summary = json.loads((Path(tmp) / "out" / "summary.json").read_text())
    import elasticityops

    return {
        "package": str(Path(elasticityops.__file__).resolve().parent),
        "requests": requests,
        "wall_s": walls,
        "cpu_s": cpus,
        "wall_s_median": statistics.median(walls),
        "cpu_s_median": statistics.median(cpus),
        "p95_wait_s": summary["time_to_start_s"]["p95"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--days", type=float, default=None, help="trace length (default 30; 8 with --plan-run)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="engine runs (best and median reported)")
    parser.add_argument("--skip-simpy", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--plan-run",
        type=int,
        default=0,
        metavar="RUNS",
        help="instead: time `eops plan run --no-plots` end to end, RUNS fresh processes (--days 8 "
        "is the issue's trace)",
    )
    args = parser.parse_args()
    if args.plan_run:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        days = args.days if args.days is not None else 8.0
        figures = {
            "machine": machine(),
            "load_average_at_start": load,
            **plan_run(args.plan_run, days, args.seed),
        }
        print(json.dumps(figures))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        return
    if args.days is None:
        args.days = 30.0
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average at start: {load:.2f} (other work on the machine inflates wall time)")
    trace = generate(SyntheticSpec(days=args.days, seed=args.seed))
    _, conc = concurrency_profile(trace)
    arrivals, durations = trace.arrival_s.tolist(), trace.duration_s.tolist()
    settings = ClusterSettings()  # policy none, published defaults, lognormal provisioning
    n = len(arrivals)
    print(f"trace: {n:,} requests over {args.days:g} days, peak concurrency {int(conc.max()):,}")

    engine_times = []
    engine_cpu = []
    for _ in range(args.repeat):
        result, seconds, cpu_s = timed(simulate, arrivals, durations, settings)
        engine_times.append(seconds)
        engine_cpu.append(cpu_s)
    best, median = min(engine_times), statistics.median(engine_times)
    print(
        f"engine: wall best {best:.2f} s, median {median:.2f} s, CPU best {min(engine_cpu):.2f} s "
        f"-> {n / best:,.0f} requests/s (best wall)"
    )
    print(f"        {waits(arrivals, result.start_s)}; billed {result.billed_node_s(60) / 3600:,.0f} node-h")
    figures = {
        "machine": machine(),
        "requests": n,
        "days": args.days,
        "engine_s_best": best,
        "engine_s_median": median,
        "engine_requests_per_s": n / best,
        "engine_requests_per_s_median": n / median,
        "engine_cpu_s_best": min(engine_cpu),
        "load_average_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "peak_nodes": result.peak_nodes,
    }
    if not args.skip_simpy:
        ref, simpy_s, simpy_cpu = timed(simulate_simpy, arrivals, durations, settings)
        diff = float(np.max(np.abs(np.asarray(ref.start_s) - np.asarray(result.start_s))))
        same_nodes = (
            ref.node_created_s == result.node_created_s and ref.node_deleted_s == result.node_deleted_s
        )
        print(f"simpy:  wall {simpy_s:.2f} s, CPU {simpy_cpu:.2f} s -> {n / simpy_s:,.0f} requests/s")
        print(f"        {waits(arrivals, ref.start_s)}")
        print(
            f"speed-up (engine median vs simpy): {simpy_s / median:.1f}x; "
            f"max start-time difference {diff:.3g} s; node lifetimes identical: {same_nodes}"
        )
        figures.update(
            {
                "simpy_s": simpy_s,
                "simpy_cpu_s": simpy_cpu,
                "simpy_requests_per_s": n / simpy_s,
                "speedup_median": simpy_s / median,
                "max_start_diff_s": diff,
                "node_lifetimes_identical": same_nodes,
            }
        )
    print(json.dumps(figures["machine"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
