"""The narrow seams between the pure core and the outside world: the store and the backends.

Implementations: store/ (SQLite, PostgreSQL), backends/local (processes + GPU slots),
backends/kubernetes (Jobs). The dispatcher and the API only ever talk to these protocols."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from elasticityops.domain.events import BackendEvent
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import FailureReason, Invocation, Note, State
from elasticityops.domain.node_history import NodeHistory
from elasticityops.domain.node_seconds import Charge, CostGroup, Phase, PhaseTotal, RunningTotal
from elasticityops.domain.spillover import Spill
from elasticityops.domain.tokens import ApiToken, Scope


@dataclass(frozen=True)
class FunctionRecord:
    spec: FunctionSpec
    version: int  # increases on every PUT that changes the spec, across deletes of the name
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class NewInvocation:
    id: str
    function: str
    spec_version: int
    priority_rank: int
    accepted_at: datetime
    payload: bytes
    idempotency_key: str | None = None
    # Per-invocation pod annotations, `eops.dev/` keys only (domain/invocation_annotations.py).
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClockReading:
    """One look at another machine's clock: this replica's clock before the question was sent,
    the other's answer, this replica's clock once the answer came."""

    sent: datetime
    remote: datetime
    received: datetime


@dataclass(frozen=True)
class Page:
    items: list[Invocation]
    next_cursor: str | None


@dataclass(frozen=True)
class Change:
    """A transition to apply if the invocation is still in one of `from_states`
    (compare-and-set, so two writers never both win)."""

    id: str
    to: State
    at: datetime
    from_states: frozenset[State] | None = None  # None: any state the table allows
    exit_code: int | None = None
    reason: FailureReason | None = None
    message: str | None = None
    node: str | None = None
    gpu_type: str | None = None  # admission: the GPU type it is launched on
    note: Note | None = None  # added to its notes with the transition (a preemption says by whom)
    attempt: int | None = None  # compare-and-set on the attempt too (None: any attempt)


class NodeHistorySource(Protocol):
    """Where the GPU node watch reads the nodes' records at its start (the Store)."""

    async def gpu_node_history(self) -> list[NodeHistory]: ...


