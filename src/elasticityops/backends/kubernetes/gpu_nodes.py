"""What the gateway knows of the cluster's GPU nodes, from one watch of the Nodes that carry the
accelerator label: each node's GPU type, whether its GPU is usable now, when it was created and
when its GPU became usable (the provisioning time the headroom controller measures), and when
it last became empty of our work (how soon the autoscaler may remove it).

`GpuNodes.on_node` folds a watched Node in (`node_state` is the pure reading of one object);
`occupied`/`vacated` come from the backend's pod watch. Times are seconds since the epoch.

It also closes the node time no transition of an invocation ends (domain/node_seconds.py): a
node's idle time after its last job, charged to that job's invocation when the node is next
used or removed, and a node's time before its first job when that job found it warm (or when
it goes unused), charged to warm capacity of its GPU type. What of that is still open is kept
in the store per node (domain/node_history.py: `history_writes`, read back by `restore`), so
a restarted gateway or a new leader goes on from it; a node the first list finds with no
record (the store could not be read, or it predates the records) has a past this gateway does
not know: none of that is charged, only what follows."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE
from elasticityops.backends.kubernetes.node_capacity import capacity_of_labels
from elasticityops.backends.kubernetes.node_records import NodeRecords
from elasticityops.backends.kubernetes.objects import KubeObject, parse_time
from elasticityops.domain.node_history import (
    LastJob,
    NodeHistory,
    NodeHistoryWrite,
    closing_charges,
    idle_after_charge,
    warm_unused_charge,
)
from elasticityops.domain.node_seconds import Charge
from elasticityops.pricing.table import Capacity

log = logging.getLogger(__name__)

NODES_PATH = "/api/v1/nodes"
TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler"
NODE_STATES = ("provisioning", "ready", "idle", "scaling_down")
_SAMPLES = 100  # the planner's: provisioning times averaged into the lead time
_SAME_MOMENT_S = 2.0


@dataclass(frozen=True)
class NodeState:
    name: str
    gpu_type: str
    gpus: int  # allocatable nvidia.com/gpu (0 until the driver is in)
    usable: bool  # Ready, GPU allocatable, schedulable, not on its way out
    going: bool  # being deleted or drained by the autoscaler
    created_at: float
    capacity: Capacity = Capacity.on_demand  # what it is priced as (its GKE labels)
    usable_since: float | None = None  # when this gateway first saw it usable
    empty_since: float | None = None  # when our last pod left it (or it became usable)


def node_state(node: KubeObject, now: float) -> NodeState | None:
    """The reading of one Node object; None for one without the accelerator label."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    gpu_type = labels.get(ACCELERATOR_LABEL)
    if not isinstance(gpu_type, str) or not gpu_type:
        return None
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    try:
        gpus = int(str((status.get("allocatable") or {}).get(GPU_RESOURCE, "0")))
    except ValueError:
        gpus = 0
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
    )
    going = bool(meta.get("deletionTimestamp")) or any(
        t.get("key") == TO_BE_DELETED_TAINT for t in spec.get("taints") or ()
    )
    created = parse_time(meta.get("creationTimestamp"))
    return NodeState(
        name=str(meta.get("name", "")),
        gpu_type=gpu_type,
        gpus=gpus,
        usable=ready and gpus > 0 and not spec.get("unschedulable") and not going,
        going=going,
        created_at=created.timestamp() if created else now,
        capacity=capacity_of_labels(labels),
    )


@dataclass(frozen=True)
class Occupant:
    """One of our pods on a node: whose attempt it runs, to charge the node's idle time after."""

    invocation_id: str
    attempt: int
    function: str
    gpu_type: str | None

    def ended(self, at: datetime) -> LastJob:
        return LastJob(self.invocation_id, self.attempt, self.function, self.gpu_type, at)


