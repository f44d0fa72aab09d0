"""`eops rehearse`'s own knobs, each declared once (elasticityops/knobs.py): flags over their
variables over these defaults. The policies (--headroom, repeatable) are the command's own."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from elasticityops.knobs import knob

DEFAULT_DEV_CLUSTER_DIR = "~/.local/state/elasticityops/dev-cluster"
"""Where `eops dev-cluster up` keeps its state unless EOPS_DEV_CLUSTER_DIR says otherwise."""


def dev_cluster_dir() -> Path:
    return Path(os.environ.get("EOPS_DEV_CLUSTER_DIR") or DEFAULT_DEV_CLUSTER_DIR).expanduser()


@dataclass(frozen=True)
class RehearseOptions:
    trace: Path | None = knob(
        None,
        unit="file",
        shown="none, required",
        help="Trace CSV in the planner's format: arrival_s,duration_s[,function,gpu_type,priority].",
    )
    out: Path | None = knob(
        None,
        metavar="DIR",
        shown="none, required",
        help="Directory for summary.json, per-invocation CSVs, plots and the gateways' logs and data.",
    )
    kubeconfig: Path | None = knob(
        None,
        unit="file",
        shown="the running dev cluster's",
        help="Kubeconfig of the cluster to rehearse on (its admin rights: namespaces, nodes).",
    )
    state_dir: Path | None = knob(
        None,
        env="EOPS_DEV_CLUSTER_DIR",
        flag="state-dir",
        unit="dir",
        shown=DEFAULT_DEV_CLUSTER_DIR,
        help="State dir of the dev cluster to use when no --kubeconfig is given.",
    )
    warmup: float = knob(
        0.0,
        unit="seconds",
        ge=0,
        le=86_400,
        help="Requests arriving this early in the trace are replayed but neither measured nor "
        "predicted, and GPU time counts from then on: the cluster fills up first, as a live "
        "one has.",
    )
    measure_until: str = knob(
        "last-end",
        choices=("last-end", "last-arrival"),
        help="End of the measured (and predicted) window: the last invocation's end, or the "
        "trace's last arrival, which leaves out the tail where the load drains away and idle "
        "nodes wait out their scale-down.",
    )
    namespace_prefix: str = knob(
        "rehearse", help="Start of each policy's namespace name (made for the run, deleted after it)."
    )
    max_in_flight: int = knob(
        64, unit="requests", ge=1, le=100_000, help="Most invoke calls in flight at once."
    )
    sample_interval: float = knob(
        5.0, unit="seconds", gt=0, le=3600, help="How often the cluster's GPU nodes are listed during a run."
    )
    drain_timeout: float = knob(
        1800.0,
        unit="seconds",
        gt=0,
        le=604_800,
        help="How long past the trace's last planned end (arrival + duration) to wait for every "
        "invocation to end; the rest count as not finished.",
    )
    settle_timeout: float = knob(
        1800.0,
        unit="seconds",
        ge=0,
        le=604_800,
        help="Before each policy, wait this long at most for the cluster to scale back to its "
        "baseline GPU nodes, so no run inherits another's warm nodes (the summary says how long).",
    )
    ready_timeout: float = knob(
        120.0, unit="seconds", gt=0, le=86_400, help="How long each gateway may take to start serving."
    )
