"""The HTTP API's JSON shapes, shared by the server (api/) and the Python client (client.py).

Plain pydantic models with no server imports, so the client stays light."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import FailureReason, Invocation, State
from elasticityops.domain.node_seconds import InvocationCost, Phase, PhaseTotal, priced_as
from elasticityops.domain.ports import FunctionRecord
from elasticityops.domain.queue import QueueStatus
from elasticityops.domain.results import PREVIEW_CHARS, ResultSummary, served, summary
from elasticityops.domain.wait_phases import phase_spans
from elasticityops.pricing.table import Capacity

# The largest page of GET /v1/invocations, for the server and for the clients and CLI alike.
MAX_PAGE_SIZE = 500


class ProblemOut(BaseModel):
    field: str
    problem: str
    fix: str = ""


class ErrorBody(BaseModel):
    code: str = Field(description="machine-readable error code, e.g. invalid_input, not_found")
    message: str = Field(description="what is wrong and how to fix it")
    problems: list[ProblemOut] = Field(default_factory=list, description="one entry per bad field")


class ErrorOut(BaseModel):
    error: ErrorBody


ENV_HIDDEN = "(hidden: an admin token reads it)"
WEBHOOK_PATH_HIDDEN = "/hidden-an-admin-token-reads-it"


def hidden_webhook_url(url: str) -> str:
    """A webhook URL as an invoke token reads it: its scheme and host, a path that says why."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{WEBHOOK_PATH_HIDDEN}"


class FunctionOut(BaseModel):
    spec: FunctionSpec
    version: int
    created_at: datetime
    updated_at: datetime
    env_hidden: bool = Field(
        False,
        description="true when the caller's token may not read env's values (scope invoke): "
        f"each value reads {ENV_HIDDEN!r}; an admin token reads them",
    )

    webhook_hidden: bool = Field(
        False,
        description="true when the caller's token may not read the webhook's URL (scope invoke): "
        "a URL often carries its receiver's credential (a token in its path or query), so only "
        f"its scheme and host are shown, with the path {WEBHOOK_PATH_HIDDEN!r}",
    )

    @classmethod
    def of(cls, record: FunctionRecord, *, show_env: bool = True) -> FunctionOut:
        """`show_env`: whether the caller may read env's values and the webhook's URL (the
        places for a function's credentials: admin tokens only)."""
        spec, hidden = record.spec, not show_env and bool(record.spec.env)
        if hidden:
            spec = spec.model_copy(update={"env": dict.fromkeys(spec.env, ENV_HIDDEN)})
        hook_hidden = not show_env and spec.webhook is not None
        if spec.webhook is not None and hook_hidden:
            shown = hidden_webhook_url(spec.webhook.url)
            spec = spec.model_copy(update={"webhook": spec.webhook.model_copy(update={"url": shown})})
        return cls(
            spec=spec,
            version=record.version,
            created_at=record.created_at,
            updated_at=record.updated_at,
            env_hidden=hidden,
            webhook_hidden=hook_hidden,
        )


class FunctionDeployed(FunctionOut):
    """The answer to a deploy (PUT /v1/functions/{name})."""

    changed: bool = Field(
        description="false: the spec sent is the one deployed already (compared as stored, "
        "defaults filled in), whose version stays; true: a new function or a new version"
    )
    webhook_secret: str | None = Field(
        None,
        description="the webhook signing secret (whsec_...), answered once: by the deploy that "
        "first sets the webhook's URL or changes it; null otherwise (rotate it with POST "
        "/v1/functions/{name}/webhook-secret:rotate)",
    )


class WebhookSecretOut(BaseModel):
    """The answer to a rotation: the function's new signing secret, shown this once."""

    function: str
    webhook_secret: str = Field(description="whsec_ and the base64 of the key (Standard Webhooks)")


class WebhookDeliveryOut(BaseModel):
    """One webhook message of an invocation and how its delivery went."""

    id: str = Field(description="the webhook-id header: the same on every attempt")
    type: str = Field(description="invocation.started or invocation.completed")
    url: str
    created_at: datetime = Field(description="when its event happened")
    attempts: int
    last_status: int | None = Field(description="the receiver's last answer; null: none (no connection)")
    last_error: str | None
    delivered_at: datetime | None
    failed_at: datetime | None = Field(description="set when its retry window ran out undelivered")
    next_attempt_at: datetime | None = Field(description="null: nothing more to do")


class WebhookDeliveryList(BaseModel):
    items: list[WebhookDeliveryOut]


class FunctionList(BaseModel):
    items: list[FunctionOut]


