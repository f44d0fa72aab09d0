"""Which queued invocations to admit now: a pure function over a snapshot.

Order is priority first (high, normal, low); within a priority the functions take turns: a
function's queued invocation's turn is how many of its function's invocations are pending or
running, plus those of its queued ones (of its priority) accepted before it, and the lower turn
goes first, the one accepted first among equal turns (`admission_order`). So the next invocation
of a function with nothing running goes before the thousands a batch queued for another function
that has some running: a batch does not hold back the functions of its priority beyond their
share. With one function it is acceptance order. Invocations beyond the free capacity wait in
that order. A function at its `max_concurrency` is skipped without blocking others.
A GPU type whose budget is full blocks only invocations of that type: strict head-of-line order
holds within a type (and within what all types share: the backend's slots, an overall budget).

Spillover: an invocation whose function lists several GPU types (`gpu.type: [t4, l4]`) is
admitted on the first of them that is not blocked and has room. A type is blocked once an
invocation waits for it, so one that spills never takes room an earlier invocation waits for:
it only uses a type nothing ahead of it is waiting on. One that fits none of its types waits on
all of them, so nothing behind it that asks for any of those types overtakes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from elasticityops.domain.budget import GpuBudget, total_room
from elasticityops.domain.functions import Priority

DEFAULT_GPU_TYPE = "nvidia-tesla-t4"  # GpuSpec's default


@dataclass(frozen=True)
class QueuedItem:
    id: str
    function: str
    priority: Priority
    gpus: int = 1
    gpu_type: str = DEFAULT_GPU_TYPE  # the first choice
    spill_to: tuple[str, ...] = ()  # the types to try next, in order

    @property
    def types(self) -> tuple[str, ...]:
        return (self.gpu_type, *self.spill_to)


@dataclass(frozen=True)
class AdmissionSnapshot:
    queued: Sequence[QueuedItem]  # in acceptance order
    free_gpus: int | None  # None: the backend has no fixed limit (the cluster provisions)
    gpu_budget_left: int | None  # GPUs the overall quota still allows; None: no overall quota
    active_by_function: Mapping[str, int]
    max_concurrency: Mapping[str, int]
    type_room: Mapping[str, int] = field(default_factory=dict)
    """GPUs each capped type's budget still allows; a type not here is not capped by type."""


def gpus_free(
    in_use: Mapping[str, int],
    gpu_budget: GpuBudget | None,
    backend_free: int | None,
    headroom: Mapping[str, int] | None = None,
) -> int | None:
    """GPUs that can start work now, all types together: the overall budget's room and the
    backend's own free slots, whichever is smaller; None when neither limits. A per-type budget
    caps only its types, so it leaves the total unlimited (see `room_by_type` per type)."""
    room = total_room(gpu_budget, in_use, headroom or {})
    limits = [x for x in (room, backend_free) if x is not None]
    return min(limits) if limits else None


def admission_order(
    queued: Sequence[QueuedItem], active: Mapping[str, int] | None = None
) -> list[QueuedItem]:
    """Priority rank, then the functions' turns, then acceptance order (the order `queued` is
    in). An item's turn: its function's pending and running invocations (`active`, by function)
    plus how many of its function's of its priority come before it in `queued`, which must hold
    each function's earliest ones (a prefix of its queue), as the store reads them
    (InvocationStore.queued)."""
    running = active or {}
    seen: dict[tuple[int, str], int] = {}
    keyed = []
    for position, item in enumerate(queued):
        key = (item.priority.rank, item.function)
        before = seen.get(key, 0)
        seen[key] = before + 1
        keyed.append(((item.priority.rank, running.get(item.function, 0) + before, position), item))
    keyed.sort(key=lambda pair: pair[0])
    return [item for _, item in keyed]


@dataclass(frozen=True)
class Admission:
    chosen: list[str]  # ids to admit now, in the order to launch them
    stopped: bool
    """True when what all types share ran out (or its head needs more than is left): nothing
    further back in the queue can be admitted either. False: whatever was not chosen waits for
    its own type or function, so queued work behind it (another type) may still fit."""
    on_type: Mapping[str, str] = field(default_factory=dict)
    """The GPU type each chosen id is admitted on (its first choice, or one it spills to)."""


def admit(snapshot: AdmissionSnapshot) -> list[str]:
    """Ids to admit now, in the order to launch them."""
    return admission(snapshot).chosen


def admission(snapshot: AdmissionSnapshot) -> Admission:
    """`admit`, the type each is admitted on, and whether it stopped for want of shared
    capacity."""
    limits = [x for x in (snapshot.free_gpus, snapshot.gpu_budget_left) if x is not None]
    shared = min(limits) if limits else None  # what every type draws on
    type_room = dict(snapshot.type_room)
    blocked: set[str] = set()  # types whose head waits for room: nothing of theirs overtakes it
    active = dict(snapshot.active_by_function)
    chosen: list[str] = []
    on_type: dict[str, str] = {}
    for item in admission_order(snapshot.queued, snapshot.active_by_function):
        if shared is not None and shared <= 0:
            return Admission(chosen, stopped=True, on_type=on_type)
        if active.get(item.function, 0) >= snapshot.max_concurrency.get(item.function, 1 << 30):
            continue
        kind = _first_with_room(item, blocked, type_room)
        if kind is None:
            # Strict order within each of its types: a big job at their head is not overtaken
            # by smaller ones of those types (that would starve it); other types keep their room.
            blocked.update(item.types)
            continue
        if shared is not None and item.gpus > shared:
            # The same, for what all types share (slots, an overall budget): everything waits.
            return Admission(chosen, stopped=True, on_type=on_type)
        chosen.append(item.id)
        on_type[item.id] = kind
        active[item.function] = active.get(item.function, 0) + 1
        room = type_room.get(kind)
        if room is not None:
            type_room[kind] = room - item.gpus
        if shared is not None:
            shared -= item.gpus
    return Admission(chosen, stopped=shared is not None and shared <= 0, on_type=on_type)


def _first_with_room(item: QueuedItem, blocked: set[str], type_room: Mapping[str, int]) -> str | None:
    """The first of the item's types that nothing ahead waits on and whose budget has room for
    it (a type without a cap always has); None when there is none."""
    for kind in item.types:
        if kind in blocked:
            continue
        room = type_room.get(kind)
        if room is None or item.gpus <= room:
            return kind
    return None
