"""The store's port: durable state, one narrow protocol per aggregate (functions, invocations,
their transitions, cancel requests, the cost ledger, the GPU nodes' records, API tokens, the
database's own upkeep), and `Store`, all of them, for the composition root (server.py) and the
implementation (store/: SQLite, PostgreSQL). Each caller types against the ones it uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from elasticityops.domain.batches import Batch, BatchStatus
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import FailureReason, Invocation, Note, State
from elasticityops.domain.kept_logs import KeptLog
from elasticityops.domain.node_history import NodeHistory
from elasticityops.domain.node_seconds import Charge, CostGroup, Phase, PhaseTotal, RunningTotal
from elasticityops.domain.results import ResultSummary
from elasticityops.domain.spillover import Spill
from elasticityops.domain.tokens import ApiToken, Scope
from elasticityops.domain.webhook_delivery import Delivery, DeliveryState
from elasticityops.domain.webhook_spec import WebhookSpec


@dataclass(frozen=True)
class FunctionRecord:
    spec: FunctionSpec
    version: int  # increases on every PUT that changes the spec, across deletes of the name
    created_at: datetime
    updated_at: datetime


class SpecChange(StrEnum):
    """What a deploy did to its name's current spec."""

    created = "created"  # a new name, or one deleted before: its next version
    changed = "changed"  # another spec than the current one: the next version
    unchanged = "unchanged"  # the current spec again (as stored text): its version stays


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
    # Where its events go: its function's webhook, or its own override; None: nowhere.
    webhook: WebhookSpec | None = None
    batch_id: str | None = None  # the batch it comes in (domain/batches.py); None: on its own


@dataclass(frozen=True)
class ClockReading:
    """One look at another machine's clock: this replica's clock before the question was sent,
    the other's answer, this replica's clock once the answer came."""

    sent: datetime
    remote: datetime
    received: datetime


@dataclass(frozen=True)
class Page:
    """A page of a list: its invocations carry no result (`result` None); `summaries` holds the
    summary of each one that has a result, by id, read without reading the result whole."""

    items: list[Invocation]
    next_cursor: str | None
    summaries: Mapping[str, ResultSummary] = field(default_factory=dict)


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


class FunctionStore(Protocol):
    """Function specs: the current version of each name, and every version kept."""

    async def put_function(self, spec: FunctionSpec, at: datetime) -> tuple[FunctionRecord, SpecChange]:
        """Create or replace; returns the current record and what the deploy did."""
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


