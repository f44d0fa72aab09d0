"""What a rehearsal measured, from plain records (pure, no I/O).

Times are seconds since the replay began. An invocation's time to start is `started -
accepted` (the gateway's own timeline); its GPU was busy from `started` to `finished`. GPU
node-seconds come from node samples: a node counts from its creation (the scale-up, when
billing starts) to the midpoint between the last sample that saw it and the first that did
not, both clipped to the measured window; idle is node-seconds less busy.

The measured window runs from `start_s` (0, or the end of a warm-up whose requests are replayed
but not counted) to the last invocation's end; the prediction (predict.py) uses the same one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InvocationTimes:
    """One invocation's milestones (seconds since the replay began; None until reached)."""

    arrival_s: float  # the trace's offset, when it was meant to be sent
    accepted_s: float | None
    started_s: float | None
    finished_s: float | None
    state: str = ""

    @property
    def wait_s(self) -> float | None:
        if self.accepted_s is None or self.started_s is None:
            return None
        return max(0.0, self.started_s - self.accepted_s)


@dataclass(frozen=True)
class NodeSeen:
    name: str
    created_s: float  # creationTimestamp, seconds since the replay began
    ready: bool  # Ready and its GPU allocatable


@dataclass(frozen=True)
class NodeSample:
    t_s: float
    nodes: tuple[NodeSeen, ...]


@dataclass(frozen=True)
class Series:
    """Samples over the run: GPU nodes (all, and ready) and demand (running + waiting)."""

    t_s: tuple[float, ...]
    nodes: tuple[int, ...]
    ready: tuple[int, ...]
    demand: tuple[int, ...]


@dataclass(frozen=True)
class Metrics:
    """The numbers compared between measured and predicted: seconds, and nodes."""

    p50_wait_s: float
    p95_wait_s: float
    p99_wait_s: float
    idle_gpu_s: float
    busy_gpu_s: float
    peak_nodes: int


METRIC_NAMES = ("p50_wait_s", "p95_wait_s", "p99_wait_s", "idle_gpu_s", "busy_gpu_s", "peak_nodes")


def wait_percentiles(waits: Sequence[float]) -> tuple[float, float, float]:
    """p50, p95, p99 (numpy's linear interpolation, as the planner's summary); zeros if empty."""
    if not waits:
        return 0.0, 0.0, 0.0
    p50, p95, p99 = (float(x) for x in np.percentile(np.asarray(waits, dtype=np.float64), [50, 95, 99]))
    return p50, p95, p99


def busy_gpu_s(invocations: Sequence[InvocationTimes], end_s: float, start_s: float = 0.0) -> float:
    """Sum of run intervals (one GPU each) within [start_s, end_s]; one still running counts
    until `end_s`."""
    total = 0.0
    for inv in invocations:
        if inv.started_s is None:
            continue
        stop = inv.finished_s if inv.finished_s is not None else end_s
        total += max(0.0, min(stop, end_s) - max(inv.started_s, start_s))
    return total


def node_seconds(samples: Sequence[NodeSample], start_s: float, end_s: float) -> float:
    """GPU node-seconds within [start_s, end_s] from periodic samples (see the module doc)."""
    ordered = sorted(samples, key=lambda s: s.t_s)
    created: dict[str, float] = {}
    gone: dict[str, float] = {}
    previous: set[str] = set()
    previous_t = start_s
    for sample in ordered:
        present = {n.name for n in sample.nodes}
        for node in sample.nodes:
            created.setdefault(node.name, node.created_s)
            gone.pop(node.name, None)  # a name seen again (re-created) is alive again
        for name in previous - present:
            gone[name] = (previous_t + sample.t_s) / 2
        previous, previous_t = present, sample.t_s
    total = 0.0
    for name, born in created.items():
        stop = gone.get(name, end_s)
        total += max(0.0, min(stop, end_s) - max(born, start_s))
    return total


def peak_nodes(samples: Sequence[NodeSample], start_s: float = -math.inf) -> int:
    return max((len(s.nodes) for s in samples if s.t_s >= start_s), default=0)


def demand_at(invocations: Sequence[InvocationTimes], t_s: float) -> int:
    """Invocations accepted and not yet finished at `t_s` (running or waiting)."""
    return sum(
        1
        for inv in invocations
        if inv.accepted_s is not None
        and inv.accepted_s <= t_s
        and (inv.finished_s is None or inv.finished_s > t_s)
    )


def series(invocations: Sequence[InvocationTimes], samples: Sequence[NodeSample]) -> Series:
    ordered = sorted(samples, key=lambda s: s.t_s)
    accepted = np.sort([i.accepted_s for i in invocations if i.accepted_s is not None])
    live = [i for i in invocations if i.accepted_s is not None]
    finished = np.sort([math.inf if i.finished_s is None else i.finished_s for i in live])
    t = np.asarray([s.t_s for s in ordered], dtype=np.float64)
    # Same count as demand_at, for every sample at once.
    demand = np.searchsorted(accepted, t, side="right") - np.searchsorted(finished, t, side="right")
    return Series(
        t_s=tuple(float(x) for x in t),
        nodes=tuple(len(s.nodes) for s in ordered),
        ready=tuple(sum(1 for n in s.nodes if n.ready) for s in ordered),
        demand=tuple(int(x) for x in demand),
    )


def measured_metrics(
    invocations: Sequence[InvocationTimes],
    samples: Sequence[NodeSample],
    end_s: float,
    start_s: float = 0.0,
) -> Metrics:
    """The measured row of one policy over [start_s, end_s]: the waits of the requests that
    arrived in it, the GPU time spent in it, the most nodes sampled in it."""
    waits = [w for w in (i.wait_s for i in invocations if i.arrival_s >= start_s) if w is not None]
    p50, p95, p99 = wait_percentiles(waits)
    busy = busy_gpu_s(invocations, end_s, start_s)
    billed = node_seconds(samples, start_s, end_s)
    return Metrics(p50, p95, p99, max(0.0, billed - busy), busy, peak_nodes(samples, start_s))


def run_end_s(invocations: Sequence[InvocationTimes], deadline_s: float) -> float:
    """Where the measured window ends: the last invocation's end when all ended, else the
    deadline the driver gave up at."""
    if invocations and all(i.finished_s is not None for i in invocations):
        return max(float(i.finished_s or 0.0) for i in invocations)
    return deadline_s
