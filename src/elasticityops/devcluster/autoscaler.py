"""Node auto-provisioning emulator: the decisions, as pure functions over plain data.

Why an emulator and not the real cluster-autoscaler with its kwok provider: the Go module
proxy answers 403 "This module version is not available" for every version of
k8s.io/autoscaler/cluster-autoscaler (and k8s.io/autoscaler, .../apis), so it cannot be built
here (docs/dev-cluster.md). This module reproduces the behaviour the project depends on, with
upstream's defaults and the planner's knob names:

- scale-up: GPU pods that have been unschedulable for `gpu_pod_delay` and are not expendable
  (priority >= cutoff) and are not covered by free GPUs on Ready nodes or by nodes already on
  their way get one new 1-GPU node each, up to the `max_nodes` quota; each node becomes a
  Node object `provision_delay` (sampled per node, the planner's spec language and parser) after
  the decision.
- pools: auto-provisioned pools `nap-t4-<zone>-<k>` hold at most `pool_size_limit` nodes; new
  nodes go to the least-filled pool, spreading over zones.
- stockout: each scale-up request to a pool fails with `stockout_probability`; the pool then
  backs off `backoff_initial`, doubling per further failure up to `backoff_max`, reset by a
  success. Other pools (zones) are tried meanwhile, as the autoscaler does with node groups.
- scale-down: an autoscaled node with no GPU requested by non-expendable, unfinished pods is
  unneeded; after `scale_down_after` it is deleted, at most `max_scale_down_parallelism` per
  cycle, oldest first. Idle nodes are kept while eligible GPU pods are pending (they will land
  there). Nodes are deleted without draining; pod GC removes their pods.
- baseline: the static pool is reconciled to `baseline` nodes (never scaled down otherwise).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.nodes import (
    BASELINE_POOL,
    ROLE_AUTOSCALED,
    ROLE_BASELINE,
    ZONES,
    baseline_node_name,
)
from elasticityops.planner.distributions import parse_distribution


@dataclass(frozen=True)
class NodeView:
    name: str
    pool: str
    role: str  # ROLE_BASELINE or ROLE_AUTOSCALED
    gpus: int  # allocatable
    gpus_requested: int  # by unfinished, non-expendable pods bound to it
    ready: bool


@dataclass(frozen=True)
class PendingPod:
    key: str  # namespace/name
    gpus: int
    unschedulable_since: float  # epoch s (PodScheduled=False transition time)
    priority: int


@dataclass(frozen=True)
class Snapshot:
    """The observed world at one instant, gathered at the edge."""

    now: float
    nodes: tuple[NodeView, ...]
    pending: tuple[PendingPod, ...]


@dataclass(frozen=True)
class NodeOrder:
    """A node on its way: it becomes a Node object at `ready_at`."""

    name: str
    pool: str
    zone: str
    ready_at: float


@dataclass(frozen=True)
class Backoff:
    until: float
    last: float  # the back-off duration used last, doubled on the next failure


@dataclass(frozen=True)
class EmulatorState:
    """What the emulator remembers between cycles (the autoscaler's own memory)."""

    in_flight: tuple[NodeOrder, ...] = ()
    unneeded_since: dict[str, float] = field(default_factory=dict)
    backoff: dict[str, Backoff] = field(default_factory=dict)
    next_index: int = 0


@dataclass(frozen=True)
class Actions:
    """Effects to apply once, after the decision."""

    create: tuple[NodeOrder, ...] = ()  # autoscaled nodes whose provisioning delay is over
    create_baseline: tuple[str, ...] = ()  # static-pool node names to create
    delete: tuple[str, ...] = ()  # node names to delete
    ordered: tuple[NodeOrder, ...] = ()  # newly ordered nodes (for logs and status)
    stockouts: tuple[str, ...] = ()  # pools whose scale-up attempt failed this cycle

    def empty(self) -> bool:
        return not (self.create or self.create_baseline or self.delete or self.ordered or self.stockouts)


def pool_zone(pool: str) -> str:
    for zone in ZONES:
        if pool.startswith(f"nap-t4-{zone}-"):
            return zone
    return ZONES[0]


def eligible_pending(snap: Snapshot, s: AutoscalerSettings) -> list[PendingPod]:
    """Pending pods that should make the autoscaler act now."""
    return [
        p
        for p in snap.pending
        if p.priority >= s.expendable_pods_priority_cutoff
        and 1 <= p.gpus <= 1  # one T4 per node: bigger pods can never fit, as on GKE n1-standard-4 + 1 T4
        and snap.now - p.unschedulable_since >= s.gpu_pod_delay
    ]


def _reconcile_baseline(snap: Snapshot, s: AutoscalerSettings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    existing = sorted(n.name for n in snap.nodes if n.role == ROLE_BASELINE)
    if len(existing) > s.baseline:
        return (), tuple(existing[s.baseline :])
    have = set(existing)
    wanted = [baseline_node_name(i) for i in range(s.baseline)]
    return tuple(n for n in wanted if n not in have), ()


def _pool_counts(snap: Snapshot, in_flight: tuple[NodeOrder, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in snap.nodes:
        if n.role == ROLE_AUTOSCALED:
            counts[n.pool] = counts.get(n.pool, 0) + 1
    for o in in_flight:
        counts[o.pool] = counts.get(o.pool, 0) + 1
    return counts


def _choose_pool(counts: dict[str, int], blocked: set[str], s: AutoscalerSettings) -> str | None:
    """The least-filled open pool, lower generations first; None if every pool is full or backed off."""
    generations = math.ceil(max(s.max_nodes, 1) / s.pool_size_limit) + 1
    best: tuple[int, int, int] | None = None
    best_pool: str | None = None
    for k in range(generations):
        for zi, zone in enumerate(ZONES):
            pool = f"nap-t4-{zone}-{k}"
            if pool in blocked or counts.get(pool, 0) >= s.pool_size_limit:
                continue
            key = (k, counts.get(pool, 0), zi)
            if best is None or key < best:
                best, best_pool = key, pool
    return best_pool


def decide(
    snap: Snapshot, state: EmulatorState, s: AutoscalerSettings, rng: random.Random
) -> tuple[Actions, EmulatorState]:
    """One autoscaler cycle: what to create, order and delete, and the state to remember."""
    now = snap.now
    due = tuple(o for o in state.in_flight if o.ready_at <= now)
    in_flight = tuple(o for o in state.in_flight if o.ready_at > now)
    create_baseline, delete_baseline = _reconcile_baseline(snap, s)
    backoff = dict(state.backoff)  # kept after expiry: the next failure doubles the last length
    ordered: list[NodeOrder] = []
    stockouts: list[str] = []
    next_index = state.next_index
    pending = eligible_pending(snap, s) if s.enabled else []

    # --- scale-up ---------------------------------------------------------------------
    # Free GPUs on nodes that exist (Ready or about to be: kwok readies a node within ms) will
    # take pending pods once the scheduler retries, so they are not a reason to scale up.
    free = sum(max(n.gpus - n.gpus_requested, 0) for n in snap.nodes if n.name not in delete_baseline)
    coming = len(due) + len(in_flight) + len(create_baseline)
    needed = len(pending) - free - coming
    gpu_nodes = sum(1 for n in snap.nodes if n.role == ROLE_AUTOSCALED) + len(due) + len(in_flight)
    room = s.max_nodes - s.baseline - gpu_nodes
    to_order = max(0, min(needed, room))
    if to_order:
        counts = _pool_counts(snap, in_flight)
        delay = parse_distribution(s.provision_delay)
        blocked = {p for p, b in backoff.items() if b.until > now}
        plan: dict[str, int] = {}
        for _ in range(to_order):
            pool = _choose_pool(counts, blocked, s)
            if pool is None:
                break
            counts[pool] = counts.get(pool, 0) + 1
            plan[pool] = plan.get(pool, 0) + 1
        for pool, count in sorted(plan.items()):
            # One resize request per pool per cycle; a stockout fails the whole request.
            if s.stockout_probability > 0 and rng.random() < s.stockout_probability:
                prev = backoff.get(pool)
                length = s.backoff_initial if prev is None else min(prev.last * 2, s.backoff_max)
                backoff[pool] = Backoff(until=now + length, last=length)
                stockouts.append(pool)
                continue
            backoff.pop(pool, None)
            for _ in range(count):
                name = f"gke-eops-{pool}-{next_index:05d}"
                next_index += 1
                ordered.append(NodeOrder(name, pool, pool_zone(pool), now + delay.sample(rng)))

    # --- scale-down -------------------------------------------------------------------
    unneeded: dict[str, float] = {}
    for n in snap.nodes:
        if n.role == ROLE_AUTOSCALED and n.ready and n.gpus_requested == 0:
            unneeded[n.name] = state.unneeded_since.get(n.name, now)
    delete: list[str] = []
    if s.enabled:
        ripe = sorted((since, name) for name, since in unneeded.items() if now - since >= s.scale_down_after)
        # Idle nodes are kept for pending pods the scheduler has not placed on them yet.
        ripe = ripe[len(pending) :]
        delete = [name for _, name in ripe[: s.max_scale_down_parallelism]]
        for name in delete:
            unneeded.pop(name, None)

    actions = Actions(
        create=due,
        create_baseline=create_baseline,
        delete=(*delete_baseline, *delete),
        ordered=tuple(ordered),
        stockouts=tuple(stockouts),
    )
    new_state = replace(
        state,
        in_flight=in_flight + tuple(ordered),
        unneeded_since=unneeded,
        backoff=backoff,
        next_index=next_index,
    )
    return actions, new_state


__all__ = [
    "BASELINE_POOL",
    "Actions",
    "Backoff",
    "EmulatorState",
    "NodeOrder",
    "NodeView",
    "PendingPod",
    "Snapshot",
    "decide",
    "eligible_pending",
]
