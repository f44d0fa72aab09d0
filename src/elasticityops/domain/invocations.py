"""An invocation's life as one explicit state machine.

accepted -> queued -> pending (waiting for capacity: node provisioning, image pull) -> running
-> succeeded | failed | cancelled | timed_out. Every transition is stamped, so each invocation can
say where its time went (queue, capacity, start, run). Preemption puts a pending or running one
back in the queue as its next attempt (`attempt` counts them; each attempt is a job of its own)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from elasticityops.domain.errors import InvalidTransition
from elasticityops.domain.functions import Priority
from elasticityops.pricing.table import Capacity


class State(StrEnum):
    queued = "queued"
    pending = "pending"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    timed_out = "timed_out"

    @property
    def terminal(self) -> bool:
        return not TRANSITIONS[self]


TRANSITIONS: dict[State, frozenset[State]] = {
    State.queued: frozenset(
        {
            State.pending,  # admitted: handed to the backend, waiting for a GPU
            State.cancelled,  # the user cancelled before it was admitted
            State.failed,  # its function was deleted or could not be launched at all
        }
    ),
    State.pending: frozenset(
        {
            State.running,  # capacity found, the process / container started
            State.succeeded,  # so short that we saw only its end
            State.failed,  # launch failed, image pull error, no capacity within the limit
            State.cancelled,
            State.timed_out,  # the deadline covers the wait for capacity too
            # Preempted by higher-priority work, with retries left: back in the queue, at its
            # place by priority and acceptance, as a new attempt (a job of its own).
            State.queued,
        }
    ),
    State.running: frozenset(
        {
            State.succeeded,
            State.failed,  # includes preempted with no retries left
            State.cancelled,
            State.timed_out,
            State.queued,  # preempted or its node lost, retries left: requeued as its next attempt
        }
    ),
    # Terminal states: no way out.
    State.succeeded: frozenset(),
    State.failed: frozenset(),
    State.cancelled: frozenset(),
    State.timed_out: frozenset(),
}

ACTIVE_STATES = (State.pending, State.running)


class FailureReason(StrEnum):
    """Why an invocation did not succeed, named for the user: one vocabulary for every backend
    (a backend maps what it sees onto these; a new cause, such as priority preemption, joins
    this list rather than a backend's own)."""

    exit_code = "exit_code"  # the job exited non-zero
    timeout = "timeout"  # ran past timeout_seconds (a Job's DeadlineExceeded, a killed process)
    cancelled = "cancelled"
    launch_error = "launch_error"  # the command could not be started (not found, not executable)
    image_pull = "image_pull"
    oom_killed = "oom_killed"
    evicted = "evicted"  # lost or preempted node (spot), pod evicted
    no_capacity = "no_capacity"  # no GPU within the provisioning timeout
    function_deleted = "function_deleted"
    lost = "lost"  # the backend has no trace of it after a restart
    preempted = "preempted"  # the gateway stopped it for higher-priority work; no retries left


@dataclass(frozen=True)
class Timeline:
    """Timestamps of the milestones; None until reached."""

    accepted: datetime
    dispatched: datetime | None = None  # admitted and handed to the backend
    capacity_ready: datetime | None = None  # a GPU (slot / node) is assigned
    started: datetime | None = None  # the process / container is running
    finished: datetime | None = None
    preempted: datetime | None = None  # the latest requeue (preempted, or its node lost)

    def durations(self) -> dict[str, float | None]:
        """Seconds spent in each phase: queue, capacity, start, run."""

        def span(a: datetime | None, b: datetime | None) -> float | None:
            return None if a is None or b is None else max(0.0, (b - a).total_seconds())

        return {
            "queue": span(self.accepted, self.dispatched),
            "capacity": span(self.dispatched, self.capacity_ready),
            "start": span(self.capacity_ready, self.started),
            "run": span(self.started, self.finished),
            "time_to_start": span(self.accepted, self.started),
            "total": span(self.accepted, self.finished),
        }


@dataclass(frozen=True)
class Note:
    """Something the backend saw that explains the wait (TriggeredScaleUp, slot warming, ...)."""

    at: datetime
    kind: str
    message: str


@dataclass(frozen=True)
class Invocation:
    id: str
    function: str
    state: State
    priority: Priority
    timeline: Timeline
    idempotency_key: str | None = None
    exit_code: int | None = None
    failure_reason: FailureReason | None = None
    message: str = ""
    result: bytes | None = None
    node: str | None = None  # where it ran: GPU slot or Kubernetes node
    notes: tuple[Note, ...] = field(default_factory=tuple)
    # The version of its function's spec it was accepted with, and the one it runs.
    spec_version: int = 1
    # Its own pod annotations (`eops.dev/` keys, checked at accept): on top of its function's.
    annotations: Mapping[str, str] = field(default_factory=dict)
    # The GPU type it was admitted on (one of its spec's gpu.types); None while queued, and for
    # invocations admitted before the gateway kept it (their spec's first type).
    gpu_type: str | None = None
    attempt: int = 0  # 0 for the first run; one more each time preemption or a lost node requeues it
    preempting_by: str | None = None
    """While being preempted: the invocation it makes way for. Durable intent, so a gateway that
    dies between stopping the job and requeueing it finishes the preemption on restart."""
    cancel_requested: datetime | None = None
    """When a cancel was asked of a replica whose dispatcher does not run (only the running
    dispatcher's backend can stop the job): the request it carries out. An end clears it."""
    node_since: datetime | None = None
    """When the current attempt's node began to be its cost: the node's creation for a node made
    for it, the moment it was picked for warm capacity (`warm`). None: a local slot, or a node
    the backend knows nothing of; its node time then counts from capacity_ready."""
    warm: bool = False
    node_capacity: Capacity | None = None
    """What the current attempt's node is priced as (spot or on demand, from its labels). None:
    a local slot, or a node the backend knows nothing of: the backend's own (capacity_of_backend)."""
    batch_id: str | None = None
    """The batch it was accepted in (domain/batches.py); None: accepted on its own."""
    cluster: str | None = None
    """The cluster its current attempt runs in where several run the work (Kueue's MultiKueue:
    the worker that admitted it); None with one cluster, and until a worker admits it."""


def advance(
    inv: Invocation,
    to: State,
    at: datetime,
    *,
    exit_code: int | None = None,
    reason: FailureReason | None = None,
    message: str | None = None,
    node: str | None = None,
    gpu_type: str | None = None,
) -> Invocation:
    """Return `inv` moved to `to` at time `at`, with its timeline filled in.

    Refuses transitions the table does not allow. Moving to the state it is already in is not
    a transition and is refused too, so callers can tell a lost race from progress."""
    if to not in TRANSITIONS[inv.state]:
        raise InvalidTransition(f"invocation {inv.id} cannot go from {inv.state} to {to}")
    tl = inv.timeline
    if to is State.queued:
        # A new attempt: the milestones of the one that was stopped no longer apply.
        preempted = _not_before(at, tl)
        tl = Timeline(accepted=tl.accepted, preempted=preempted)
        return replace(
            inv,
            state=to,
            timeline=tl,
            attempt=inv.attempt + 1,
            preempting_by=None,
            exit_code=None,
            failure_reason=None,
            message=message if message is not None else inv.message,
            node=None,
            result=None,
            node_since=None,
            warm=False,
            node_capacity=None,
            cluster=None,
        )
    if to is State.pending:
        tl = replace(tl, dispatched=tl.dispatched or _not_before(at, tl))
    elif to is State.running or to is State.succeeded:
        capacity_ready = tl.capacity_ready or _not_before(at, tl)
        tl = replace(tl, capacity_ready=capacity_ready)
        tl = replace(tl, started=tl.started or _not_before(at, tl))
    if to.terminal:
        tl = replace(tl, finished=_not_before(at, tl))
    if to is State.cancelled and reason is None:
        reason = FailureReason.cancelled
    if to is State.timed_out and reason is None:
        reason = FailureReason.timeout
    return replace(
        inv,
        state=to,
        timeline=tl,
        exit_code=exit_code if exit_code is not None else inv.exit_code,
        failure_reason=reason if reason is not None else inv.failure_reason,
        message=message if message is not None else inv.message,
        node=node if node is not None else inv.node,
        gpu_type=gpu_type if gpu_type is not None else inv.gpu_type,
        preempting_by=None if to.terminal else inv.preempting_by,
        cancel_requested=None if to.terminal else inv.cancel_requested,
    )


def mark_capacity_ready(inv: Invocation, at: datetime, node: str | None = None) -> Invocation:
    """A GPU was assigned while still pending (node found, image pulling)."""
    if inv.state is not State.pending or inv.timeline.capacity_ready is not None:
        return inv
    ready = _not_before(at, inv.timeline)
    return replace(inv, timeline=replace(inv.timeline, capacity_ready=ready), node=node or inv.node)


def _not_before(at: datetime, timeline: Timeline) -> datetime:
    """`at`, or the latest milestone already set if that is later. Kubernetes stamps container
    start and finish in whole seconds (and a cluster's clock is not the gateway's), so a
    container could seem to start before it was dispatched; milestones never go backwards."""
    earlier = [
        t
        for t in (
            timeline.accepted,
            timeline.dispatched,
            timeline.capacity_ready,
            timeline.started,
            timeline.finished,
            timeline.preempted,
        )
        if t is not None
    ]
    return max([at, *earlier])


def add_note(inv: Invocation, note: Note, limit: int = 50) -> Invocation:
    """Keep the most recent `limit` notes: enough to explain a wait, bounded in size."""
    return replace(inv, notes=(*inv.notes, note)[-limit:])


def new_invocation_id(
    now_ns: int | None = None,
    random_bytes: Callable[[int], bytes] = os.urandom,
    *,
    at: datetime | None = None,
) -> str:
    """Time-ordered id (48-bit milliseconds + 80 random bits, base32), so ids sort by
    acceptance and serve as pagination cursors. Lowercase and DNS-safe, so a Kubernetes Job
    name can be derived from it. `random_bytes` lets a hot caller draw from a buffer of
    os.urandom output instead of one system call per id. `at`: the acceptance time, as stamped
    (the gateway's clock, the same on every replica), so that ids of invocations accepted by
    different replicas sort as their acceptance does."""
    if at is not None:
        ms = (at - _EPOCH) // _MILLISECOND
    else:
        ms = (now_ns if now_ns is not None else time.time_ns()) // 1_000_000
    raw = ms.to_bytes(6, "big") + random_bytes(10)
    return "inv-" + _b32(raw)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lowercase


def _b32(raw: bytes) -> str:
    number = int.from_bytes(raw, "big")
    chars = []
    for _ in range((len(raw) * 8 + 4) // 5):
        chars.append(_ALPHABET[number & 31])
        number >>= 5
    return "".join(reversed(chars))


def callback_token(server_secret: bytes, invocation_id: str) -> str:
    """Per-invocation secret the job uses to hand back its result.

    Derived (HMAC) rather than stored, so a relaunch after a restart can hand the job the same
    token and nothing secret sits in the database."""
    digest = hmac.new(server_secret, invocation_id.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def check_callback_token(server_secret: bytes, invocation_id: str, token: str | bytes) -> bool:
    """Compared as bytes: `hmac.compare_digest` refuses a str holding non-ASCII, and a header
    can hold any byte (Starlette hands it over decoded as latin-1, which encodes back exactly)."""
    if isinstance(token, bytes):
        raw = token
    else:
        try:
            raw = token.encode("latin-1")
        except UnicodeEncodeError:
            raw = token.encode("utf-8", "surrogatepass")
    return hmac.compare_digest(callback_token(server_secret, invocation_id).encode("ascii"), raw)
