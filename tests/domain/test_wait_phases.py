"""The one rule for where an invocation's time went (the CLI's `eops status` and the console's
timeline bar both follow it): through Kueue the wait after dispatch splits at Kueue's admission."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from elasticityops.domain.invocations import Note, Timeline
from elasticityops.domain.kueue_notes import ADMITTED, EVICTED, QUEUED
from elasticityops.domain.wait_phases import PhaseSpan, phase_spans

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def spans(timeline: Timeline, *notes: Note) -> list[tuple[str, float, float | None]]:
    def offset(when: datetime | None) -> float | None:
        return None if when is None else (when - T0).total_seconds()

    return [(s.name, (s.start - T0).total_seconds(), offset(s.end)) for s in phase_spans(timeline, notes)]


DONE = Timeline(accepted=T0, dispatched=at(1), capacity_ready=at(31), started=at(33), finished=at(38))


def test_without_kueue_the_wait_after_dispatch_is_one_capacity_phase() -> None:
    assert spans(DONE, Note(at(5), "TriggeredScaleUp", "scale-up")) == [
        ("queue", 0, 1),
        ("capacity", 1, 31),
        ("start", 31, 33),
        ("run", 33, 38),
    ]


def test_through_kueue_it_splits_at_kueues_admission() -> None:
    assert spans(DONE, Note(at(2), QUEUED, "waiting"), Note(at(10), ADMITTED, "admitted")) == [
        ("queue", 0, 1),
        ("kueue", 1, 10),
        ("capacity", 10, 31),
        ("start", 31, 33),
        ("run", 33, 38),
    ]


def test_in_kueues_queue_the_kueue_phase_is_the_open_one() -> None:
    waiting = Timeline(accepted=T0, dispatched=at(2))
    assert spans(waiting, Note(at(3), QUEUED, "waiting")) == [("queue", 0, 2), ("kueue", 2, None)]
    assert phase_spans(waiting, [])[-1] == PhaseSpan("capacity", at(2), None)


def test_only_the_current_attempts_admission_splits_it() -> None:
    requeued = Timeline(accepted=T0, dispatched=at(25))
    notes = (Note(at(3), ADMITTED, "first"), Note(at(20), EVICTED, "evicted"), Note(at(26), QUEUED, "again"))
    assert spans(requeued, *notes) == [("queue", 0, 25), ("kueue", 25, None)]


def test_a_kueue_timeline_without_its_admission_note_keeps_one_capacity_phase() -> None:
    """An older gateway's timeline: Kueue's notes but no admission note, and a node found."""
    assert [name for name, _, _ in spans(DONE, Note(at(2), QUEUED, "waiting"))] == [
        "queue",
        "capacity",
        "start",
        "run",
    ]
