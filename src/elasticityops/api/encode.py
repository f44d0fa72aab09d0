"""Invocations to JSON bytes, fast: the same document as `wire.InvocationOut`, built with orjson.

Every answer about an invocation goes through here; pydantic's model path costs ~10x more per
response, which shows at thousands of accepts per second. tests/api/test_encode.py holds the two
to the same output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from elasticityops.domain.invocations import Invocation
from elasticityops.domain.node_seconds import InvocationCost, priced_as
from elasticityops.domain.queue import QueueStatus
from elasticityops.domain.results import ResultSummary, served, summary
from elasticityops.domain.wait_phases import phase_spans
from elasticityops.pricing.table import Capacity
from elasticityops.wire import cost_document

_OPTIONS = orjson.OPT_UTC_Z


def invocation_document(
    inv: Invocation,
    queue: QueueStatus | None = None,
    cost: InvocationCost | None = None,
    *,
    unnamed: Capacity = Capacity.on_demand,
    listed: bool = False,
    brief: ResultSummary | None = None,
) -> dict[str, Any]:
    """`unnamed`: what a node that names no capacity is priced as (capacity_of_backend);
    `listed`: as a list's item, with the result's summary and not the result (a page of 500
    results of 1 MiB would be half a gigabyte); `brief`: that summary, as the store read it for
    a list (a list's items carry no result), else made from the result."""
    tl = inv.timeline
    capacity = priced_as(inv, unnamed)
    brief = brief or summary(inv.result)
    return {
        "id": inv.id,
        "function": inv.function,
        "spec_version": inv.spec_version,
        "state": inv.state.value,
        "priority": inv.priority.value,
        "attempt": inv.attempt,
        "preempting_by": inv.preempting_by,
        "cancel_requested_at": inv.cancel_requested,
        "idempotency_key": inv.idempotency_key,
        "timeline": {
            "accepted": tl.accepted,
            "dispatched": tl.dispatched,
            "capacity_ready": tl.capacity_ready,
            "started": tl.started,
            "finished": tl.finished,
            "preempted": tl.preempted,
            "phases": [{"name": p.name, "start": p.start, "end": p.end} for p in phase_spans(tl, inv.notes)],
        },
        "durations": tl.durations(),
        "exit_code": inv.exit_code,
        "failure_reason": inv.failure_reason.value if inv.failure_reason else None,
        "message": inv.message,
        "result": None if listed else served(inv.result),
        "result_summary": None if brief is None else {"bytes": brief.bytes, "preview": brief.preview},
        "node": inv.node,
        "node_capacity": None if capacity is None else capacity.value,
        "gpu_type": inv.gpu_type,
        "notes": [{"at": n.at, "kind": n.kind, "message": n.message} for n in inv.notes],
        "queue_position": None if queue is None else queue.position,
        "queue_reason": None if queue is None else queue.reason,
        "annotations": dict(inv.annotations),
        "cost": None if cost is None else cost_document(cost),
        "batch_id": inv.batch_id,
        "cluster": inv.cluster,
    }


def invocation_json(
    inv: Invocation,
    queue: QueueStatus | None = None,
    cost: InvocationCost | None = None,
    *,
    unnamed: Capacity = Capacity.on_demand,
) -> bytes:
    return orjson.dumps(invocation_document(inv, queue, cost, unnamed=unnamed), option=_OPTIONS)


def invocation_list_json(
    items: list[Invocation],
    next_cursor: str | None,
    *,
    unnamed: Capacity = Capacity.on_demand,
    summaries: Mapping[str, ResultSummary] | None = None,
) -> bytes:
    """A page: `summaries` by id, as the store read them (Page.summaries)."""
    briefs = summaries or {}
    return orjson.dumps(
        {
            "items": [
                invocation_document(i, unnamed=unnamed, listed=True, brief=briefs.get(i.id)) for i in items
            ],
            "next_cursor": next_cursor,
        },
        option=_OPTIONS,
    )