class Store(Protocol):
    """Durable state. Every write is committed before the call returns."""

    async def put_function(self, spec: FunctionSpec, at: datetime) -> tuple[FunctionRecord, bool]:
        """Create or replace; returns (record, created)."""
        ...

    async def get_function(self, name: str) -> FunctionRecord | None:
        """The current version of a function that exists (not deleted)."""
        ...

    async def get_function_version(self, name: str, version: int) -> FunctionSpec | None:
        """That version of the name's spec, kept even after the name was deleted or changed."""
        ...

    async def list_functions(self) -> list[FunctionRecord]: ...
    async def delete_function(self, name: str, at: datetime) -> bool:
        """Tombstone the name (its versions stay); False when there was none."""
        ...

    async def functions_generation(self) -> int:
        """A counter every function write (deploy, delete) bumps in its own transaction: how a
        replica learns that another one changed a function."""
        ...

    async def gateway_secret(self, name: str, candidate: bytes, at: datetime) -> bytes:
        """The gateway-wide secret `name`, shared by every replica; `candidate` becomes it when
        there is none yet (atomically: replicas starting together get the same one)."""
        ...

    async def create_invocation(self, new: NewInvocation) -> tuple[Invocation, bool]:
        """Store a new invocation in state `queued`; returns (invocation, created).

        With an idempotency key already used for the same function, returns the existing
        invocation and created=False."""
        ...

    async def get_invocation(self, invocation_id: str) -> Invocation | None: ...
    async def get_payload(self, invocation_id: str) -> bytes | None: ...
    async def list_invocations(
        self, *, function: str | None, state: State | None, limit: int, cursor: str | None
    ) -> Page: ...

    async def queued(self, limit: int, after: Invocation | None = None) -> list[Invocation]:
        """Queued invocations in admission order: priority (high first), then acceptance. With
        `after`, those behind it in that order (the next page)."""
        ...

    async def queued_ahead(self, invocation: Invocation) -> Mapping[tuple[str, int], int]:
        """How many queued invocations admission orders before `invocation`, by (function, spec
        version): those of a higher priority and those of its priority accepted before it
        (admission order, domain.admission). What its queue position is counted from."""
        ...

    async def active(self) -> list[Invocation]:
        """Invocations in pending or running."""
        ...

    async def small_payloads(self, invocation_ids: Sequence[str], max_bytes: int) -> dict[str, bytes]:
        """The payloads of those invocations that are at most `max_bytes` long, in one read (a
        burst's admissions need theirs at once; larger ones are read one by one at launch)."""
        ...

    async def active_counts_by_type(self) -> Mapping[tuple[str, int, str | None], int]:
        """How many invocations are pending or running, by (function, spec version, the GPU type
        each was admitted on: None for rows from before the gateway kept it): what admission
        needs each cycle (concurrency per function, GPUs per version and type), without reading
        every active row."""
        ...

    async def request_cancel(self, invocation_id: str, at: datetime) -> Invocation | None:
        """Record a cancel for the running dispatcher to carry out (compare-and-set: a pending
        or running invocation without one). The invocation as it is then; None when unknown."""
        ...

    async def cancel_requests(self, limit: int) -> list[Invocation]:
        """Invocations with a recorded cancel request, oldest request first."""
        ...

    async def drop_cancel_requests(self, invocation_ids: Sequence[str]) -> int:
        """Clear the requests of those of these invocations that have ended; how many."""
        ...

    async def change_stamps(self, invocation_ids: Sequence[str]) -> Mapping[str, tuple[State, int]]:
        """(state, attempt) of each of these invocations that exists, in one read."""
        ...

    async def apply(self, change: Change) -> Invocation | None:
        """Apply a transition; None when the compare-and-set lost (state moved on)."""
        ...

    async def spill(self, invocation_id: str, current: str, spill: Spill, at: datetime) -> Invocation | None:
        """Move a pending invocation from GPU type `current` to `spill.to`, noting why
        (`spillover.moved`), as one compare-and-set; None when it is no longer pending on
        `current` without a node."""

    async def mark_preempting(self, invocation_id: str, by: str, note: Note) -> Invocation | None:
        """Record the intent to preempt a pending or running invocation for `by` (and the note
        that says so), as a compare-and-set: None when it is no longer active or is being
        preempted already. Written before its job is stopped, so a restart finishes it."""
        ...

    async def record(self, event: BackendEvent) -> tuple[State, Invocation] | None:
        """Fold a backend event into its invocation (`events.apply_event`) and write it as one
        compare-and-set UPDATE: transition, notes, milestones and result together. Returns
        (state before, invocation after), or None when it changed nothing (an unknown id, an
        invocation already over, a milestone already passed)."""
        ...

    async def set_result(self, invocation_id: str, result: bytes) -> State | None:
        """Store a result the job posted, as a compare-and-set: only while the invocation is
        pending or running. None: stored; else the state that refused it (not started yet, or
        ended: an ended invocation's result is final). Raises NotFound for an unknown id."""
        ...

    async def counts_by_state(self) -> Mapping[State, int]: ...

    async def charge(self, charges: Sequence[Charge]) -> None:
        """Record node time that no transition ends (idle after, warm unused), once per key."""
        ...

    async def gpu_node_history(self) -> list[NodeHistory]:
        """Every GPU node's record (domain/node_history.py), written with the events that
        changed them: what a starting node watch goes on from."""
        ...

    async def node_seconds_of(self, invocation_id: str) -> Mapping[Phase, PhaseTotal]:
        """Each phase's node-seconds and cost over the invocation's ended attempts."""
        ...

    async def cost_report(self, since: datetime, until: datetime, by: Sequence[str]) -> list[CostGroup]:
        """Node-seconds and cost per group (`by`: "function", "hour", both or neither)."""
        ...

    async def node_seconds_totals(self) -> list[RunningTotal]:
        """Node-seconds and cost per function, phase and capacity since the ledger began."""
        ...

    async def ping(self) -> None:
        """Cheap round trip to the database (readiness); raises TemporaryError when it fails."""
        ...

    async def clock_reading(self, local: Callable[[], datetime]) -> ClockReading | None:
        """The database server's clock read between two readings of `local` (this replica's
        clock), for replicas to agree on one time; None where there is no server of its own to
        ask (SQLite: a file, read by this one gateway on this machine)."""
        ...

    async def create_api_token(
        self,
        name: str,
        token_hash: str,
        at: datetime,
        *,
        scope: Scope = Scope.admin,
        expires_at: datetime | None = None,
    ) -> ApiToken:
        """Keep a token's hash (Conflict if it is there already); the id derives from the hash."""
        ...

    async def check_api_token(self, token_hash: str) -> ApiToken | None:
        """The token with this hash, expired or not; None when there is none."""
        ...

    async def list_api_tokens(self) -> list[ApiToken]: ...

    async def revoke_api_token(self, id_: str) -> bool:
        """Delete the token with this id at once; False when there is none."""
        ...

    async def close(self) -> None: ...


