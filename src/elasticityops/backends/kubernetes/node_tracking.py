"""The Kubernetes backend's GPU nodes (when it watches them): the nodes' records read back at a
start, each watched Node folded into the view (gpu_nodes.py), which node each of our pods holds
(and whether it found the node warm), and the node time that closes, told with the changes of
the nodes' records it goes with."""

from __future__ import annotations

import logging
from dataclasses import replace

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.gpu_nodes import GpuNodes, Occupant
from elasticityops.backends.kubernetes.labels import FUNCTION_LABEL, GPU_TYPE_LABEL
from elasticityops.backends.kubernetes.objects import KubeObject, parse_time
from elasticityops.backends.kubernetes.observe import attempt_of
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import EopsError
from elasticityops.domain.events import BackendEvent, note_event
from elasticityops.domain.invocations import Note
from elasticityops.domain.node_seconds import Charge
from elasticityops.domain.ports import NodeHistorySource
from elasticityops.pricing.table import Capacity

log = logging.getLogger(__name__)


class NodeTracking:
    def __init__(
        self,
        nodes: GpuNodes,
        history: NodeHistorySource | None,
        clock: Clock,
        followed: Followed,
        outlet: Outlet,
        cluster: str | None = None,
    ) -> None:
        """`cluster`: the MultiKueue worker whose nodes these are (None: the gateway's own
        cluster's); the node time they close is charged to it, and their records are its."""
        self._nodes = nodes
        self._cluster = cluster
        # Where the nodes' records are read at each start (the store; they are written through
        # the sink, with the charges they close). None: nothing kept across a restart.
        self._history = history
        self._clock = clock
        self._followed = followed
        self._outlet = outlet
        # Each of our pods on a node, by its name: a pod deleted while the pod watch was away is
        # told by its name alone (the relist after a 410), and its node is freed through this.
        self._held: dict[str, tuple[str, Occupant]] = {}

    async def restore(self) -> None:
        """The nodes' records, before the node watch's first list. A store that cannot be read
        now leaves them as they are: this start keeps none (what it would write would be its
        own partial view over what another gateway knew) and charges only what it sees. Without
        a store, it begins again from what the first list shows: what it saw before this start
        may have changed unseen."""
        if self._history is None:
            self._nodes.restore(())
            self._nodes.records.keeping = False
            return
        try:
            records = await self._history.gpu_node_history(self._cluster or "")
        except EopsError as exc:
            log.warning("GPU node records not read (%s): nodes' past before this start is not charged", exc)
            self._nodes.records.keeping = False
            return
        self._nodes.restore(records)

    async def listed(self) -> None:
        """The node watch's first list is in."""
        await self.news(self._nodes.listed(self._clock.now().timestamp()))

    async def on_node(self, kind: str, node: KubeObject) -> None:
        await self.news(self._nodes.on_node(kind, node, self._clock.now().timestamp()))

    async def on_pod(
        self, kind: str, inv: str, pod: KubeObject, event: BackendEvent | None
    ) -> tuple[BackendEvent | None, BackendEvent | None]:
        """Which GPU node our pod holds. On its binding the pod's event gains where its node
        time starts (and what the node is priced as), so that even a pod first seen ended is
        charged from its node's start; a note says if the node was warm (the second event
        returned, when the first has a note of its own). The node time the binding closes (the
        idle time after the node's last job, or its time before that no one used) goes out with
        the node's record (`news`)."""
        nodes = self._nodes
        node = (pod.get("spec") or {}).get("nodeName")
        if not isinstance(node, str) or not node:
            return event, None
        meta = pod.get("metadata") or {}
        now = self._clock.now().timestamp()
        extra = None
        news: list[Charge] = []
        if event is not None and event.capacity_ready is not None:
            placed = event.capacity_ready
            pod_created = parse_time(meta.get("creationTimestamp"))
            told = nodes.warm_note(node, pod_created)
            where = nodes.placement(node, pod_created, placed)
            unused = None if where is None or where.unused_until is None else where.unused_until.timestamp()
            news = nodes.occupied(node, inv, now, unused)
            note = None if told is None else Note(at=placed, kind=told[0], message=told[1])
            if note is not None and event.note is not None:
                extra, note = note_event(inv, placed, note.kind, note.message, node=node), None
            event = replace(
                event,
                note=event.note or note,
                node_since=None if where is None else where.node_since,
                warm=None if where is None else where.warm,
                node_capacity=None if where is None else where.capacity,
            )
        name = str(meta.get("name", ""))
        if kind == "DELETED" or meta.get("deletionTimestamp") or self._followed.progress[inv].finished:
            self._held.pop(name, None)
            nodes.vacated(node, inv, now, _occupant(inv, pod))
        else:
            self._held[name] = (node, _occupant(inv, pod))
            if event is None or event.capacity_ready is None:
                # Seen on its node without news of the binding (a relist after a restart).
                news.extend(nodes.occupied(node, inv, now))
        await self.news(news)
        return event, extra

    def capacity_of(self, node: object) -> Capacity | None:
        """What GPU node `node` is priced as; None where it is not one this watch knows."""
        state = self._nodes.nodes.get(node) if isinstance(node, str) else None
        return None if state is None else state.capacity

    async def pod_gone(self, name: str) -> None:
        """Our pod `name` went while the pod watch was away (a relist after a 410 tells its name
        alone): its node is free of it, as of now (when it went is not known), so the node is
        idle again and its idle time after this job is charged from here."""
        held = self._held.pop(name, None)
        if held is None:
            return
        node, occupant = held
        self._nodes.vacated(node, occupant.invocation_id, self._clock.now().timestamp(), occupant)
        await self.news([])

    async def vacated(self, inv: str, pod: KubeObject) -> None:
        """A preempted attempt's pod is gone: its node is free of it."""
        node = (pod.get("spec") or {}).get("nodeName")
        self._held.pop(str((pod.get("metadata") or {}).get("name", "")), None)
        if isinstance(node, str) and node:
            self._nodes.vacated(node, inv, self._clock.now().timestamp(), _occupant(inv, pod))
            await self.news([])

    async def news(self, charges: list[Charge]) -> None:
        """Node time about no event of an invocation of its own (see GpuNodes), with the changes
        of the nodes' records it goes with: one event, so one transaction, and all on one lane
        (invocation_id ""), so the records are written in the order they changed."""
        writes = tuple(self._nodes.history_writes())
        if self._cluster is not None:
            charges = [replace(c, cluster=self._cluster) for c in charges]
            writes = tuple(replace(w, cluster=self._cluster) for w in writes)
        if charges or writes:
            await self._outlet.emit(BackendEvent("", charges=tuple(charges), node_history=writes))


def _occupant(inv: str, pod: KubeObject) -> Occupant:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    gpu_type = labels.get(GPU_TYPE_LABEL)
    return Occupant(
        invocation_id=inv,
        attempt=attempt_of(pod),
        function=str(labels.get(FUNCTION_LABEL, "")),
        gpu_type=gpu_type if isinstance(gpu_type, str) else None,
    )