class InvocationStore(Protocol):
    """Invocations in, and every read of them: one, a page, the queue in admission order, the
    active ones, and the grouped counts admission and the queue position need."""

    async def create_invocation(self, new: NewInvocation) -> tuple[Invocation, bool]:
        """Store a new invocation in state `queued`; returns (invocation, created).

        With an idempotency key already used for the same function, returns the existing
        invocation and created=False."""
        ...

    async def get_invocation(self, invocation_id: str) -> Invocation | None: ...

    async def get_payload(self, invocation_id: str) -> bytes | None: ...

    async def list_invocations(
        self,
        *,
        function: str | None,
        state: State | None,
        limit: int,
        cursor: str | None,
        batch: str | None = None,
        oldest_first: bool = False,
    ) -> Page:
        """Newest first, or with `oldest_first` in acceptance order (a batch's: input order);
        `batch`: only that batch's."""
        ...

    async def queued(self, limit: int, after: Invocation | None = None) -> list[Invocation]:
        """Queued invocations in admission order: priority (high first), then the functions'
        turns (domain/admission.py), then acceptance. With
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

    async def active_counts_by_cluster(self) -> Mapping[tuple[str, str, int, str | None], int]:
        """The same counts for the invocations whose record names the cluster that runs them
        (MultiKueue's worker), by (cluster, function, spec version, GPU type): the capacity
        page's split by cluster. Those no cluster has taken yet are not counted."""
        ...

    async def change_stamps(self, invocation_ids: Sequence[str]) -> Mapping[str, tuple[State, int]]:
        """(state, attempt) of each of these invocations that exists, in one read."""
        ...

    async def counts_by_state(self) -> Mapping[State, int]: ...


class TransitionStore(Protocol):
    """Every change to an invocation once accepted, each a compare-and-set on the row as it is:
    transitions, moves, the preemption intent, backend events and posted results."""

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


class InvocationRecords(InvocationStore, TransitionStore, Protocol):
    """Invocations read and changed: what preemption, a relaunch and a lost node's end use
    (each reads the row, then writes its compare-and-set)."""


class CancelStore(Protocol):
    """Cancels asked of a replica whose dispatcher does not run, for the one that runs it."""

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


class LedgerStore(Protocol):
    """The node-seconds ledger: what node time was spent on, and what it cost."""

    async def charge(self, charges: Sequence[Charge]) -> None:
        """Record node time that no transition ends (idle after, warm unused), once per key."""
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


class PayloadSource(Protocol):
    """Where a backend reads an invocation's payload again (the Store)."""

    async def get_payload(self, invocation_id: str) -> bytes | None: ...


class NodeHistorySource(Protocol):
    """Where the GPU node watch reads the nodes' records at its start (the Store)."""

    async def gpu_node_history(self, cluster: str = "") -> list[NodeHistory]:
        """Every GPU node's record of one cluster (domain/node_history.py; "": the gateway's
        own, else a MultiKueue worker's), written with the events that changed them: what a
        starting node watch goes on from."""
        ...


class LogKeeper(Protocol):
    """The output of attempts whose pods are deleted as they end (MultiKueue's workers), kept
    before the gateway lets the pod go (domain/kept_logs.py)."""

    async def keep_log(self, log: KeptLog) -> None:
        """Keep it (replacing what was kept of the same attempt in the same cluster); committed
        before it returns: the pod is let go only after it."""
        ...

    async def kept_log(self, invocation_id: str, attempt: int, cluster: str | None = None) -> KeptLog | None:
        """What was kept of that attempt: the one from `cluster` where given (another worker's
        run is not this one's), else the latest kept; None when nothing was."""
        ...


class TokenStore(Protocol):
    """API tokens, kept by their hash."""

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


class Housekeeping(Protocol):
    """The database itself: the gateway-wide secrets, a readiness round trip, its server's clock."""

    async def gateway_secret(self, name: str, candidate: bytes, at: datetime) -> bytes:
        """The gateway-wide secret `name`, shared by every replica; `candidate` becomes it when
        there is none yet (atomically: replicas starting together get the same one)."""
        ...

    async def ping(self) -> None:
        """Cheap round trip to the database (readiness); raises TemporaryError when it fails."""
        ...

    async def clock_reading(self, local: Callable[[], datetime]) -> ClockReading | None:
        """The database server's clock read between two readings of `local` (this replica's
        clock), for replicas to agree on one time; None where there is no server of its own to
        ask (SQLite: a file, read by this one gateway on this machine)."""
        ...


class WebhookStore(Protocol):
    """Completion webhooks: each function's signing secret and the outbox of events (written by
    the transitions themselves, in their transaction)."""

    async def issue_webhook_secret(
        self, function: str, url: str | None, candidate: str, at: datetime
    ) -> str | None:
        """After a deploy: `candidate` becomes the function's secret when `url` is not the one
        its secret was issued for (a first webhook, or another URL); returned then, else None.
        `url` None: the spec has no webhook (the secret stays for messages in the outbox)."""
        ...

    async def rotate_webhook_secret(self, function: str, candidate: str, at: datetime) -> None:
        """Make `candidate` the function's secret, from the next delivery attempt on."""
        ...

    async def webhook_secret(self, function: str) -> str | None: ...

    async def due_webhooks(self, now: datetime, limit: int, busy: Sequence[int]) -> list[Delivery]:
        """Pending messages due by `now`, each the earliest pending one of its subject (a later
        message waits for the one before), oldest due first, none of the `busy` seqs."""
        ...

    async def record_webhook_attempt(self, seq: int, state: DeliveryState) -> None: ...

    async def webhook_deliveries(self, invocation_id: str) -> list[Delivery]:
        """Every message of one invocation, in order."""
        ...

    async def webhooks_pending(self) -> int:
        """How many messages are waiting to be delivered (/metrics)."""
        ...


class BatchStore(Protocol):
    """Batches of invocations accepted in one request (domain/batches.py)."""

    async def create_batch(
        self, batch: Batch, items: Sequence[NewInvocation]
    ) -> tuple[Batch, list[Invocation], bool]:
        """Store the batch and its invocations (each `queued`, naming the batch) in one
        transaction; returns (batch, invocations in input order, created). With an idempotency
        key already used for the same function, the batch it made and its invocations, and
        created=False: nothing new is stored."""
        ...

    async def get_batch(self, batch_id: str) -> BatchStatus | None:
        """The batch and how many of its invocations are in each state; None: no such batch."""
        ...

    async def batch_states(self, batch_id: str) -> list[tuple[str, State]]:
        """Each of its invocations' id and state, in input order."""
        ...

    async def ended_among(self, invocation_ids: Sequence[str]) -> list[Invocation]:
        """Those of these invocations that have ended, without their results (as a list's)."""
        ...


class Store(
    FunctionStore,
    InvocationStore,
    BatchStore,
    TransitionStore,
    CancelStore,
    LedgerStore,
    NodeHistorySource,
    LogKeeper,
    TokenStore,
    Housekeeping,
    WebhookStore,
    Protocol,
):
    """Durable state, all of it: what the composition root opens and closes. Every write is
    committed before the call returns."""

    async def close(self) -> None: ...
