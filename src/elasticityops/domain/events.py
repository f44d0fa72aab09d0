"""What a backend observes about an invocation, and what that does to it: one event type, one
outcome, and the pure fold that the store applies in one write.

A backend reports facts (a GPU was assigned, the job started, a note that explains the wait, how
it ended); it never decides the invocation's state. `apply_event` is the only place where an
observation becomes a state: the store runs it inside the compare-and-set that writes the row,
so a repeated or late event (a `finished` after a cancel already ended it) changes nothing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from elasticityops.domain import kueue_notes
from elasticityops.domain.invocations import (
    FailureReason,
    Invocation,
    Note,
    State,
    add_note,
    advance,
    mark_capacity_ready,
)
from elasticityops.domain.node_history import NodeHistoryWrite
from elasticityops.domain.node_seconds import Charge, WorkerRun
from elasticityops.domain.results import as_stored
from elasticityops.pricing.table import Capacity

# The reason each terminal state other than `failed` always carries.
_REASON_OF = {State.cancelled: FailureReason.cancelled, State.timed_out: FailureReason.timeout}


@dataclass(frozen=True)
class Finished:
    """How a job ended, said once: the terminal state and why. Both backends speak the same
    reasons (FailureReason); a lost or preempted node is `evicted` on either."""

    state: State
    at: datetime
    reason: FailureReason | None = None
    exit_code: int | None = None
    message: str = ""
    result: bytes | None = None  # what the job left as its result (a callback's result wins)
    lost_node: str | None = None
    """The node that went away under the job (spot preemption, node deleted or shut down): an
    `evicted` end through no fault of its own, retried as its function's `retries` say
    (domain.retry). A process killed by a signal it did not ask for is no lost node."""
    preempted_by: str | None = None
    """What outside the gateway stopped the job for higher-priority work (Kueue, which owns
    admission with `--admission kueue`): a `preempted` end through no fault of its own, retried
    as its function's `retries` say, as the gateway's own preemption is."""

    def __post_init__(self) -> None:
        if not self.state.terminal:
            raise ValueError(f"a job ends in a terminal state, not {self.state}")
        expected = _REASON_OF.get(self.state)
        if expected is not None and self.reason is not expected:
            raise ValueError(f"{self.state} carries reason {expected}, not {self.reason}")
        if self.state is State.succeeded and self.reason is not None:
            raise ValueError("a success has no failure reason")
        if self.state is State.failed and self.reason is None:
            raise ValueError("a failure names its reason")
        if self.lost_node is not None and self.reason is not FailureReason.evicted:
            raise ValueError("a lost node is an eviction")
        if self.preempted_by is not None and self.reason is not FailureReason.preempted:
            raise ValueError("a preemption carries reason preempted")

    @classmethod
    def succeeded(cls, at: datetime, *, result: bytes | None = None, message: str = "") -> Finished:
        return cls(State.succeeded, at, exit_code=0, message=message, result=result)

    @classmethod
    def failed(
        cls,
        at: datetime,
        reason: FailureReason,
        message: str,
        *,
        exit_code: int | None = None,
        lost_node: str | None = None,
    ) -> Finished:
        return cls(State.failed, at, reason=reason, exit_code=exit_code, message=message, lost_node=lost_node)

    @classmethod
    def cancelled(cls, at: datetime, message: str = "cancelled") -> Finished:
        return cls(State.cancelled, at, reason=FailureReason.cancelled, message=message)

    @classmethod
    def timed_out(cls, at: datetime, message: str, *, exit_code: int | None = None) -> Finished:
        return cls(State.timed_out, at, reason=FailureReason.timeout, exit_code=exit_code, message=message)


@dataclass(frozen=True)
class BackendEvent:
    """Everything one observation told about one invocation: milestones with their own times,
    a note, and the end. A pod seen for the first time already finished carries all three, and
    is still one event and one store write."""

    invocation_id: str
    node: str | None = None  # where it is placed (GPU slot or Kubernetes node), when known
    capacity_ready: datetime | None = None  # a GPU was assigned (node found, image pulling)
    started: datetime | None = None  # the process / container is running
    note: Note | None = None  # an explanation of the wait (TriggeredScaleUp, SlotWarming, ...)
    finished: Finished | None = None
    attempt: int | None = None
    """The attempt whose job was observed (None: the backend cannot tell). A preempted
    attempt's job may still report while it goes away; that is no news of the attempt after."""
    node_since: datetime | None = None  # with the placement: see Invocation.node_since
    warm: bool | None = None  # with the placement: it landed on capacity that was there already
    node_capacity: Capacity | None = None  # with the placement: its node's (spot, on demand)
    cluster: str | None = None  # the worker cluster that admitted it (MultiKueue), when known
    charges: tuple[Charge, ...] = ()
    """Node time the observation closed that no transition of the invocation ends (its node's
    idle time after it, warm capacity no one used): written to the ledger as they are. An
    event of node time only names no invocation (invocation_id "")."""
    worker_runs: tuple[WorkerRun, ...] = ()
    """The runs of this attempt that are over in MultiKueue's workers, where it ran in more than
    one (told again each time one more is over): what they held beyond the record's run is
    charged as `run_again` (node_seconds.run_again_charge), changing nothing else of the record."""
    node_history: tuple[NodeHistoryWrite, ...] = ()
    """The changes of GPU nodes' records the observation made (domain/node_history.py),
    written in the same transaction as `charges`, in order: a record forgotten with the
    charges that close it, so neither is ever kept without the other."""

    @property
    def parts(self) -> tuple[str, ...]:
        """What it tells, in the order of an invocation's life (for logs and tests)."""
        told = (
            ("note", self.note),
            ("capacity_ready", self.capacity_ready),
            ("started", self.started),
            ("finished", self.finished),
            ("charges", self.charges or None),
            ("worker_runs", self.worker_runs or None),
            ("node_history", self.node_history or None),
        )
        return tuple(name for name, value in told if value is not None)

    @property
    def tells_something(self) -> bool:
        return bool(self.parts)