EventSink = Callable[[BackendEvent], Awaitable[None]]


@dataclass(frozen=True)
class LaunchRequest:
    invocation: Invocation
    spec: FunctionSpec
    payload: bytes
    callback_url: str | None  # where the job POSTs its result, with `callback_token`
    callback_token: str


class Backend(Protocol):
    name: str

    async def start(self, sink: EventSink) -> None:
        """Begin watching; every observation is delivered to `sink`."""
        ...

    async def stop(self) -> None:
        """Stop watching. Running jobs keep running (a restart adopts them)."""
        ...

    def free_gpus(self) -> int | None:
        """GPUs that can start work now; None when the backend has no fixed limit."""
        ...

    def total_gpus(self) -> int | None:
        """The most GPUs it can ever offer at once; None when there is no fixed limit. The
        dispatcher fails an invocation needing more at once instead of queueing it forever."""
        ...

    def max_payload_bytes(self) -> int | None:
        """The largest payload a launch can carry (bytes); None: no limit of its own. The API
        refuses larger ones at once (413) instead of accepting them to fail at launch."""
        ...

    async def launch(self, request: LaunchRequest) -> None:
        """Start the invocation. Idempotent: launching one that exists already is a no-op.
        Every failure to launch is reported through the sink as the invocation's end
        (reason launch_error), never raised: one route for every way a job can end."""
        ...

    async def cancel(self, invocation: Invocation) -> None: ...

    async def preempt(self, invocation: Invocation) -> None:
        """Stop the job of this attempt of the invocation (delete the Job, kill the process)
        for good, without reporting it as cancelled: the dispatcher records the preemption.
        Idempotent; a later attempt of the same invocation gets a job of its own."""
        ...

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        """After a restart: re-attach to the work of these invocations. Returns the ids of
        which the backend has no trace (never launched, or gone)."""
        ...

    def logs(self, invocation: Invocation, follow: bool) -> AsyncIterator[bytes]: ...


@dataclass(frozen=True)
class ClientCounters:
    """What a backend's client of its cluster has met since it started: for /metrics, so that
    throttling (429), server errors (5xx) and expired watches (410) can be seen and counted."""

    errors: Mapping[str, int]
    """Error answers by status code ("429", "500", "504", "410"), and "connection" for failed
    connections; retried ones included."""
    retries: int
    """Requests sent again after a 429, a 5xx or a failed connection."""
    watch_restarts: Mapping[str, int]
    """Watches started again, by why: "ended" (the server's timeout), "expired" (410 Gone: listed
    again), "dropped" (a failed connection or an error answer)."""
    credential_refreshes: int = 0
    """Credentials asked for again after a 401 (a rotated service-account token read again)."""


@runtime_checkable
class CountsClientFaults(Protocol):
    """A backend whose client of a cluster counts its faults (the kubernetes one)."""

    def client_counters(self) -> ClientCounters: ...
