"""Pending-time spillover: when a pending invocation moves to its function's next GPU type."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import Invocation, Note, State, Timeline
from elasticityops.domain.spillover import SPILLED, Spill, moved, next_type, waiting_since

T4, L4, V100 = "nvidia-tesla-t4", "nvidia-l4", "nvidia-tesla-v100"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DISPATCHED = T0 + timedelta(seconds=1)
STOCKOUT = (
    "pod didn't trigger scale-up: simulated stockout: zone us-central1-a does not have enough "
    "resources available (ZONE_RESOURCE_POOL_EXHAUSTED)"
)


def at(seconds: float) -> datetime:
    return DISPATCHED + timedelta(seconds=seconds)


def pending(*notes: Note, gpu_type: str | None = T4, **changes: object) -> Invocation:
    inv = Invocation(
        id="inv-1",
        function="f",
        state=State.pending,
        priority=Priority.normal,
        timeline=Timeline(accepted=T0, dispatched=DISPATCHED),
        notes=notes,
        gpu_type=gpu_type,
    )
    return replace(inv, **changes)  # type: ignore[arg-type]


def note(seconds: float, kind: str, message: str = "") -> Note:
    return Note(at(seconds), kind, message)


@pytest.mark.parametrize(
    ("inv", "current", "types", "now_s", "expected"),
    [
        pytest.param(
            pending(note(20, "Stockout", STOCKOUT)),
            T4,
            (T4, L4),
            21,
            Spill(L4, "zone us-central1-a stocked out for nvidia-tesla-t4"),
            id="stockout-names-the-zone",
        ),
        pytest.param(
            pending(note(20, "Stockout", "ZONE_RESOURCE_POOL_EXHAUSTED")),
            T4,
            (T4, L4),
            21,
            Spill(L4, "the cloud stocked out for nvidia-tesla-t4"),
            id="stockout-without-a-zone",
        ),
        pytest.param(
            pending(note(30, "NotTriggerScaleUp", "pod didn't trigger scale-up: 5 node(s) didn't match")),
            T4,
            (T4, L4),
            31,
            Spill(
                L4,
                "the cluster autoscaler will not add a nvidia-tesla-t4 node (NotTriggerScaleUp: pod "
                "didn't trigger scale-up: 5 node(s) didn't match)",
            ),
            id="not-trigger-scale-up",
        ),
        pytest.param(
            pending(note(5, "QuotaExceeded", "GPUS_ALL_REGIONS exceeded")),
            T4,
            (T4, L4),
            6,
            Spill(L4, "the cloud's quota for nvidia-tesla-t4 is spent (GPUS_ALL_REGIONS exceeded)"),
            id="quota",
        ),
        pytest.param(
            pending(),
            T4,
            (T4, L4),
            900,
            Spill(L4, "no nvidia-tesla-t4 node within 900 s (EOPS_SPILL_AFTER_SECONDS)"),
            id="waited-too-long",
        ),
        pytest.param(pending(), T4, (T4, L4), 899, None, id="not-yet-too-long"),
        pytest.param(
            pending(note(10, "TriggeredScaleUp", "pod triggered scale-up"), note(12, "Unschedulable", "x")),
            T4,
            (T4, L4),
            60,
            None,
            id="a-scale-up-on-its-way-is-waited-for",
        ),
        pytest.param(pending(note(20, "Stockout", STOCKOUT)), L4, (T4, L4), 21, None, id="on-the-last-type"),
        pytest.param(pending(note(20, "Stockout", STOCKOUT)), T4, (T4,), 21, None, id="only-one-type"),
        pytest.param(
            pending(note(20, "Stockout", STOCKOUT), gpu_type=L4),
            L4,
            (T4, L4, V100),
            21,
            Spill(V100, "zone us-central1-a stocked out for nvidia-l4"),
            id="second-to-third",
        ),
        pytest.param(
            pending(note(20, "Stockout", STOCKOUT), state=State.running),
            T4,
            (T4, L4),
            21,
            None,
            id="running",
        ),
        pytest.param(
            pending(
                note(20, "Stockout", STOCKOUT),
                timeline=Timeline(accepted=T0, dispatched=DISPATCHED, capacity_ready=at(25)),
            ),
            T4,
            (T4, L4),
            1000,
            None,
            id="has-a-node",
        ),
        pytest.param(
            pending(
                note(20, "Stockout", STOCKOUT), note(30, SPILLED, "spilled to nvidia-l4: ..."), gpu_type=L4
            ),
            L4,
            (T4, L4, V100),
            31,
            None,
            id="notes-from-before-its-last-spill-do-not-count",
        ),
        pytest.param(
            pending(note(30, SPILLED, "spilled to nvidia-l4: ..."), gpu_type=L4),
            L4,
            (T4, L4, V100),
            929,
            None,
            id="the-wait-restarts-at-a-spill",
        ),
        pytest.param(
            pending(note(30, SPILLED, "spilled to nvidia-l4: ..."), gpu_type=L4),
            L4,
            (T4, L4, V100),
            930,
            Spill(V100, "no nvidia-l4 node within 900 s (EOPS_SPILL_AFTER_SECONDS)"),
            id="and-counts-again-from-there",
        ),
    ],
)
def test_next_type(
    inv: Invocation, current: str, types: tuple[str, ...], now_s: float, expected: Spill | None
) -> None:
    assert next_type(inv, current, types, at(now_s), spill_after_seconds=900) == expected


def test_the_note_says_where_it_went_and_why() -> None:
    spill = Spill(L4, "zone us-central1-a stocked out for nvidia-tesla-t4")
    assert spill.text == "spilled to nvidia-l4: zone us-central1-a stocked out for nvidia-tesla-t4"
    assert spill.note(at(3)) == Note(at(3), SPILLED, spill.text)


def test_moved_sets_the_type_and_the_note_and_restarts_the_wait() -> None:
    spill = Spill(L4, "why")
    after = moved(pending(), T4, spill, at(40))
    assert after is not None
    assert (after.gpu_type, after.state, after.notes[-1].kind) == (L4, State.pending, SPILLED)
    assert waiting_since(after) == at(40)
    assert waiting_since(pending()) == DISPATCHED


@pytest.mark.parametrize(
    "inv",
    [
        pytest.param(pending(gpu_type=L4), id="moved-already"),
        pytest.param(pending(state=State.running), id="started"),
        pytest.param(pending(state=State.succeeded), id="ended"),
        pytest.param(
            pending(timeline=Timeline(accepted=T0, dispatched=DISPATCHED, capacity_ready=at(2))),
            id="has-a-node",
        ),
    ],
)
def test_moved_refuses_what_is_no_longer_waiting_on_that_type(inv: Invocation) -> None:
    assert moved(inv, T4, Spill(L4, "why"), at(40)) is None


def test_a_row_from_before_the_type_was_kept_moves_from_its_first_type() -> None:
    after = moved(pending(gpu_type=None), T4, Spill(L4, "why"), at(40))
    assert after is not None
    assert after.gpu_type == L4
