"""Priority preemption: which pending or running invocations to stop so that higher-priority
work blocked by a full GPU budget (or full slots) can start. Pure, over the admission snapshot.

The Kubernetes PriorityClasses share one value by design (the scheduler never preempts one of
our pods for another), so this is the gateway's decision. Only functions that opt in
(`preemptible`) are ever preempted, only by strictly higher priority, for work that admission
could not admit for want of GPUs, and only as many as that work needs: the lowest priority
first, then the newest (it has lost the least work), the same GPU type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from elasticityops.domain.admission import AdmissionSnapshot, QueuedItem, admission_order
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import FailureReason, Invocation, Note
from elasticityops.domain.ports import Change
from elasticityops.domain.retry import next_attempt_or_fail

PREEMPTING = "Preempting"  # note kinds: the intent, then what it came to
PREEMPTED = "Preempted"


@dataclass(frozen=True)
class Candidate:
    """A pending or running invocation, as preemption sees it."""

    id: str
    function: str
    priority: Priority
    preemptible: bool
    gpus: int
    gpu_type: str
    since: datetime  # started, else dispatched: the newest has lost the least work


@dataclass(frozen=True)
class Preemption:
    victim: str
    by: str  # the blocked invocation it makes way for


@dataclass
class _Room:
    shared: int | None
    by_type: dict[str, int] = field(default_factory=dict)

    def left(self, gpu_type: str) -> int | None:
        limits = [x for x in (self.shared, self.by_type.get(gpu_type)) if x is not None]
        return min(limits) if limits else None

    def add(self, gpu_type: str, gpus: int) -> None:
        if self.shared is not None:
            self.shared += gpus
        if gpu_type in self.by_type:
            self.by_type[gpu_type] += gpus


def choose_victims(
    snapshot: AdmissionSnapshot, admitted: Sequence[str], candidates: Sequence[Candidate]
) -> list[Preemption]:
    """For the queued work of `snapshot` that admission did not admit (`admitted`: the ids it
    did), in admission order: the candidates to preempt so that it fits, at most as many as
    it needs. Work that waits for its function's `max_concurrency` is passed over (freeing GPUs
    would not start it), and so is work nothing can be freed for, which then keeps its type
    (or, when what all types share is short, everything behind it) from taking victims, as
    admission keeps strict order there. Deterministic: the same input, the same victims."""
    limits = [x for x in (snapshot.free_gpus, snapshot.gpu_budget_left) if x is not None]
    room = _Room(min(limits) if limits else None, dict(snapshot.type_room))
    active = dict(snapshot.active_by_function)
    taken = set(admitted)
    queued = admission_order(snapshot.queued, snapshot.active_by_function)
    for item in queued:
        if item.id in taken:
            room.add(item.gpu_type, -item.gpus)
            active[item.function] = active.get(item.function, 0) + 1
    pool = sorted(
        (c for c in candidates if c.preemptible),
        key=lambda c: (-c.priority.rank, -c.since.timestamp(), _desc(c.id)),
    )
    blocked_types: set[str] = set()
    chosen: list[Preemption] = []
    for item in queued:
        if item.id in taken or item.gpu_type in blocked_types:
            continue
        if active.get(item.function, 0) >= snapshot.max_concurrency.get(item.function, 1 << 30):
            continue
        left = room.left(item.gpu_type)
        need = 0 if left is None else item.gpus - left
        victims = _victims_for(item, need, pool) if need > 0 else []
        if need > 0 and not victims:
            if room.shared is not None and room.shared < item.gpus:
                break  # what every type shares is short: nothing behind it may start first
            blocked_types.add(item.gpu_type)
            continue
        for victim in victims:
            pool.remove(victim)
            room.add(victim.gpu_type, victim.gpus)
            chosen.append(Preemption(victim.id, item.id))
        room.add(item.gpu_type, -item.gpus)
        active[item.function] = active.get(item.function, 0) + 1
    return chosen


def _victims_for(item: QueuedItem, need: int, pool: Sequence[Candidate]) -> list[Candidate]:
    """The first candidates in `pool`'s order (lowest priority, newest) of strictly lower
    priority and the same GPU type that free `need` GPUs; none when all of them would not."""
    victims: list[Candidate] = []
    freed = 0
    for candidate in pool:
        if candidate.priority.rank <= item.priority.rank or candidate.gpu_type != item.gpu_type:
            continue
        victims.append(candidate)
        freed += candidate.gpus
        if freed >= need:
            return victims
    return []


def _desc(text: str) -> tuple[int, ...]:
    """A sort key that orders strings from the last to the first (ids: the newest first)."""
    return (*(-ord(ch) for ch in text), 1)  # the 1 puts "ab" before "a", as descending order does


def preempting_note(victim: Invocation, by: str, at: datetime) -> Note:
    return Note(at, PREEMPTING, f"stopping attempt {victim.attempt} to make way for {by}")


def end_of_preemption(victim: Invocation, retries: int, at: datetime) -> Change:
    """What preemption does to `victim` once its job is stopped: back in the queue as its next
    attempt while it has retries left (`retries` of its function), else failed `preempted`
    (domain.retry). A compare-and-set on the active states: a victim that ended meanwhile is
    left as it ended."""
    by = victim.preempting_by or "higher-priority work"
    return next_attempt_or_fail(
        victim, retries, at, cause=f"preempted by {by}", kind=PREEMPTED, reason=FailureReason.preempted
    )
