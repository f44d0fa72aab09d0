"""Priority preemption as a pure decision: who is stopped for whom, and what that does."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.admission import AdmissionSnapshot, QueuedItem, admission
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import FailureReason, Invocation, State, Timeline, advance
from elasticityops.domain.preemption import (
    PREEMPTED,
    Candidate,
    Preemption,
    choose_victims,
    end_of_preemption,
)

H, N, L = Priority.high, Priority.normal, Priority.low
T4, L4 = "nvidia-tesla-t4", "nvidia-l4"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def q(i: str, prio: Priority = H, gpus: int = 1, kind: str = T4, fn: str | None = None) -> QueuedItem:
    return QueuedItem(id=i, function=fn or f"fn-{i}", priority=prio, gpus=gpus, gpu_type=kind)


def c(
    i: str,
    prio: Priority = L,
    at: int = 0,
    gpus: int = 1,
    kind: str = T4,
    preemptible: bool = True,
) -> Candidate:
    return Candidate(
        id=i,
        function=f"fn-{i}",
        priority=prio,
        preemptible=preemptible,
        gpus=gpus,
        gpu_type=kind,
        since=T0 + timedelta(seconds=at),
    )


def decide(
    queued: list[QueuedItem],
    running: list[Candidate],
    *,
    free: int | None = None,
    budget: int | None = None,
    rooms: dict[str, int] | None = None,
    active: dict[str, int] | None = None,
    limits: dict[str, int] | None = None,
) -> list[tuple[str, str]]:
    """Admission first, as the dispatcher does; then who is preempted, for whom."""
    snapshot = AdmissionSnapshot(
        queued=queued,
        free_gpus=free,
        gpu_budget_left=budget,
        active_by_function=active or {},
        max_concurrency=limits or {},
        type_room=rooms or {},
    )
    admitted = admission(snapshot).chosen
    chosen = choose_victims(snapshot, admitted, running)
    assert chosen == choose_victims(snapshot, admitted, list(reversed(running))), "deterministic"
    return [(p.victim, p.by) for p in chosen]


CASES = [
    # (id, queued, running, limits, expected (victim, for))
    ("newest-low-goes", [q("h")], [c("old", at=0), c("new", at=10)], {"free": 0}, [("new", "h")]),
    (
        "lowest-priority-before-newest",
        [q("h")],
        [c("n", N, at=10), c("l", L, at=0)],
        {"free": 0},
        [("l", "h")],
    ),
    ("equal-priority-never", [q("n", N)], [c("x", N)], {"free": 0}, []),
    ("higher-priority-never", [q("l", L)], [c("x", N), c("y", H)], {"free": 0}, []),
    ("normal-preempts-low", [q("n", N)], [c("x", L)], {"budget": 0}, [("x", "n")]),
    ("not-preemptible-never", [q("h")], [c("x", preemptible=False)], {"free": 0}, []),
    (
        "skips-the-not-preemptible",
        [q("h")],
        [c("a", at=9, preemptible=False), c("b", at=1)],
        {"free": 0},
        [("b", "h")],
    ),
    ("room-left-no-victim", [q("h")], [c("x")], {"free": 1}, []),
    (
        "only-the-missing-gpus",
        [q("h", gpus=2)],
        [c("a", at=1), c("b", at=2), c("c", at=3)],
        {"free": 1},
        [("c", "h")],
    ),
    (
        "two-for-two",
        [q("h", gpus=2)],
        [c("a", at=1), c("b", at=2), c("c", at=3)],
        {"free": 0},
        [("c", "h"), ("b", "h")],
    ),
    (
        "one-big-victim-suffices",
        [q("h", gpus=2)],
        [c("big", at=5, gpus=4), c("small", at=1)],
        {"free": 0},
        [("big", "h")],
    ),
    ("not-enough-none", [q("h", gpus=3)], [c("a"), c("b")], {"free": 0}, []),
    ("same-type-only", [q("h", kind=L4)], [c("t4")], {"rooms": {L4: 0}}, []),
    (
        "type-room-per-type",
        [q("h", kind=L4)],
        [c("t4", at=9), c("l4", at=1, kind=L4)],
        {"rooms": {L4: 0, T4: 0}},
        [("l4", "h")],
    ),
    (
        "each-blocked-its-own",
        [q("h1"), q("h2")],
        [c("a", at=1), c("b", at=2), c("c", at=3)],
        {"free": 0},
        [("c", "h1"), ("b", "h2")],
    ),
    ("victims-run-out", [q("h1"), q("h2")], [c("a")], {"free": 0}, [("a", "h1")]),
    ("admitted-first-then-blocked", [q("h1"), q("h2")], [c("a")], {"free": 1}, [("a", "h2")]),
    ("priority-order-of-blocked", [q("n", N), q("h", H)], [c("a", L)], {"free": 0}, [("a", "h")]),
    ("shared-short-stops-behind", [q("h1", gpus=3), q("h2")], [c("a"), c("b")], {"free": 0}, []),
    (
        "type-short-others-go-on",
        [q("h1", gpus=3), q("h2", kind=L4)],
        [c("a"), c("l", kind=L4)],
        {"rooms": {T4: 0, L4: 0}},
        [("l", "h2")],
    ),
    ("same-type-strict-order", [q("h1", gpus=3), q("h2")], [c("a"), c("b")], {"rooms": {T4: 0}}, []),
    ("no-limit-no-victims", [q("h")], [c("a")], {}, []),
]


@pytest.mark.parametrize(
    ("queued", "running", "limits", "expected"), [x[1:] for x in CASES], ids=[x[0] for x in CASES]
)
def test_choose_victims(
    queued: list[QueuedItem],
    running: list[Candidate],
    limits: dict[str, object],
    expected: list[tuple[str, str]],
) -> None:
    assert decide(queued, running, **limits) == expected  # type: ignore[arg-type]


def test_work_at_its_max_concurrency_preempts_nothing() -> None:
    # Freeing GPUs would not start it: its function is at its limit.
    blocked = q("h", fn="busy")
    assert decide([blocked], [c("a")], free=0, active={"busy": 2}, limits={"busy": 2}) == []


def test_ties_in_time_break_by_id_newest_first() -> None:
    assert decide([q("h")], [c("inv-a", at=5), c("inv-b", at=5)], free=0) == [("inv-b", "h")]


def test_victims_are_never_chosen_twice() -> None:
    chosen = decide([q("h1", gpus=2), q("h2", gpus=2)], [c(x, at=i) for i, x in enumerate("abcd")], free=0)
    victims = [v for v, _ in chosen]
    assert sorted(victims) == ["a", "b", "c", "d"]


def test_returns_preemptions() -> None:
    snapshot = AdmissionSnapshot([q("h")], 0, None, {}, {})
    assert choose_victims(snapshot, [], [c("x")]) == [Preemption("x", "h")]


def _running(attempt: int = 0) -> Invocation:
    inv = Invocation("inv-v", "fn", State.queued, L, Timeline(accepted=T0), attempt=attempt)
    inv = advance(inv, State.pending, T0 + timedelta(seconds=1))
    inv = advance(inv, State.running, T0 + timedelta(seconds=2), node="slot-0")
    return replace(inv, preempting_by="inv-h")


@pytest.mark.parametrize(
    ("attempt", "retries", "to"),
    [(0, 0, State.failed), (0, 1, State.queued), (1, 1, State.failed), (2, 10, State.queued)],
    ids=["no-retries", "one-retry", "retries-used", "many-retries"],
)
def test_end_of_preemption_requeues_while_retries_last(attempt: int, retries: int, to: State) -> None:
    victim = _running(attempt)
    at = T0 + timedelta(seconds=3)
    change = end_of_preemption(victim, retries, at)
    assert change.to is to
    assert change.from_states == frozenset({State.pending, State.running})
    assert change.note is not None
    assert (change.note.kind, "inv-h" in change.note.message) == (PREEMPTED, True)
    after = advance(victim, change.to, at, reason=change.reason, message=change.message)
    if to is State.queued:
        assert after.attempt == attempt + 1
        assert (after.preempting_by, after.node) == (None, None)
        assert after.timeline == Timeline(accepted=T0, preempted=at)
        assert "inv-h" in after.message
    else:
        assert (after.failure_reason, after.attempt) == (FailureReason.preempted, attempt)
        assert after.preempting_by is None
        assert "retries" in after.message


def test_a_requeued_attempt_runs_again_with_its_own_milestones() -> None:
    at = T0 + timedelta(seconds=3)
    requeued = advance(_running(), State.queued, at)
    again = advance(requeued, State.pending, T0)  # a clock behind: milestones never go back
    assert again.timeline.dispatched == at
    assert again.timeline.started is None
