#!/usr/bin/env python3
"""Which empty node the scheduler gave each invocation in a rehearsal: how long that node had been
free, its rank among the free nodes by how recently each was freed (0: the most recently freed),
and how many distinct nodes took the starts. What the planner's cluster model assumes about that
pick decides which idle nodes live out their scale-down window (docs/planner.md, "Which empty
node"); this reads what the real scheduler and autoscaler did, from the rehearsal gateway's SQLite
store (`eops rehearse --out DIR` keeps it in DIR/gateway-NAMESPACE/eops.db):

    .venv/bin/python bench/rehearse_placement.py DIR/gateway-NAMESPACE/eops.db [--from 500] [--to 1300]
        [--node-list FILE]

Seconds count from the first invocation's acceptance. Only starts on a node that had run an
invocation of the rehearsal before count (a node's first job has no free time to rank).

With --node-list (the GPU nodes' names, one a line, in kube-scheduler's order: on the dev cluster
`kubectl get nodes -o name` gives it, names sorting as the zones interleave), every listed node
counts as free until its first job, and each start is also ranked by that order among the free
nodes (0: the first free node in the list): a first-fit pick gives rank 0, a random one spreads
(docs/planner.md, "Which empty node").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from pathlib import Path

from rehearsal_store import STORE_HELP, missing_store, started_invocations


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", type=Path, help=STORE_HELP)
    ap.add_argument("--from", dest="lo", type=float, default=0.0, help="first second of the window")
    ap.add_argument("--to", dest="hi", type=float, default=float("inf"), help="end of the window (s)")
    ap.add_argument("--node-list", type=Path, default=None, help="the nodes in the scheduler's order")
    args = ap.parse_args()
    if problem := missing_store(args.db):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    rows = started_invocations(args.db, on_a_node=True)
    if not rows:
        print("error: no invocation in that store ran on a node", file=sys.stderr)
        return 2
    events: list[tuple[float, int, str]] = []
    for row in rows:
        assert row.node is not None
        events.append((row.started_s, 1, row.node))
        if row.finished_s is not None:
            events.append((row.finished_s, 0, row.node))
    events.sort()
    listed: list[str] = []
    if args.node_list is not None:
        listed = [line.strip().removeprefix("node/") for line in args.node_list.read_text().splitlines()]
        listed = [n for n in listed if n]
    position = {n: k for k, n in enumerate(listed)}
    free: dict[str, float] = {n: -math.inf for n in listed}
    by_list: list[int] = []
    ages: list[float] = []
    ranks: list[tuple[int, int]] = []
    used: Counter[str] = Counter()
    for t, kind, node in events:
        if kind == 0:
            free[node] = t
            continue
        if args.lo <= t < args.hi:
            used[node] += 1
            if node in free and node in position:
                by_list.append(sorted(free, key=lambda n: position.get(n, len(position))).index(node))
            if node in free and free[node] > -math.inf:
                ages.append(t - free[node])
                order = sorted(free, key=lambda n: -free[n])
                ranks.append((order.index(node), len(order)))
        free.pop(node, None)
    if not ranks:
        print("error: no start in that window went to a node that had been freed", file=sys.stderr)
        return 2
    bins = Counter(
        "<10 s" if a < 10 else "10-30 s" if a < 30 else "30-120 s" if a < 120 else ">120 s" for a in ages
    )
    top = sum(c for _, c in used.most_common(20))
    report = {
        "window_s": [args.lo, args.hi if args.hi != float("inf") else None],
        "starts": sum(used.values()),
        "starts_on_a_freed_node": len(ranks),
        "distinct_nodes": len(used),
        "share_on_top_20_nodes": round(top / sum(used.values()), 3),
        "median_free_nodes": statistics.median(m for _, m in ranks),
        "rank_0_share": round(sum(1 for r, _ in ranks if r == 0) / len(ranks), 3),
        "rank_at_most_2_share": round(sum(1 for r, _ in ranks if r <= 2) / len(ranks), 3),
        "mean_relative_rank": round(statistics.mean(r / max(1, m - 1) for r, m in ranks), 3),
        "free_for": {k: bins[k] for k in ("<10 s", "10-30 s", "30-120 s", ">120 s")},
    }
    if listed:
        report["listed_nodes"] = len(listed)
        report["never_used_listed_nodes"] = sum(1 for n in listed if n not in used)
        report["rank_in_node_list"] = {
            "starts": len(by_list),
            "first_free_share": round(sum(1 for r in by_list if r == 0) / max(1, len(by_list)), 3),
            "among_first_6_share": round(sum(1 for r in by_list if r < 6) / max(1, len(by_list)), 3),
            "median": statistics.median(by_list) if by_list else None,
        }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