@dataclass(frozen=True)
class Placement:
    """Where a pod's node time starts (Invocation.node_since, warm), up to when the node's
    time before it went unused (None: none did, or the node was made for it), and what the
    node is priced as (Invocation.node_capacity)."""

    node_since: datetime
    warm: bool
    unused_until: datetime | None
    capacity: Capacity = Capacity.on_demand


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class GpuNodes:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.synced = False
        self._busy: dict[str, set[str]] = {}  # node -> our invocations on it
        self.provisioning_s: deque[float] = deque(maxlen=_SAMPLES)
        # Node time not yet charged: the last job on each empty node (its idle time runs until
        # the next job or the node's removal), and the nodes no job of ours has used yet.
        self._last: dict[str, LastJob] = {}
        self._unused: set[str] = set()
        self.records = NodeRecords()

    def restore(self, records: Iterable[NodeHistory]) -> None:
        """Begin again from the store's records, before the first list (a start, a new leader):
        what this watch knew before is dropped, as another leader may have moved on from it; the
        first list matches each record with its node (`on_node`), `listed` closes the rest."""
        self.nodes.clear()
        self._busy.clear()
        self._last.clear()
        self._unused.clear()
        self.synced = False
        self.records.restore(records)

    def listed(self, now: float) -> list[Charge]:
        """The first list is in: from now on a new node is seen from its start. A record no
        listed node claimed is of a node that went while no gateway watched it: its removal
        time is not known, so what it owed is charged up to now, the first moment it is known
        gone (too much by at most the time no gateway watched), and it is forgotten."""
        self.synced = True
        charges = []
        for gone in self.records.unclaimed():
            log.warning(
                "GPU node %s went while no gateway watched it: its last node time is charged up to now",
                gone.name,
            )
            charges.extend(closing_charges(gone, _at(now)))
            self.records.touch(gone.name)
        return charges

    def history_writes(self) -> list[NodeHistoryWrite]:
        """The changes of the nodes' records since the last call, for the store (only facts
        the attribution uses: none for a node's status)."""
        return self.records.writes(self.history_of)

    def history_of(self, name: str) -> NodeHistory | None:
        """The record of a node as this watch knows it now; None once it is gone."""
        state = self.nodes.get(name)
        if state is None:
            return None
        return NodeHistory(
            name=name,
            gpu_type=state.gpu_type,
            capacity=state.capacity,
            created_at=_at(state.created_at),
            unused=name in self._unused,
            last=self._last.get(name),
        )

    def on_node(self, kind: str, node: KubeObject, now: float) -> list[Charge]:
        """Fold a watched Node in; the charges its removal closes (idle after, warm unused)."""
        name = str((node.get("metadata") or {}).get("name", ""))
        self.records.touch(name)
        if kind == "DELETED":
            return self._removed(name, now)
        seen = node_state(node, now)
        if seen is None:
            self.nodes.pop(name, None)
            return []
        old = self.nodes.get(name)
        charges: list[Charge] = []
        if old is None and self.synced:
            self._unused.add(name)  # seen from its start: its time is ours to account for
        elif old is None:
            charges = self._resume(name, seen, now)
        else:
            seen = replace(seen, created_at=old.created_at)  # one creation time, read once
        since = old.usable_since if old else None
        empty = old.empty_since if old else None
        if seen.usable and since is None:
            if old is not None or self.synced:
                # Seen coming up while watched: a real provisioning time.
                since = now
                self.provisioning_s.append(max(0.0, now - seen.created_at))
            else:
                since = seen.created_at  # usable in the first list: up before this gateway looked
            if not self._busy.get(name):
                last = self._last.get(name)
                empty = since if last is None else max(since, last.ended.timestamp())
        self.nodes[name] = replace(seen, usable_since=since, empty_since=empty)
        return charges

    def _resume(self, name: str, seen: NodeState, now: float) -> list[Charge]:
        """A node of the first list: its past as the store's record tells it (nothing known
        without one). A record of another creation time is of an earlier node of that name,
        gone by the time this one was made."""
        record = self.records.claim(name)
        if record is None:
            return []
        if abs(record.created_at.timestamp() - seen.created_at) >= 1.0:
            return closing_charges(record, _at(min(now, seen.created_at)))
        if record.unused:
            self._unused.add(name)
        if record.last is not None:
            self._last[name] = record.last
        return []

    def _removed(self, name: str, now: float) -> list[Charge]:
        state = self.nodes.pop(name, None)
        charges = self._close_idle(name, now, state)
        if name in self._unused:
            self._unused.discard(name)
            if state is not None:
                charges.extend(_warm_unused(state, now))
        return charges

    def occupied(
        self, node: str, invocation_id: str, now: float = 0.0, unused_until: float | None = None
    ) -> list[Charge]:
        """Our pod holds `node`; the charges a new occupant closes: the idle time after the
        last job on it (up to `now`, its placement) and, for the node's first job, its time
        before that no one used, up to `unused_until` (the pick of a warm node; the pod's
        creation for a node made before it for something else; None for a node made for this
        job: that time is its provisioning)."""
        on = self._busy.setdefault(node, set())
        if invocation_id in on:
            return []
        on.add(invocation_id)
        self.records.touch(node)
        state = self.nodes.get(node)
        charges = self._close_idle(node, now, state)
        if node in self._unused:
            self._unused.discard(node)
            if state is not None and unused_until is not None:
                charges.extend(_warm_unused(state, unused_until))
        return charges

    def vacated(self, node: str, invocation_id: str, now: float, occupant: Occupant | None = None) -> None:
        on = self._busy.get(node)
        if not on:
            return
        on.discard(invocation_id)
        if not on:
            del self._busy[node]
            self.records.touch(node)
            state = self.nodes.get(node)
            if state is not None:
                self.nodes[node] = replace(state, empty_since=now)
            if occupant is not None:
                self._last[node] = occupant.ended(_at(now))

    def _close_idle(self, node: str, now: float, state: NodeState | None) -> list[Charge]:
        last = self._last.pop(node, None)
        if last is None:
            return []
        # A node the watch lost sight of (no state) is priced as the backend's default.
        charge = idle_after_charge(last, _at(now), None if state is None else state.capacity)
        return [] if charge is None else [charge]

    def busy(self, node: str) -> bool:
        return bool(self._busy.get(node))

    def by_state(self) -> dict[str, int]:
        """How many GPU nodes are provisioning (not usable yet), ready (usable, our work on it),
        idle (usable, none of our work: warm, or waiting for the autoscaler) and scaling down
        (being deleted or drained): the console's capacity page."""
        counts = dict.fromkeys(NODE_STATES, 0)
        for node in self.nodes.values():
            if node.going:
                counts["scaling_down"] += 1
            elif not node.usable:
                counts["provisioning"] += 1
            else:
                counts["ready" if self.busy(node.name) else "idle"] += 1
        return counts

    def of_type(self, gpu_type: str, gpus: int = 1) -> list[NodeState]:
        return [n for n in self.nodes.values() if n.gpu_type == gpu_type and (n.gpus >= gpus or not n.usable)]

    def mean_provisioning_s(self) -> float | None:
        samples = self.provisioning_s
        return sum(samples) / len(samples) if samples else None

    def placement(self, node: str, pod_created: datetime | None, placed: datetime) -> Placement | None:
        """The node facts of a pod placed on `node` at `placed`, read as its warm note reads
        them: a warm node or a busy one was there already (its time is the pod's from the
        placement on); a new node is the pod's from its creation, or from the pod's own
        creation if it was made before the pod, for something else. None: node unknown."""
        told = self.warm_note(node, pod_created)
        state = self.nodes.get(node)
        if told is None or state is None or pod_created is None:
            return None
        kind, capacity = told[0], state.capacity
        if kind == "WarmUnits":
            return Placement(placed, warm=True, unused_until=placed, capacity=capacity)
        if kind == "BusyNode":
            return Placement(placed, warm=True, unused_until=None, capacity=capacity)
        created = _at(state.created_at)
        if created <= pod_created:
            since = min(pod_created, placed)
            return Placement(since, warm=False, unused_until=pod_created, capacity=capacity)
        return Placement(min(created, placed), warm=False, unused_until=None, capacity=capacity)

    def warm_note(self, node: str, pod_created: datetime | None) -> tuple[str, str] | None:
        """(kind, message) saying whether a pod bound to `node` found it warm (usable and free of
        our work when the pod was created), waited for it to free up, or waited for it to come
        up; None when the node is unknown."""
        state = self.nodes.get(node)
        if state is None or pod_created is None:
            return None
        # A pod's creationTimestamp is in whole seconds and this watch may see a node a moment
        # after the pod's: a node ready within that slack was ready when the pod came.
        created = pod_created.timestamp()
        by = created + _SAME_MOMENT_S
        if state.usable_since is not None and state.usable_since <= by:
            if state.empty_since is not None and state.empty_since <= by:
                before = max(0.0, created - state.usable_since)
                return (
                    "WarmUnits",
                    f"landed on warm capacity: node {node} was ready {before:.0f}s before the pod",
                )
            return (
                "BusyNode",
                f"waited for node {node} to be free: another job held it when the pod was created",
            )
        if state.created_at <= created:
            return "NewNode", f"waited for node {node}, still starting when the pod was created"
        after = state.created_at - created
        return "NewNode", f"waited for a new node: {node} was created {after:.0f}s after the pod"


def _warm_unused(state: NodeState, until: float) -> list[Charge]:
    charge = warm_unused_charge(state.name, state.gpu_type, state.capacity, _at(state.created_at), _at(until))
    return [] if charge is None else [charge]
