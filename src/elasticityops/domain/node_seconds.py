"""Where an invocation's node-seconds went: the attribution rules, pure, over plain times.

An attempt holds a node (a Kubernetes node, or a local GPU slot) from the moment the node was
made for it (or picked from warm capacity) to its pod's end; the node then sits idle until it is
reused or removed, and that idle time is charged to the attempt that last used it. Warm capacity
no invocation used is a bucket of its own. Every second of a node is in exactly one phase:

    node created / warm pick -> capacity_ready : provisioning     (0 for a warm pick)
    capacity_ready           -> started        : idle_before_start (image pull, container start)
    started                  -> ended          : run
    ended                    -> reuse / removal: idle_after
    headroom never used                        : warm_unused
    the attempt's work run once more elsewhere : run_again

`run_again` is MultiKueue's: the manager took the work back from a worker (lost, or whose Kueue
evicted it) and dispatched the same attempt of its one Job to another, and the first worker's
pod had begun to run too. The record's run is charged as `run` (from its first start, in
whichever worker, to its end); what the runs held of their own nodes beyond that, each from its
container's start to its end, as `run_again` (run_again_charge), never hidden in `run`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, State
from elasticityops.pricing.table import Capacity

# What a cost report may group by (any of them, or none: one total). `capacity`: what the node
# time was priced as (spot, on-demand, local), so a report says how much of it was spot.
GROUPINGS = ("function", "hour", "capacity", "cluster")


class Phase(StrEnum):
    provisioning = "provisioning"
    idle_before_start = "idle_before_start"
    run = "run"
    idle_after = "idle_after"
    warm_unused = "warm_unused"
    run_again = "run_again"


@dataclass(frozen=True)
class Span:
    phase: Phase
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds())


@dataclass(frozen=True)
class AttemptTimes:
    """What the edges observed of one attempt on its node. `node_since`: when the node was
    created for it, or the moment it was picked from warm capacity (`warm`); None where the
    capacity needs no making (a local slot), so it is held from `capacity_ready`. `ended`:
    None while it still runs (the spans then run to `now`). `capacity`: what its node is
    priced as; None where the backend does not tell (see Charge.capacity)."""

    capacity_ready: datetime | None
    started: datetime | None
    ended: datetime | None
    node_since: datetime | None = None
    warm: bool = False
    capacity: Capacity | None = None


def attempt_spans(times: AttemptTimes, now: datetime) -> list[Span]:
    """The attempt's node time up to its end (or `now`), phase by phase; empty when it never
    held capacity (cancelled in the queue). Times out of order (a cluster's clock is not the
    gateway's) are clamped so spans never overlap or run backwards."""
    if times.capacity_ready is None:
        return []
    end = times.ended or now
    ready = min(times.capacity_ready, end)
    spans: list[Span] = []
    if times.node_since is not None and not times.warm:
        spans.append(Span(Phase.provisioning, min(times.node_since, ready), ready))
    started = None if times.started is None else min(max(times.started, ready), end)
    spans.append(Span(Phase.idle_before_start, ready, started or end))
    if started is not None:
        spans.append(Span(Phase.run, started, end))
    return [s for s in spans if s.seconds > 0]


def idle_after_span(ended: datetime, next_use_or_removal: datetime) -> Span | None:
    """The node's idle time between an attempt's end and its next use or its removal."""
    span = Span(Phase.idle_after, ended, max(ended, next_use_or_removal))
    return span if span.seconds > 0 else None


def warm_unused_span(since: datetime, until: datetime) -> Span | None:
    """Warm capacity held from `since` until `until` (removed, or the end of the sample) that
    no invocation used."""
    span = Span(Phase.warm_unused, since, max(since, until))
    return span if span.seconds > 0 else None


@dataclass(frozen=True)
class WorkerRun:
    """One run of an attempt in MultiKueue's `worker`, over: its container's start and end (or
    the moment its pod's deletion was asked), as the worker's pod says, and its node's capacity
    where known (None: the backend's)."""

    worker: str
    started: datetime
    ended: datetime
    capacity: Capacity | None = None

    @property
    def seconds(self) -> float:
        return max(0.0, (self.ended - self.started).total_seconds())


RUN_AGAIN_NOISE_S = 1.0
"""Below this, what the runs held beyond the record's run is the kubelet's whole-second
timestamps, not a second run."""


def run_again_charge(
    inv: Invocation, attempt: int | None, runs: Sequence[WorkerRun], charged_s: float
) -> Charge | None:
    """What the attempt's runs in its workers held beyond what the record's `run` counts, less
    what is charged as `run_again` already: charged as `run_again`. The record's run counts from
    its first start (whichever worker's run that was) to its end; each run held a node of its
    own from its own start to its own end, so the node time of all of them, less the record's
    run, is what the record does not count. Telling the same runs again adds nothing; a run
    told later adds its part. None until the record has ended (the run that ends it tells all
    of them again), for another attempt, with runs in one worker only, and where nothing is
    beyond. The charge ends at the latest end of a run outside the worker the record names."""
    tl = inv.timeline
    if attempt != inv.attempt or not inv.state.terminal or len({r.worker for r in runs}) < 2:
        return None
    counted = 0.0 if tl.started is None or tl.finished is None else (tl.finished - tl.started).total_seconds()
    extra = sum(r.seconds for r in runs) - max(0.0, counted) - charged_s
    if extra < RUN_AGAIN_NOISE_S:
        return None
    last = max((r for r in runs if r.worker != inv.cluster), key=lambda r: r.ended, default=None)
    if last is None:
        return None
    return Charge(
        source=inv.id,
        attempt=inv.attempt,
        function=inv.function,
        gpu_type=inv.gpu_type,
        spans=(Span(Phase.run_again, last.ended - timedelta(seconds=extra), last.ended),),
        capacity=last.capacity,
        cluster=last.worker,
    )


def by_hour(span: Span) -> Iterator[tuple[datetime, float]]:
    """The span cut at hour boundaries: (start of the hour, seconds in it). A per-hour report
    then needs no SQL of either database's date functions."""
    cursor = span.start
    while cursor < span.end:
        hour = cursor.replace(minute=0, second=0, microsecond=0)
        cut = min(span.end, hour + timedelta(hours=1))
        yield hour, (cut - cursor).total_seconds()
        cursor = cut


def totals(spans: Sequence[Span]) -> dict[Phase, float]:
    """Seconds per phase, every phase present (0 where none)."""
    out = dict.fromkeys(Phase, 0.0)
    for span in spans:
        out[span.phase] += span.seconds
    return out


@dataclass(frozen=True)
class Charge:
    """Spans of node time charged to one source (an invocation's attempt, or a warm unit),
    priced at the row of its GPU type and `capacity`: the capacity of the node the time was
    spent on. None: the node is not known (a local slot, a node the watch never saw), and the
    store prices it as its backend's (pricing.table.capacity_of_backend)."""

    source: str
    attempt: int
    function: str
    gpu_type: str | None
    spans: Sequence[Span]
    capacity: Capacity | None = None
    cluster: str | None = None  # MultiKueue's worker that ran the attempt; None: one cluster


@dataclass(frozen=True)
class PhaseTotal:
    seconds: float = 0.0
    usd: float = 0.0
    unpriced_seconds: float = 0.0


class RunningTotal(NamedTuple):
    """Node-seconds and their cost since the ledger began, of one function, phase and
    capacity: what /metrics exports."""

    function: str
    phase: Phase
    capacity: Capacity
    seconds: float
    usd: float  # the priced part only
    cluster: str = ""  # MultiKueue's worker that ran it; "" where none is named


class _SumsPhases:
    """Totals over `phases` (each class that has it declares the field)."""

    phases: Mapping[Phase, PhaseTotal]

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases.values())

    @property
    def usd(self) -> float:
        return sum(p.usd for p in self.phases.values())

    @property
    def unpriced_seconds(self) -> float:
        return sum(p.unpriced_seconds for p in self.phases.values())


