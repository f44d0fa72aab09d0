"""Conversions between database rows and domain objects (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from elasticityops.domain.functions import FunctionSpec, Priority, spec_to_json
from elasticityops.domain.invocations import FailureReason, Invocation, Note, State, Timeline
from elasticityops.domain.ports import FunctionRecord, NewInvocation
from elasticityops.domain.results import PREVIEW_BYTES
from elasticityops.pricing.table import Capacity

PRIORITY_BY_RANK = {p.rank: p for p in Priority}


def function_from_row(row: Mapping[Any, Any]) -> FunctionRecord:
    return FunctionRecord(
        spec=FunctionSpec.model_validate_json(row["spec"]),
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def function_row(spec: FunctionSpec) -> str:
    return spec_to_json(spec)


def notes_to_json(notes: tuple[Note, ...]) -> str:
    return json.dumps([{"at": n.at.isoformat(), "kind": n.kind, "message": n.message} for n in notes])


def notes_from_json(text: str) -> tuple[Note, ...]:
    return tuple(
        Note(at=datetime.fromisoformat(n["at"]), kind=n["kind"], message=n["message"])
        for n in json.loads(text or "[]")
    )


def annotations_to_json(annotations: Mapping[str, str]) -> str | None:
    # NULL for none: the common case costs the row nothing.
    return json.dumps(dict(annotations), sort_keys=True) if annotations else None


def annotations_from_json(text: str | None) -> dict[str, str]:
    return dict(json.loads(text)) if text else {}


def invocation_from_row(row: Mapping[Any, Any]) -> Invocation:
    reason = row["failure_reason"]
    return Invocation(
        id=row["id"],
        function=row["function"],
        state=State(row["state"]),
        priority=Priority(row["priority"]),
        timeline=Timeline(
            accepted=row["accepted_at"],
            dispatched=row["dispatched_at"],
            capacity_ready=row["capacity_ready_at"],
            started=row["started_at"],
            finished=row["finished_at"],
            preempted=row["preempted_at"],
        ),
        idempotency_key=row["idempotency_key"],
        exit_code=row["exit_code"],
        failure_reason=FailureReason(reason) if reason else None,
        message=row["message"] or "",
        result=row["result"],
        node=row["node"],
        notes=notes_from_json(row["notes"]),
        spec_version=row["spec_version"],
        annotations=annotations_from_json(row["annotations"]),
        gpu_type=row["gpu_type"],
        attempt=row["attempt"] or 0,
        preempting_by=row["preempting_by"],
        cancel_requested=row["cancel_requested_at"],
        node_since=row["node_since_at"],
        warm=bool(row["warm_pick"]),
        node_capacity=None if row["node_capacity"] is None else Capacity(row["node_capacity"]),
        batch_id=row["batch_id"],
        cluster=row["cluster"],
    )


def new_invocation_row(new: NewInvocation) -> dict[str, Any]:
    row = {
        "id": new.id,
        "function": new.function,
        "spec_version": new.spec_version,
        "priority": PRIORITY_BY_RANK[new.priority_rank].value,
        "state": State.queued.value,
        "idempotency_key": new.idempotency_key,
        "accepted_at": new.accepted_at,
        "message": "",
        "notes": "[]",
        "payload": new.payload,
        "annotations": annotations_to_json(new.annotations),
    }
    if new.batch_id is not None:  # a single accept's INSERT names no column it leaves NULL
        row["batch_id"] = new.batch_id
    return row


def invocation_of_new(new: NewInvocation) -> Invocation:
    return Invocation(
        id=new.id,
        function=new.function,
        state=State.queued,
        priority=PRIORITY_BY_RANK[new.priority_rank],
        timeline=Timeline(accepted=new.accepted_at),
        idempotency_key=new.idempotency_key,
        spec_version=new.spec_version,
        annotations=dict(new.annotations),
        batch_id=new.batch_id,
    )


def invocation_update(before: Invocation, after: Invocation) -> dict[str, Any]:
    """Columns that differ between two versions of an invocation."""
    tb, ta = before.timeline, after.timeline
    pairs: dict[str, tuple[Any, Any]] = {
        "state": (before.state.value, after.state.value),
        "dispatched_at": (tb.dispatched, ta.dispatched),
        "capacity_ready_at": (tb.capacity_ready, ta.capacity_ready),
        "started_at": (tb.started, ta.started),
        "finished_at": (tb.finished, ta.finished),
        "exit_code": (before.exit_code, after.exit_code),
        "failure_reason": (
            before.failure_reason.value if before.failure_reason else None,
            after.failure_reason.value if after.failure_reason else None,
        ),
        "message": (before.message, after.message),
        "node": (before.node, after.node),
        "gpu_type": (before.gpu_type, after.gpu_type),
        "result": (before.result, after.result),
        "attempt": (before.attempt, after.attempt),
        "preempted_at": (tb.preempted, ta.preempted),
        "preempting_by": (before.preempting_by, after.preempting_by),
        "cancel_requested_at": (before.cancel_requested, after.cancel_requested),
        "node_since_at": (before.node_since, after.node_since),
        "warm_pick": (int(before.warm), int(after.warm)),
        "node_capacity": (_capacity(before.node_capacity), _capacity(after.node_capacity)),
        "cluster": (before.cluster, after.cluster),
    }
    out = {name: new for name, (old, new) in pairs.items() if old != new}
    if "result" in out:
        out["result_head"] = result_head(after.result)
    if before.notes != after.notes:
        out["notes"] = notes_to_json(after.notes)
    return out


def result_head(result: bytes | None) -> bytes | None:
    """What the result_head column holds for `result` (a list reads it, not the result)."""
    return None if result is None else result[:PREVIEW_BYTES]


def _capacity(capacity: Capacity | None) -> str | None:
    return None if capacity is None else capacity.value