def note_event(
    invocation_id: str, at: datetime, kind: str, message: str, *, node: str | None = None
) -> BackendEvent:
    return BackendEvent(invocation_id, node=node, note=Note(at=at, kind=kind, message=message))


def finished_event(invocation_id: str, finished: Finished, *, node: str | None = None) -> BackendEvent:
    return BackendEvent(invocation_id, node=node, finished=finished)


def apply_event(inv: Invocation, event: BackendEvent) -> Invocation:
    """`inv` after the event: the one decision of what an observation does. Returns `inv`
    itself when it changes nothing (an ended invocation, a milestone already passed)."""
    if inv.state.terminal or (inv.state is State.queued and inv.attempt > 0):
        return inv  # ended, or between attempts: what a stopped job says is about the old one
    if event.attempt is not None and event.attempt != inv.attempt:
        return inv
    noted = inv if event.note is None or _told_already(inv, event.note) else add_note(inv, event.note)
    after = _with_node(noted, event)
    if event.capacity_ready is not None and after.state is State.pending:
        after = mark_capacity_ready(after, event.capacity_ready, event.node)
    if event.started is not None and after.state is State.pending:
        after = advance(after, State.running, event.started, node=event.node)
    end = event.finished
    if end is not None and inv.preempting_by is not None and end.state is not State.succeeded:
        # Being preempted: its job ends because the gateway stops it; the preemption records
        # how (requeued or failed `preempted`). A success that got there first still counts.
        end = None
    if end is not None and after.state in (State.pending, State.running):
        if end.result is not None and after.result is None:
            after = replace(after, result=as_stored(end.result))
        after = advance(
            after,
            end.state,
            end.at,
            exit_code=end.exit_code,
            reason=end.reason,
            message=end.message,
            node=event.node,
        )
    return after


# A note that takes back the word of earlier kinds: after it, that word again is news (MultiKueue
# dispatching the work back to the worker it took it from, the gateway nominating it again).
_TAKES_BACK = {kueue_notes.LEFT_WORKER: frozenset({kueue_notes.DISPATCHED, kueue_notes.NOMINATED})}


def _told_already(inv: Invocation, note: Note) -> bool:
    """The latest note of its kind says the same, and none taking it back came since: a watch's
    relist after a restart (or an object updated with nothing new to say) tells it again, and
    the timeline keeps it once."""
    for earlier in reversed(inv.notes):
        if earlier.kind == note.kind:
            return earlier.message == note.message
        if note.kind in _TAKES_BACK.get(earlier.kind, ()):
            return False
    return False


def _with_node(inv: Invocation, event: BackendEvent) -> Invocation:
    """What the event says of the node, where the invocation does not know it yet."""
    after = inv
    if event.node_since is not None and after.node_since is None:
        # The first word stands: a relist after a restart reads a node whose past it does not
        # know, and would take the node made for this attempt for a warm one.
        after = replace(after, node_since=event.node_since, warm=bool(event.warm))
    if event.node_capacity is not None and after.node_capacity is None:
        after = replace(after, node_capacity=event.node_capacity)
    if event.cluster is not None and after.cluster != event.cluster:
        # The latest word stands: a worker that evicts it hands it back to MultiKueue, which may
        # run the same attempt in another cluster.
        after = replace(after, cluster=event.cluster)
    return after