@dataclass(frozen=True)
class CostGroup(_SumsPhases):
    """One line of the report: its keys (function, hour, capacity, cluster: those it is grouped by) and
    each phase's totals."""

    function: str | None
    hour: datetime | None
    phases: Mapping[Phase, PhaseTotal]
    capacity: Capacity | None = None
    cluster: str | None = None


def ended_attempt(before: Invocation, after: Invocation) -> AttemptTimes | None:
    """The times of the attempt a transition ended, or None when it ended none: a job that
    ended, or one requeued (preempted, its node lost), whose milestones the requeue clears from
    the row (so they are read from `before`)."""
    if before.state not in ACTIVE_STATES:
        return None
    if after.state.terminal:
        tl = after.timeline
        return AttemptTimes(
            tl.capacity_ready, tl.started, tl.finished, after.node_since, after.warm, after.node_capacity
        )
    if after.state is State.queued:
        tl = before.timeline
        ended = after.timeline.preempted
        return AttemptTimes(
            tl.capacity_ready, tl.started, ended, before.node_since, before.warm, before.node_capacity
        )
    return None


def live_attempt(inv: Invocation) -> AttemptTimes | None:
    """The attempt under way (pending or running), its spans running to the caller's `now`."""
    if inv.state not in ACTIVE_STATES:
        return None
    tl = inv.timeline
    return AttemptTimes(tl.capacity_ready, tl.started, None, inv.node_since, inv.warm, inv.node_capacity)


def priced_as(inv: Invocation, unnamed: Capacity) -> Capacity | None:
    """What the node of the invocation's current (or last) attempt is priced as: the capacity
    its node named (spot or on demand, from its labels), or `unnamed` (the backend's,
    pricing.table.capacity_of_backend) for a node that named none, as the ledger prices it.
    None while no node is known (queued, or admitted and waiting for one)."""
    if inv.node_capacity is not None:
        return inv.node_capacity
    return None if inv.node is None else unnamed


@dataclass(frozen=True)
class InvocationCost(_SumsPhases):
    """What an invocation cost so far: its ended attempts as the ledger holds them, plus the
    attempt under way counted to now (`open`; its idle time after is not known yet)."""

    phases: Mapping[Phase, PhaseTotal]
    open: bool
    as_of: datetime | None = None  # the "now" the attempt under way was counted to


def invocation_cost(
    stored: Mapping[Phase, PhaseTotal],
    live: Sequence[Span],
    usd_per_hour: float | None,
    as_of: datetime | None = None,
) -> InvocationCost:
    """The ledger's totals and the live attempt's spans (priced at `usd_per_hour`; None: not
    in the price table; counted to `as_of`) as one cost, every phase present."""
    phases = {phase: stored.get(phase, PhaseTotal()) for phase in Phase}
    for span in live:
        was = phases[span.phase]
        if usd_per_hour is None:
            phases[span.phase] = PhaseTotal(
                was.seconds + span.seconds, was.usd, was.unpriced_seconds + span.seconds
            )
        else:
            usd = span.seconds * usd_per_hour / 3600.0
            phases[span.phase] = PhaseTotal(was.seconds + span.seconds, was.usd + usd, was.unpriced_seconds)
    return InvocationCost(phases=phases, open=bool(live), as_of=as_of)