class PhaseOut(BaseModel):
    name: str = Field(description="queue, kueue, capacity, start or run")
    start: datetime
    end: datetime | None = Field(None, description="null while it is under way")


class TimelineOut(BaseModel):
    accepted: datetime
    dispatched: datetime | None = None
    capacity_ready: datetime | None = None
    started: datetime | None = None
    finished: datetime | None = None
    preempted: datetime | None = Field(
        None,
        description="the latest requeue (preempted, or its node lost); the milestones after it "
        "are the current attempt's",
    )
    phases: list[PhaseOut] = Field(
        default_factory=list,
        description="the phases that have begun, in order, between the milestones: queue (accepted "
        "until dispatched), capacity (until a GPU holds it), start, run; with --admission kueue "
        "the wait after dispatch is kueue (until Kueue admitted its Job) then capacity (until a "
        "node holds it). The last may be under way (end null). What `eops status` and the "
        "console's timeline bar show",
    )


_PHASES_HELP = (
    "node-seconds per phase: provisioning (node created for it until it was placed), "
    "idle_before_start (placed until the container ran: image pull, start), run, idle_after "
    "(its node idle after it ended until reused or removed), warm_unused (warm capacity no "
    "invocation used; only in reports), run_again (the same attempt run a second time in another "
    "MultiKueue worker, beside the run the record charges)"
)


class InvocationCostOut(BaseModel):
    node_seconds: dict[str, float] = Field(description=_PHASES_HELP)
    total_node_seconds: float
    usd: float = Field(description="cost of the priced node-seconds (machine_prices.json)")
    unpriced_node_seconds: float = Field(
        0.0, description="node-seconds on a machine whose price is not in the table (no cost guessed)"
    )
    open: bool = Field(
        False,
        description="an attempt is under way: counted up to now, and its idle time after is still to come",
    )
    as_of: datetime | None = Field(
        None,
        description="the gateway's time the attempt under way was counted to: a page that shows "
        "it growing (the console) counts on from here, by the gateway's clock",
    )


class CostGroupOut(BaseModel):
    function: str | None = Field(None, description='the function ("" for warm capacity no invocation used)')
    hour: datetime | None = Field(None, description="the start of the hour (UTC)")
    capacity: str | None = Field(
        None,
        description="what the node time was priced as: spot, on-demand, or local (a local GPU slot, "
        "priced as the on-demand node of its GPU type)",
    )
    cluster: str | None = Field(
        None,
        description="MultiKueue's worker cluster that ran it (null: one cluster, or warm capacity)",
    )
    node_seconds: dict[str, float] = Field(description=_PHASES_HELP)
    total_node_seconds: float
    usd: float
    unpriced_node_seconds: float = 0.0


class CostReportOut(BaseModel):
    since: datetime
    until: datetime
    by: list[str] = Field(
        description="the grouping: any of function, hour, capacity and cluster, or none (one total)"
    )
    groups: list[CostGroupOut]
    total_node_seconds: float
    usd: float
    unpriced_node_seconds: float = 0.0


class NoteOut(BaseModel):
    at: datetime
    kind: str
    message: str


class ResultSummaryOut(BaseModel):
    bytes: int = Field(description="the result's size as stored (its JSON text)")
    preview: str = Field(description=f"its first {PREVIEW_CHARS} characters")


