"""Which queued invocations to admit now: a pure function over a snapshot.

Order is priority first (high, normal, low), then acceptance time, so invocations beyond the free
capacity wait in order. A function at its `max_concurrency` is skipped without blocking others."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elasticityops.domain.functions import Priority


@dataclass(frozen=True)
class QueuedItem:
    id: str
    function: str
    priority: Priority
    gpus: int = 1


@dataclass(frozen=True)
class AdmissionSnapshot:
    queued: Sequence[QueuedItem]  # in acceptance order
    free_gpus: int | None  # None: the backend has no fixed limit (the cluster provisions)
    gpu_budget_left: int | None  # GPUs the quota still allows; None: no quota set
    active_by_function: Mapping[str, int]
    max_concurrency: Mapping[str, int]


def gpus_free(in_use: int, gpu_budget: int | None, backend_free: int | None) -> int | None:
    """GPUs that can start work now: the budget's room and the backend's own free slots,
    whichever is smaller; None when neither limits."""
    room = None if gpu_budget is None else max(0, gpu_budget - in_use)
    limits = [x for x in (room, backend_free) if x is not None]
    return min(limits) if limits else None


def admit(snapshot: AdmissionSnapshot) -> list[str]:
    """Ids to admit now, in the order to launch them."""
    limits = [x for x in (snapshot.free_gpus, snapshot.gpu_budget_left) if x is not None]
    room = min(limits) if limits else None
    active = dict(snapshot.active_by_function)
    ordered = sorted(enumerate(snapshot.queued), key=lambda p: (p[1].priority.rank, p[0]))
    chosen: list[str] = []
    for _, item in ordered:
        if room is not None and room <= 0:
            break
        if active.get(item.function, 0) >= snapshot.max_concurrency.get(item.function, 1 << 30):
            continue
        if room is not None and item.gpus > room:
            # Strict order: a big job at the head is not overtaken by smaller ones behind it
            # (that would starve it); it waits until enough GPUs are free.
            break
        chosen.append(item.id)
        active[item.function] = active.get(item.function, 0) + 1
        if room is not None:
            room -= item.gpus
    return chosen
