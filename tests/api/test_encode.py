"""The fast invocation encoder writes exactly what wire.InvocationOut describes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from elasticityops.api.encode import invocation_json, invocation_list_json
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import FailureReason, Invocation, Note, State, Timeline
from elasticityops.domain.node_seconds import Phase, PhaseTotal, invocation_cost
from elasticityops.domain.queue import QueueStatus
from elasticityops.pricing.table import Capacity
from elasticityops.wire import InvocationList, InvocationOut

T0 = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)

CASES = [
    Invocation("inv-a", "f", State.queued, Priority.normal, Timeline(accepted=T0)),
    Invocation(
        "inv-b",
        "g",
        State.failed,
        Priority.high,
        Timeline(
            accepted=T0.replace(microsecond=0),
            dispatched=T0 + timedelta(seconds=1),
            capacity_ready=T0 + timedelta(seconds=2),
            started=T0 + timedelta(seconds=3),
            finished=T0 + timedelta(seconds=70),
        ),
        idempotency_key="k-1",
        exit_code=3,
        failure_reason=FailureReason.exit_code,
        message="exited with 3",
        result=b'{"partial": [1, 2]}',
        node="slot-1",
        notes=(Note(T0, "SlotWarming", "slot 1 warming"),),
        annotations={"eops.dev/run-seconds": "12", "eops.dev/exit-code": "3"},
        batch_id="bat-01m95qcwmhyq030msfkwk5w1ze",
    ),
    Invocation("inv-c", "h", State.succeeded, Priority.low, Timeline(accepted=T0), result=b"plain text \xff"),
    Invocation(
        "inv-d",
        "p",
        State.running,
        Priority.low,
        Timeline(accepted=T0, preempted=T0, dispatched=T0),
        attempt=2,
        preempting_by="inv-high",
    ),
    Invocation(
        "inv-e",
        "s",
        State.running,
        Priority.normal,
        Timeline(accepted=T0, dispatched=T0, capacity_ready=T0, started=T0),
        node="gke-pool-spot-1",
        gpu_type="nvidia-tesla-t4",
        node_capacity=Capacity.spot,
        cluster="worker-2",
    ),
    Invocation(
        "inv-k",
        "k",
        State.running,
        Priority.normal,
        Timeline(
            accepted=T0,
            dispatched=T0 + timedelta(seconds=1),
            capacity_ready=T0 + timedelta(seconds=40),
            started=T0 + timedelta(seconds=41),
        ),
        node="gke-pool-1",
        notes=(
            Note(T0 + timedelta(seconds=2), "KueueQueued", "Kueue: waiting in LocalQueue eops"),
            Note(T0 + timedelta(seconds=30), "KueueAdmitted", "Kueue: admitted by ClusterQueue eops"),
        ),
    ),
]


@pytest.mark.parametrize("inv", CASES, ids=[c.id for c in CASES])
def test_the_fast_encoding_is_the_wire_shape(inv: Invocation) -> None:
    assert InvocationOut.model_validate_json(invocation_json(inv)) == InvocationOut.of(inv)


def test_a_queue_status_is_encoded_as_the_wire_shape() -> None:
    queue = QueueStatus(2, "function f is at its max_concurrency (1)")
    decoded = InvocationOut.model_validate_json(invocation_json(CASES[0], queue))
    assert decoded == InvocationOut.of(CASES[0], queue)
    assert (decoded.queue_position, decoded.queue_reason) == (2, queue.reason)


def test_lists_too() -> None:
    decoded = InvocationList.model_validate_json(invocation_list_json(CASES, "inv-a"))
    assert decoded == InvocationList(
        items=[InvocationOut.of(i, listed=True) for i in CASES], next_cursor="inv-a"
    )


def test_a_list_carries_the_results_summary_not_the_result() -> None:
    big = CASES[1].__class__(**{**vars(CASES[1]), "result": b'"' + b"x" * (1 << 20) + b'"'})
    [item] = InvocationList.model_validate_json(invocation_list_json([big], None)).items
    assert item.result is None
    assert item.result_summary is not None
    assert item.result_summary.bytes == (1 << 20) + 2
    assert item.result_summary.preview == '"' + "x" * 199
    assert len(invocation_list_json([big] * 60, None)) < 128 * 1024  # was 63 MB for 60 of them
    one = InvocationOut.model_validate_json(invocation_json(big))
    assert one.result == "x" * (1 << 20)  # the invocation itself carries it whole
    assert one.result_summary == item.result_summary


def test_a_cost_is_encoded_as_the_wire_shape() -> None:
    cost = invocation_cost({Phase.run: PhaseTotal(60.0, 0.009)}, [], usd_per_hour=0.54)
    decoded = InvocationOut.model_validate_json(invocation_json(CASES[0], cost=cost))
    assert decoded == InvocationOut.of(CASES[0], cost=cost)
    assert decoded.cost is not None
    assert decoded.cost.node_seconds == {phase.value: 60.0 if phase is Phase.run else 0.0 for phase in Phase}


@pytest.mark.parametrize("unnamed", [Capacity.local, Capacity.on_demand])
def test_the_node_capacity_is_encoded_as_the_wire_shape(unnamed: Capacity) -> None:
    for inv in CASES:
        decoded = InvocationOut.model_validate_json(invocation_json(inv, unnamed=unnamed))
        assert decoded == InvocationOut.of(inv, unnamed=unnamed)
    named = {i.id: InvocationOut.of(i, unnamed=unnamed).node_capacity for i in CASES}
    # inv-b ran on a slot that named no capacity: the backend's; inv-e's node said spot.
    assert named == {
        "inv-a": None,
        "inv-b": unnamed.value,
        "inv-c": None,
        "inv-d": None,
        "inv-e": "spot",
        "inv-k": unnamed.value,
    }


def test_the_phases_the_console_draws_split_kueues_wait_as_eops_status_does() -> None:
    """The console's timeline bar draws `timeline.phases`: through Kueue, the wait after
    dispatch is `kueue` until the admission note, then `capacity`; the run under way is open."""
    document = orjson.loads(invocation_json(CASES[-1]))
    assert [(p["name"], p["start"], p["end"]) for p in document["timeline"]["phases"]] == [
        ("queue", "2026-03-01T12:00:00.123456Z", "2026-03-01T12:00:01.123456Z"),
        ("kueue", "2026-03-01T12:00:01.123456Z", "2026-03-01T12:00:30.123456Z"),
        ("capacity", "2026-03-01T12:00:30.123456Z", "2026-03-01T12:00:40.123456Z"),
        ("start", "2026-03-01T12:00:40.123456Z", "2026-03-01T12:00:41.123456Z"),
        ("run", "2026-03-01T12:00:41.123456Z", None),
    ]
    plain = orjson.loads(invocation_json(CASES[1]))["timeline"]["phases"]
    assert [p["name"] for p in plain] == ["queue", "capacity", "start", "run"]