class InvocationOut(BaseModel):
    id: str
    function: str
    spec_version: int = Field(
        1, description="the version of the function's spec it was accepted with, and runs"
    )
    state: State
    priority: str
    attempt: int = Field(
        0,
        description="0 for the first run; one more each time preemption or the loss of its node "
        "put it back in the queue (its function's retries), each attempt a job of its own",
    )
    preempting_by: str | None = Field(
        None, description="while being preempted: the higher-priority invocation it makes way for"
    )
    cancel_requested_at: datetime | None = Field(
        None,
        description="when a cancel was asked of a gateway replica whose dispatcher does not run "
        "and is waiting for the one that does to stop the job; null otherwise (and once it ended)",
    )
    idempotency_key: str | None = None
    timeline: TimelineOut
    durations: dict[str, float | None] = Field(
        description="seconds per phase: queue, capacity, start, run, time_to_start, total"
    )
    exit_code: int | None = None
    failure_reason: FailureReason | None = None
    message: str = ""
    result: Any = Field(
        None,
        description="what the job handed back: JSON as written, else its text (docs/functions.md); "
        "null in lists (read one invocation; a list carries result_summary)",
    )
    result_summary: ResultSummaryOut | None = Field(
        None, description="the result's size and the start of its JSON text; null while it has none"
    )
    node: str | None = Field(None, description="where it ran: GPU slot or Kubernetes node")
    node_capacity: str | None = Field(
        None,
        description="what the node of its current (or last) attempt is priced as: spot or on-demand "
        "(from the node's GKE labels; on-demand for a node the gateway's node watch did not see), "
        "local (a local GPU slot, priced as the on-demand node of its GPU type); null while no node "
        "is known (queued, or waiting for one). Earlier attempts of its `cost` may have had others",
    )
    gpu_type: str | None = Field(
        None,
        description="the GPU type it was admitted on (one of its function's gpu.type; a later one "
        "when it spilled over); null while queued",
    )
    notes: list[NoteOut] = Field(default_factory=list, description="what explains the wait")
    queue_position: int | None = Field(
        None,
        description="while queued: 1-based place among the queued invocations for the same GPU "
        "type, in admission order (priority, then the functions' turns, then acceptance); with "
        "--admission kueue, while "
        "pending in Kueue's queue: place among the pending Workloads of its LocalQueue "
        "(priority, then creation; docs/kueue.md); null otherwise, and in lists",
    )
    queue_reason: str | None = Field(
        None,
        description="while queued: what it waits for (a full GPU budget, its function's "
        "max_concurrency, the dispatcher); in Kueue's queue, Kueue's own reason; null otherwise, "
        "and in lists",
    )
    annotations: dict[str, str] = Field(
        default_factory=dict,
        description="its own pod annotations (`eops.dev/` keys, set with ?annotation=KEY=VALUE at "
        "invoke), on top of its function's; the Kubernetes backend puts them on the pod",
    )
    cost: InvocationCostOut | None = Field(
        None, description="the node-seconds it caused and their cost; null in lists (read one invocation)"
    )
    batch_id: str | None = Field(
        None, description="the batch it was accepted in (POST .../invocations:batch); null: on its own"
    )
    cluster: str | None = Field(
        None,
        description="where several clusters run the work (Kueue's MultiKueue, docs/multi-cluster.md): "
        "the worker cluster that admitted its current (or last) attempt; null with one cluster, "
        "and until a worker admits it",
    )

    @classmethod
    def of(
        cls,
        inv: Invocation,
        queue: QueueStatus | None = None,
        cost: InvocationCost | None = None,
        *,
        unnamed: Capacity = Capacity.on_demand,
        listed: bool = False,
        brief: ResultSummary | None = None,
    ) -> InvocationOut:
        """`unnamed`: what a node that names no capacity is priced as (the backend's); `listed`:
        as an item of a list, which carries the result's summary, not the result; `brief`: that
        summary as the store read it for a list, else made from the result."""
        tl = inv.timeline
        brief = brief or summary(inv.result)
        capacity = priced_as(inv, unnamed)
        return cls(
            id=inv.id,
            function=inv.function,
            spec_version=inv.spec_version,
            state=inv.state,
            priority=inv.priority.value,
            attempt=inv.attempt,
            preempting_by=inv.preempting_by,
            cancel_requested_at=inv.cancel_requested,
            idempotency_key=inv.idempotency_key,
            timeline=TimelineOut(
                accepted=tl.accepted,
                dispatched=tl.dispatched,
                capacity_ready=tl.capacity_ready,
                started=tl.started,
                finished=tl.finished,
                preempted=tl.preempted,
                phases=[PhaseOut(name=p.name, start=p.start, end=p.end) for p in phase_spans(tl, inv.notes)],
            ),
            durations=tl.durations(),
            exit_code=inv.exit_code,
            failure_reason=inv.failure_reason,
            message=inv.message,
            result=None if listed else served(inv.result),
            result_summary=None
            if brief is None
            else ResultSummaryOut(bytes=brief.bytes, preview=brief.preview),
            node=inv.node,
            node_capacity=None if capacity is None else capacity.value,
            gpu_type=inv.gpu_type,
            notes=[NoteOut(at=n.at, kind=n.kind, message=n.message) for n in inv.notes],
            queue_position=None if queue is None else queue.position,
            queue_reason=None if queue is None else queue.reason,
            annotations=dict(inv.annotations),
            cost=None if cost is None else InvocationCostOut.model_validate(cost_document(cost)),
            batch_id=inv.batch_id,
            cluster=inv.cluster,
        )


def phases_document(phases: Mapping[Phase, PhaseTotal]) -> dict[str, float]:
    return {phase.value: phases.get(phase, PhaseTotal()).seconds for phase in Phase}


def cost_document(cost: InvocationCost) -> dict[str, Any]:
    return {
        "node_seconds": phases_document(cost.phases),
        "total_node_seconds": cost.seconds,
        "usd": cost.usd,
        "unpriced_node_seconds": cost.unpriced_seconds,
        "open": cost.open,
        "as_of": cost.as_of,
    }


