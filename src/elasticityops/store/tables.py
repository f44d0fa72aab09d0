"""The database schema (SQLAlchemy Core), the same for SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in and out: SQLite keeps no zone, so it is attached on read."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use an aware UTC datetime")
        value = value.astimezone(UTC)
        # SQLite stores the text form; dropping the zone keeps it sortable as text.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData()

_CANCEL_REQUESTED = "cancel_requested_at IS NOT NULL"
_IN_A_BATCH = "batch_id IS NOT NULL"
_QUEUED = "state = 'queued'"

functions = Table(
    "functions",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("spec", Text, nullable=False),  # canonical JSON of the FunctionSpec
    Column("version", Integer, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    # A deleted function's row stays as a tombstone, so that its versions keep counting up when
    # the name is deployed again (an invocation names its spec by name and version).
    Column("deleted_at", UtcDateTime, nullable=True),
)

# Every version of every function's spec, never changed once written: an invocation runs the
# version it was accepted with (invocations.spec_version), whatever was deployed since.
function_versions = Table(
    "function_versions",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("spec", Text, nullable=False),  # canonical JSON of the FunctionSpec
    Column("created_at", UtcDateTime, nullable=False),
)

invocations = Table(
    "invocations",
    metadata,
    # Time-ordered id: the primary key is also the pagination cursor and the acceptance order.
    Column("id", String(40), primary_key=True),
    Column("function", String(64), nullable=False),
    Column("spec_version", Integer, nullable=False),
    Column("priority", String(16), nullable=False),
    Column("state", String(16), nullable=False),
    Column("idempotency_key", String(256), nullable=True),
    Column("accepted_at", UtcDateTime, nullable=False),
    Column("dispatched_at", UtcDateTime, nullable=True),
    Column("capacity_ready_at", UtcDateTime, nullable=True),
    Column("started_at", UtcDateTime, nullable=True),
    Column("finished_at", UtcDateTime, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("failure_reason", String(32), nullable=True),
    Column("message", Text, nullable=False, default=""),
    Column("node", String(256), nullable=True),
    # The GPU type it was admitted on; NULL while queued and in rows from before migration 0007.
    Column("gpu_type", String(64), nullable=True),
    Column("notes", Text, nullable=False, default="[]"),  # JSON list, bounded by add_note's limit
    # Preemption: which attempt this is (each its own job), when it was last preempted, and
    # the invocation it is making way for while that is under way (the durable intent).
    Column("attempt", Integer, nullable=False, server_default="0"),
    Column("preempted_at", UtcDateTime, nullable=True),
    Column("preempting_by", String(40), nullable=True),
    # Its own pod annotations as a JSON object (bounded by domain.invocation_annotations);
    # NULL when it has none, as every row from before the column has.
    Column("annotations", Text, nullable=True),
    # A cancel asked of a replica whose dispatcher does not run, for the running one to carry
    # out (only its backend can stop the job); an end clears it.
    Column("cancel_requested_at", UtcDateTime, nullable=True),
    # Where the current attempt's node time starts (domain.node_seconds): the node's creation,
    # or its pick from warm capacity (warm_pick 1). NULL: a local slot, or a node not known.
    Column("node_since_at", UtcDateTime, nullable=True),
    Column("warm_pick", Integer, nullable=False, server_default="0"),
    # What that node is priced as (pricing.table.Capacity: spot, on-demand), from its labels.
    # NULL: a local slot, a node not known, or a row from before migration 0012: the backend's.
    Column("node_capacity", String(16), nullable=True),
    # The batch it was accepted in (batches.id); NULL: accepted on its own, as every row from
    # before migration 0016.
    Column("batch_id", String(40), nullable=True),
    # The worker cluster its current attempt runs in (MultiKueue); NULL with one cluster, and in
    # rows from before migration 0018.
    Column("cluster", String(256), nullable=True),
    # The large values last (migration 0015 put them there on SQLite, which walks a large value's
    # overflow pages to reach any column after it; a new column goes above, docs/migrations.md).
    # The result's first PREVIEW_BYTES, written with it: a list reads this and the result's
    # length, never the result. NULL with no result, and in rows an earlier release wrote (a list
    # then cuts the head from the result).
    Column("result_head", LargeBinary, nullable=True),
    Column("result", LargeBinary, nullable=True),
    # Kept in the row but never selected by listings, which name their columns.
    Column("payload", LargeBinary, nullable=False),
    # NULL keys never collide (both databases treat NULLs as distinct in unique constraints).
    UniqueConstraint("function", "idempotency_key", name="uq_invocation_idempotency"),
    Index("ix_invocations_state_id", "state", "id"),
    Index("ix_invocations_function_id", "function", "id"),
    # A queued invocation's queue position counts the queued ones ahead of it by priority and id.
    Index("ix_invocations_state_priority_id", "state", "priority", "id"),
    # The dispatcher's look for cancel requests each tick. Partial (both databases have them):
    # the column is NULL in nearly every row, and an insert then adds no entry to it (a fifth
    # index on every accepted row showed in bench/gateway_accept.py).
    Index(
        "ix_invocations_cancel_requested_at",
        "cancel_requested_at",
        sqlite_where=text(_CANCEL_REQUESTED),
        postgresql_where=text(_CANCEL_REQUESTED),
    ),
    # The queue in admission order (store/fair_queue.py): the functions' turns within a
    # priority are counted over it. Partial: only queued rows have an entry.
    Index(
        "ix_invocations_queued_priority_function_id",
        "priority",
        "function",
        "id",
        sqlite_where=text(_QUEUED),
        postgresql_where=text(_QUEUED),
    ),
    # A batch's invocations, in input order (their ids). Partial, as the one above: a single
    # accept adds no entry to it.
    Index(
        "ix_invocations_batch_id_id",
        "batch_id",
        "id",
        sqlite_where=text(_IN_A_BATCH),
        postgresql_where=text(_IN_A_BATCH),
    ),
)

# Batches of invocations accepted in one request (domain/batches.py): each invocation of one
# names it (invocations.batch_id). The idempotency key is the batch's own; each of its
# invocations carries one derived from it (`KEY#i`).
batches = Table(
    "batches",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("function", String(64), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("count", Integer, nullable=False),
    Column("idempotency_key", String(256), nullable=True),
    UniqueConstraint("function", "idempotency_key", name="uq_batch_idempotency"),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("token_hash", String(64), primary_key=True),  # sha256 hex; the token itself is never stored
    Column("name", String(128), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    # domain.tokens.Scope; tokens made before scopes existed could do everything: admin.
    Column("scope", String(16), nullable=False, server_default="admin"),
    Column("expires_at", UtcDateTime, nullable=True),  # NULL: never expires
)

# Gateway-wide secrets, one row each, shared by every replica: `callback` is the key of the
# per-invocation callback tokens. Made once, by whichever replica starts first.
gateway_secrets = Table(
    "gateway_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", LargeBinary, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

# A counter per kind of data the replicas cache, bumped in the transaction of each write of it
# (`functions`): a replica clears its cache when the counter moved.
gateway_generations = Table(
    "gateway_generations",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Integer, nullable=False),
)

# Node-seconds, the ledger of what each attempt's node time was spent on (domain/node_seconds.py),
# cut at hour boundaries: one row per (source, attempt, phase, hour). `source` is the invocation
# id, or the warm unit's name for warm capacity no invocation used (function ""). Written in the
# transaction of the transition that ends the attempt, so it is there exactly when the end is.
node_seconds = Table(
    "node_seconds",
    metadata,
    Column("source", String(300), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("phase", String(24), primary_key=True),
    Column("hour", UtcDateTime, primary_key=True),
    Column("function", String(64), nullable=False),
    Column("gpu_type", String(64), nullable=True),
    Column("capacity", String(16), nullable=False),  # pricing.table.Capacity
    # MultiKueue's worker cluster that ran the attempt (invocations.cluster); NULL: one cluster,
    # warm capacity, and rows from before migration 0018.
    Column("cluster", String(256), nullable=True),
    Column("seconds", Float, nullable=False),
    Column("usd", Float, nullable=True),  # NULL: its price is not in the table
    # The report reads a time range, by function or by hour.
    Index("ix_node_seconds_hour_function", "hour", "function"),
)

# Running totals per (function, phase, capacity), kept in the same transactions as the ledger:
# /metrics reads these few rows at every scrape instead of summing the whole ledger.
node_seconds_totals = Table(
    "node_seconds_totals",
    metadata,
    Column("function", String(64), primary_key=True),
    Column("phase", String(24), primary_key=True),
    Column("capacity", String(16), primary_key=True),  # pricing.table.Capacity, as the ledger's
    Column("cluster", String(256), primary_key=True),  # the ledger's; "" where it names none
    Column("seconds", Float, nullable=False),
    Column("usd", Float, nullable=False),  # the priced part only
)


# What the GPU node watch knows of each node's past that the node-seconds attribution needs
# (domain/node_history.py), one row per node: written when one of those facts changes, read
# when the watch starts (a restart, a new leader), deleted with the node's last charges.
def _node_record() -> list[Column[Any]]:
    return [
        Column("gpu_type", String(64), nullable=False),
        Column("capacity", String(16), nullable=False),  # pricing.table.Capacity
        Column("created_at", UtcDateTime, nullable=False),
        Column("unused", Integer, nullable=False),  # 1: seen from its creation, no job used it yet
        # Its last job, ended, whose idle time after is not charged yet; all NULL: none.
        Column("last_invocation", String(40), nullable=True),
        Column("last_attempt", Integer, nullable=True),
        Column("last_function", String(64), nullable=True),
        Column("last_gpu_type", String(64), nullable=True),
        Column("last_ended_at", UtcDateTime, nullable=True),
    ]


gpu_node_history = Table(
    "gpu_node_history",
    metadata,
    Column("name", String(253), primary_key=True),  # a Node's name: a DNS subdomain
    *_node_record(),
)

# The same records of MultiKueue's workers' GPU nodes, each under its worker's name (two
# clusters may each have a node of one name). A table of its own, not a column of the one above:
# a release before it keeps writing that one during a rolling update.
worker_node_history = Table(
    "worker_node_history",
    metadata,
    Column("cluster", String(256), primary_key=True),
    Column("name", String(253), primary_key=True),
    *_node_record(),
)

# The output of attempts whose pods go as they end (MultiKueue's workers), kept by the gateway
# before it lets the pod go (domain/kept_logs.py): the last bytes of one pod's log per attempt
# and worker cluster.
kept_logs = Table(
    "kept_logs",
    metadata,
    Column("invocation_id", String(40), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("cluster", String(256), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("dropped", Integer, nullable=False),  # 1: the log was longer, its beginning not kept
    Column("kept_at", UtcDateTime, nullable=False),
)

# Completion webhooks (domain/webhooks.py). Each function's signing secret (`whsec_...`), with
# the URL it was issued for: a deploy that sets another URL gets a new one ("": the spec has no
# webhook now; the secret stays for messages still in the outbox).
webhook_secrets = Table(
    "webhook_secrets",
    metadata,
    Column("function", String(64), primary_key=True),
    Column("secret", String(128), nullable=False),
    Column("url", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

# The webhook an invocation was accepted with (its function's, or its own override), as the
# JSON of a WebhookSpec; only invocations that have one have a row. Read by the transitions
# that make events, in their transaction.
invocation_webhooks = Table(
    "invocation_webhooks",
    metadata,
    Column("invocation_id", String(40), primary_key=True),
    Column("webhook", Text, nullable=False),
)

# The outbox: one row per event to deliver, written in the transaction of the transition that
# makes it, delivered by the leader (webhooks/deliverer.py) in `seq` order per subject.
# next_attempt_at NULL: nothing more to do (delivered_at or failed_at says which).
_OUTBOX_PENDING = "next_attempt_at IS NOT NULL"
webhook_outbox = Table(
    "webhook_outbox",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("webhook_id", String(128), nullable=False),  # stable across attempts: receivers dedupe on it
    Column("subject", String(40), nullable=False),  # the invocation's id
    Column("function", String(64), nullable=False),  # whose secret signs it
    Column("message_type", String(64), nullable=False),
    Column("url", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("next_attempt_at", UtcDateTime, nullable=True),
    Column("last_status", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("delivered_at", UtcDateTime, nullable=True),
    Column("failed_at", UtcDateTime, nullable=True),
    # Headers sent besides the signature's, as a JSON object (CloudEvents' ce-*); NULL: none.
    Column("headers", Text, nullable=True),
    Column("body", LargeBinary, nullable=False),
    Index("ix_webhook_outbox_subject_seq", "subject", "seq"),
    # The deliverer's look for due messages: only pending rows are in it.
    Index(
        "ix_webhook_outbox_pending",
        "next_attempt_at",
        sqlite_where=text(_OUTBOX_PENDING),
        postgresql_where=text(_OUTBOX_PENDING),
    ),
)
