#!/usr/bin/env python3
"""Where a rehearsal's waits went: per bin of the replay, the p50 and p95 of each phase of the
gateway's own timeline of an invocation, read from the rehearsal gateway's SQLite store
(`eops rehearse --out DIR` keeps it in DIR/gateway-NAMESPACE/eops.db):

    dispatch       accepted -> dispatched (the gateway)
    to_node        dispatched -> capacity ready (the pod bound to a node: the wait for a node)
    node_to_start  capacity ready -> started (the container running: kwok's latency on the dev
                   cluster, a node held but not yet busy)
    wait           accepted -> started (what `eops rehearse` measures)

    .venv/bin/python bench/rehearse_phases.py DIR/gateway-NAMESPACE/eops.db [--bin 300] [--out CSV]

Bins count from the first invocation's acceptance; the CSV (or stdout) has one row per bin.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import sqlite3
import sys
from pathlib import Path
from typing import TextIO

import numpy as np

PHASES = (("dispatch", 0, 1), ("to_node", 1, 2), ("node_to_start", 2, 3), ("wait", 0, 3))
COLUMNS = "accepted_at, dispatched_at, capacity_ready_at, started_at"


def _epoch(text: str | None) -> float:
    if not text:
        return math.nan
    stamp = dt.datetime.fromisoformat(text)
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)).timestamp()


def timelines(db: Path) -> np.ndarray:
    """One row per invocation: accepted, dispatched, capacity ready, started (epoch s; NaN where
    the invocation never got there), by acceptance."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(f"SELECT {COLUMNS} FROM invocations ORDER BY accepted_at").fetchall()
    return np.array([[_epoch(v) for v in row] for row in rows], dtype=float).reshape(-1, 4)


def write_phases(times: np.ndarray, bin_s: float, out: TextIO) -> None:
    writer = csv.writer(out)
    header = ["from_s", "requests"]
    header += [f"{name}_p{q}_s" for name, _, _ in PHASES for q in (50, 95)]
    writer.writerow(header)
    since = times[:, 0] - times[0, 0]
    for lo in np.arange(0.0, float(since.max()) + bin_s, bin_s):
        rows = times[(since >= lo) & (since < lo + bin_s)]
        if not len(rows):
            continue
        cells: list[object] = [f"{lo:g}", len(rows)]
        for _, a, b in PHASES:
            spans = rows[:, b] - rows[:, a]
            spans = spans[~np.isnan(spans)]
            cells += [round(float(np.percentile(spans, q)), 1) if len(spans) else "" for q in (50, 95)]
        writer.writerow(cells)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("db", type=Path, help="the rehearsal gateway's eops.db")
    parser.add_argument("--bin", type=float, default=300.0, help="bin length in seconds")
    parser.add_argument("--out", type=Path, default=None, help="CSV to write (default stdout)")
    args = parser.parse_args()
    if not args.db.is_file():
        print(
            f"error: no {args.db}: pass DIR/gateway-NAMESPACE/eops.db of an `eops rehearse --out DIR`",
            file=sys.stderr,
        )
        return 2
    if args.bin <= 0:
        print("error: --bin must be > 0 seconds", file=sys.stderr)
        return 2
    times = timelines(args.db)
    if not len(times):
        print(f"error: {args.db} holds no invocations", file=sys.stderr)
        return 2
    if args.out is None:
        write_phases(times, args.bin, sys.stdout)
    else:
        with args.out.open("w", newline="") as f:
            write_phases(times, args.bin, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