class InvocationList(BaseModel):
    items: list[InvocationOut]
    next_cursor: str | None = None


class BatchIn(BaseModel):
    """POST /v1/functions/{name}/invocations:batch (documentation: the route reads the body
    itself, to name the index of a bad input)."""

    inputs: list[Any] = Field(
        description="one invocation per item, each what a single invocation's body would be (any "
        "JSON document; null for none), each within the payload limit",
        min_length=1,
    )


class BatchAccepted(BaseModel):
    batch_id: str
    function: str
    count: int
    invocation_ids: list[str] = Field(description="one per input, in input order")
    created_at: datetime


class BatchOut(BaseModel):
    id: str
    function: str
    created_at: datetime
    count: int = Field(description="how many invocations it holds (its inputs)")
    idempotency_key: str | None = None
    counts: dict[str, int] = Field(
        description="how many of its invocations are in each state (every state named)"
    )
    ended: int = Field(description="how many have ended (succeeded, failed, cancelled, timed_out)")
    done: bool = Field(description="true once every one of them has ended")
    items: list[InvocationOut] = Field(
        description="a page of its invocations in input order, as GET /v1/invocations lists them"
    )
    next_cursor: str | None = Field(None, description="pass as ?cursor= for the next page; null: the last")


class HeadroomPoolOut(BaseModel):
    shape: str = Field(description="the pool's key: functions that ask the same share one pool")
    gpu_type: str
    gpu_count: int = Field(description="GPUs each warm unit holds")
    describe: str = Field(description="what each unit asks for, in words")
    wanted: int = Field(description="warm units the policy asks for now")
    held: int = Field(description="warm units held: what the GPU budget leaves of what is wanted")
    busy: int = Field(description="invocations of the shape running")
    waiting: int = Field(description="invocations of the shape admitted and waiting for a GPU")


class HeadroomOut(BaseModel):
    policy: str = Field(description="the --headroom policy, e.g. warm:3 or predictive:10; none: off")
    mechanism: str | None = Field(None, description="placeholders, buffer or slots; null when off")
    pools: list[HeadroomPoolOut] = Field(default_factory=list)
    syncs: int = Field(0, description="sizings done since the gateway started")
    last_error: str = Field("", description="why the last sizing failed, if it did")


class QueueHeadOut(BaseModel):
    id: str
    function: str
    priority: str
    accepted: datetime
    waiting_s: float = Field(description="seconds since it was accepted")


class CapacitySampleOut(BaseModel):
    at: datetime
    demand: int = Field(description="GPUs in use plus one per queued invocation")
    in_use: int = Field(description="GPUs held by pending and running invocations")
    queued: int
    nodes: int | None = Field(description="GPU nodes (Kubernetes) or GPU slots (local); null: unknown")
    headroom_held: int = Field(description="warm GPUs held by the headroom controller")
    headroom_busy: int


class CapacityOut(BaseModel):
    at: datetime
    role: str = Field(description="leader or follower: a follower does not run the headroom controller")
    budget: str | None = Field(description="the GPU budget as --gpu-budget takes it; null: none")
    budget_by_type: dict[str, int | None] = Field(
        description="per GPU type in use or capped: its cap (null: not capped by type)"
    )
    budget_total: int | None
    in_use: dict[str, int] = Field(description="GPUs in use per GPU type")
    in_use_total: int
    in_use_by_cluster: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="GPUs in use per cluster (MultiKueue's worker that runs them) and GPU type, "
        "for the invocations whose record names their cluster; empty with one cluster",
    )
    states: dict[str, int] = Field(description="invocations per state")
    queue_length: int
    queue_head: QueueHeadOut | None = Field(description="the queued invocation admitted next")
    headroom: list[HeadroomPoolOut] | None = Field(description="warm pools; null: not run on this replica")
    nodes: dict[str, int] | None = Field(
        description="GPU nodes by state (provisioning, ready, idle, scaling_down), in every cluster "
        "the work runs in; null: no cluster"
    )
    nodes_by_cluster: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="GPU nodes by state in each cluster MultiKueue runs the work in (its workers, "
        "watched through --kube-workers' kubeconfigs); empty with one cluster",
    )
    free_gpus: int | None = Field(description="GPUs the backend could start work on now (local slots)")
    total_gpus: int | None
    history: list[CapacitySampleOut] = Field(
        description="the last hours, oldest first (in this replica's memory); "
        "with `since`, only the samples after it"
    )
    sample_s: float = Field(description="seconds between two samples")
    keep_s: float = Field(description="how far back the history goes, in seconds: older samples are dropped")
