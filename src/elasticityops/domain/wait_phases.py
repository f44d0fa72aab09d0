"""Where an invocation's time went, as phases between its timeline's milestones: one rule for
every reader (the CLI's `eops status`, and the console's timeline bar through the API's
`timeline.phases`), so the two never tell the same invocation's time differently. Pure.

The phases: queue (accepted until dispatched), capacity (dispatched until a GPU holds it),
start (until the process or container runs), run. Through Kueue (`eops serve --admission
kueue`) the wait after dispatch is two waits: in Kueue's queue (quota, admission checks such as
a ProvisioningRequest) until it admits the Job, then for a node; the current attempt's
admission note (kueue_notes.ADMITTED) marks the line between them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from elasticityops.domain import kueue_notes

QUEUE, KUEUE, CAPACITY, START, RUN = "queue", "kueue", "capacity", "start", "run"
KUEUE_ADMITTED = "kueue_admitted"  # the milestone the admission note stands for

# (phase, from milestone, to milestone)
PHASES: tuple[tuple[str, str, str], ...] = (
    (QUEUE, "accepted", "dispatched"),
    (CAPACITY, "dispatched", "capacity_ready"),
    (START, "capacity_ready", "started"),
    (RUN, "started", "finished"),
)
KUEUE_PHASES: tuple[tuple[str, str, str], ...] = (
    PHASES[0],
    (KUEUE, "dispatched", KUEUE_ADMITTED),
    (CAPACITY, KUEUE_ADMITTED, "capacity_ready"),
    *PHASES[2:],
)


class Milestones(Protocol):
    """A timeline: the domain's Timeline or the API's TimelineOut."""

    @property
    def accepted(self) -> datetime: ...
    @property
    def dispatched(self) -> datetime | None: ...
    @property
    def capacity_ready(self) -> datetime | None: ...
    @property
    def started(self) -> datetime | None: ...
    @property
    def finished(self) -> datetime | None: ...


class Noted(Protocol):
    """A note: the domain's Note or the API's NoteOut."""

    @property
    def at(self) -> datetime: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True)
class PhaseSpan:
    name: str
    start: datetime
    end: datetime | None  # None: under way (or, once the invocation ended, never closed)


def through_kueue(notes: Iterable[Noted]) -> bool:
    """Whether Kueue admitted (or holds) the invocation's Job: its notes name Kueue's steps."""
    return any(note.kind in kueue_notes.KINDS for note in notes)


def kueue_admitted(notes: Iterable[Noted], dispatched: datetime | None) -> datetime | None:
    """When Kueue admitted the current attempt's Job (its last admission since the dispatch)."""
    admitted = [
        note.at
        for note in notes
        if note.kind == kueue_notes.ADMITTED and (dispatched is None or note.at >= dispatched)
    ]
    return admitted[-1] if admitted else None


def phase_spans(timeline: Milestones, notes: Sequence[Noted]) -> tuple[PhaseSpan, ...]:
    """The phases that have begun, in order, each from its first milestone to its last; the
    first whose last milestone is not reached yet is the last one, open. Through Kueue, the
    wait after dispatch splits at Kueue's admission; a timeline without the admission note but
    with a node (an older gateway's) keeps it one `capacity` phase."""
    marks: dict[str, datetime | None] = {
        "accepted": timeline.accepted,
        "dispatched": timeline.dispatched,
        "capacity_ready": timeline.capacity_ready,
        "started": timeline.started,
        "finished": timeline.finished,
    }
    table = PHASES
    admitted = kueue_admitted(notes, timeline.dispatched)
    if through_kueue(notes) and (admitted is not None or timeline.capacity_ready is None):
        table = KUEUE_PHASES
        marks[KUEUE_ADMITTED] = admitted
    spans: list[PhaseSpan] = []
    for name, first, last in table:
        began, ended = marks[first], marks[last]
        if began is None:
            break
        spans.append(PhaseSpan(name, began, None if ended is None else max(began, ended)))
        if ended is None:
            break
    return tuple(spans)
