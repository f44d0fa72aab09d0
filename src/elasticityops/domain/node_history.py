"""What the GPU node watch knows of each node's past that the node-seconds attribution needs
(domain/node_seconds.py), as plain data the store keeps: so that a restarted gateway, or a new
leader, goes on charging a node's idle time after its last job and its warm time no one used
from where the one before stopped.

A record changes only when one of these facts does (a node first seen, its first job, a job's
end on it, its removal), never with the node's status; it is forgotten in the transaction that
keeps the node's last charges, so a charge is never lost between the two nor made twice."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from elasticityops.domain.node_seconds import Charge, idle_after_span, warm_unused_span
from elasticityops.pricing.table import Capacity

# The ledger's source of warm capacity no one used: node/<name> (attempt 0, function "").
WARM_SOURCE = "node/"


@dataclass(frozen=True)
class LastJob:
    """The last job of ours on a node, ended: the node's idle time from `ended` to its next use
    or its removal is this attempt's (idle_after)."""

    invocation_id: str
    attempt: int
    function: str
    gpu_type: str | None
    ended: datetime


@dataclass(frozen=True)
class NodeHistory:
    """One GPU node's past as far as the attribution needs it. `unused`: seen from its creation
    and no job of ours has used it yet, so its time from `created_at` is warm capacity no one
    used until its first job or its removal; False once a job used it, or when its past before
    the watch first saw it is not known. `last`: the job whose idle time after is still open."""

    name: str
    gpu_type: str
    capacity: Capacity
    created_at: datetime
    unused: bool
    last: LastJob | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a node's history needs the node's name")
        if self.created_at.tzinfo is None:
            raise ValueError(f"node {self.name}: created_at must be an aware time, not {self.created_at}")
        if self.last is not None and self.last.ended.tzinfo is None:
            raise ValueError(f"node {self.name}: its last job's end must be an aware time")


@dataclass(frozen=True)
class NodeHistoryWrite:
    """A change of one node's record: `history` to keep, or None to forget the node (gone, its
    last charges kept in the same transaction)."""

    name: str
    history: NodeHistory | None
    cluster: str = ""  # MultiKueue's worker whose node it is; "": the gateway's own cluster's


def idle_after_charge(last: LastJob, until: datetime, capacity: Capacity | None) -> Charge | None:
    """The idle time after `last` up to its node's next use or removal, charged to its attempt
    (`capacity`: its node's; None where the node is not known)."""
    span = idle_after_span(last.ended, until)
    if span is None:
        return None
    return Charge(last.invocation_id, last.attempt, last.function, last.gpu_type, (span,), capacity)


def warm_unused_charge(
    node: str, gpu_type: str, capacity: Capacity, since: datetime, until: datetime
) -> Charge | None:
    """A node's time from `since` (its creation) to `until` that no job used: warm capacity."""
    span = warm_unused_span(since, until)
    if span is None:
        return None
    return Charge(WARM_SOURCE + node, 0, "", gpu_type, (span,), capacity)


def closing_charges(history: NodeHistory, removed: datetime) -> list[Charge]:
    """What a node's record still owes when the node is gone at `removed`: the idle time after
    its last job, and its whole life if no job used it."""
    charges = []
    if history.last is not None:
        idle = idle_after_charge(history.last, removed, history.capacity)
        if idle is not None:
            charges.append(idle)
    if history.unused:
        warm = warm_unused_charge(
            history.name, history.gpu_type, history.capacity, history.created_at, removed
        )
        if warm is not None:
            charges.append(warm)
    return charges
