"""The attribution rules of node-seconds (domain/node_seconds.py): each phase, a warm pick, a
node reused or removed, an attempt still running, and the transitions that end an attempt."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import Invocation, State, Timeline, advance
from elasticityops.domain.node_seconds import (
    AttemptTimes,
    Phase,
    PhaseTotal,
    Span,
    WorkerRun,
    attempt_spans,
    by_hour,
    ended_attempt,
    idle_after_span,
    invocation_cost,
    live_attempt,
    priced_as,
    run_again_charge,
    totals,
    warm_unused_span,
)
from elasticityops.pricing.table import Capacity

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def split(times: AttemptTimes, now: float = 10_000) -> dict[Phase, float]:
    return {phase: s for phase, s in totals(attempt_spans(times, at(now))).items() if s}


CASES = [
    pytest.param(
        AttemptTimes(capacity_ready=at(200), started=at(230), ended=at(530), node_since=at(20)),
        {Phase.provisioning: 180, Phase.idle_before_start: 30, Phase.run: 300},
        id="new-node: provisioning from its creation, image pull, run",
    ),
    pytest.param(
        AttemptTimes(capacity_ready=at(200), started=at(201), ended=at(261), node_since=at(200), warm=True),
        {Phase.idle_before_start: 1, Phase.run: 60},
        id="warm-pick: no provisioning, held from the pick",
    ),
    pytest.param(
        AttemptTimes(capacity_ready=at(5), started=at(5.5), ended=at(65.5)),
        {Phase.idle_before_start: 0.5, Phase.run: 60},
        id="local-slot: held from the slot's assignment",
    ),
    pytest.param(
        AttemptTimes(capacity_ready=at(100), started=None, ended=at(160), node_since=at(0)),
        {Phase.provisioning: 100, Phase.idle_before_start: 60},
        id="never-started: the pull failed, all of it idle before start",
    ),
    pytest.param(
        AttemptTimes(capacity_ready=None, started=None, ended=at(50), node_since=at(0)),
        {},
        id="cancelled-while-waiting: held no capacity, charged nothing",
    ),
    pytest.param(
        AttemptTimes(capacity_ready=at(100), started=at(99), ended=at(150), node_since=at(120)),
        {Phase.run: 50},
        id="skewed-clocks: a start before placement and a node after it are clamped",
    ),
]


@pytest.mark.parametrize(("times", "expected"), CASES)
def test_each_phase_of_an_attempt(times: AttemptTimes, expected: dict[Phase, float]) -> None:
    assert split(times) == pytest.approx(expected)


def test_an_attempt_still_running_is_counted_to_now_and_grows() -> None:
    times = AttemptTimes(capacity_ready=at(10), started=at(12), ended=None, node_since=at(0))
    assert split(times, now=100) == pytest.approx(
        {Phase.provisioning: 10, Phase.idle_before_start: 2, Phase.run: 88}
    )
    assert split(times, now=200)[Phase.run] == pytest.approx(188)


def test_the_spans_of_an_attempt_never_overlap_and_cover_its_node_time() -> None:
    times = AttemptTimes(capacity_ready=at(200), started=at(230), ended=at(530), node_since=at(20))
    spans = attempt_spans(times, at(1000))
    assert [s.phase for s in spans] == [Phase.provisioning, Phase.idle_before_start, Phase.run]
    assert all(a.end == b.start for a, b in itertools.pairwise(spans))
    assert spans[0].start == at(20)
    assert spans[-1].end == at(530)


def test_idle_after_runs_to_the_nodes_next_use_or_removal() -> None:
    reused = idle_after_span(ended=at(530), next_use_or_removal=at(590))
    removed = idle_after_span(ended=at(530), next_use_or_removal=at(1130))
    assert reused is not None
    assert removed is not None
    assert reused.phase is Phase.idle_after
    assert (reused.seconds, removed.seconds) == (60, 600)
    assert idle_after_span(ended=at(530), next_use_or_removal=at(500)) is None, "reused before it ended"


def test_warm_capacity_no_one_used_is_a_bucket_of_its_own() -> None:
    span = warm_unused_span(since=at(0), until=at(900))
    assert span is not None
    assert (span.phase, span.seconds) == (Phase.warm_unused, 900)
    assert warm_unused_span(since=at(10), until=at(10)) is None


def test_a_span_is_cut_at_hour_boundaries() -> None:
    span = Span(Phase.run, T0.replace(minute=50), T0.replace(hour=12, minute=10))
    assert list(by_hour(span)) == [
        (T0, 600.0),
        (T0.replace(hour=11), 3600.0),
        (T0.replace(hour=12), 600.0),
    ]
    assert sum(s for _, s in by_hour(span)) == span.seconds


def invocation(state: State = State.queued) -> Invocation:
    inv = Invocation(
        id="inv-1", function="fn", state=State.queued, priority=Priority.normal, timeline=Timeline(T0)
    )
    if state is State.queued:
        return inv
    inv = advance(inv, State.pending, at(1))
    inv = advance(inv, State.running, at(3))
    return inv if state is State.running else advance(inv, state, at(63))


def test_an_end_ends_the_attempt_with_its_own_times() -> None:
    running = invocation(State.running)
    done = advance(running, State.succeeded, at(63))
    times = ended_attempt(running, done)
    assert times == AttemptTimes(capacity_ready=at(3), started=at(3), ended=at(63))


def test_a_requeue_ends_the_attempt_with_the_times_the_requeue_clears() -> None:
    running = invocation(State.running)
    requeued = advance(running, State.queued, at(40))
    assert requeued.timeline.started is None, "the requeue starts a new attempt"
    times = ended_attempt(running, requeued)
    assert times == AttemptTimes(capacity_ready=at(3), started=at(3), ended=at(40))


def test_transitions_that_end_no_attempt_charge_nothing() -> None:
    queued = invocation()
    pending = advance(queued, State.pending, at(1))
    assert ended_attempt(queued, pending) is None, "admission"
    assert ended_attempt(pending, advance(pending, State.running, at(2))) is None, "a start"
    assert ended_attempt(queued, advance(queued, State.cancelled, at(2))) is None, "cancelled in the queue"
    assert live_attempt(queued) is None
    assert live_attempt(invocation(State.running)) == AttemptTimes(at(3), at(3), None)


def test_a_cost_adds_the_live_attempt_to_what_the_ledger_holds() -> None:
    stored = {Phase.run: PhaseTotal(seconds=60, usd=0.009)}
    live = [Span(Phase.run, at(0), at(3600))]
    cost = invocation_cost(stored, live, usd_per_hour=0.54)
    assert cost.open
    assert cost.phases[Phase.run].seconds == 3660
    assert cost.usd == pytest.approx(0.549)
    assert set(cost.phases) == set(Phase)
    unpriced = invocation_cost({}, live, usd_per_hour=None)
    assert (unpriced.usd, unpriced.unpriced_seconds) == (0, 3600)
    assert not invocation_cost(stored, [], 0.54).open


@pytest.mark.parametrize(
    ("node", "named", "expected"),
    [
        pytest.param(None, None, None, id="no-node-yet"),
        pytest.param("gpu-node-1", Capacity.spot, Capacity.spot, id="named-spot"),
        pytest.param("gpu-node-1", Capacity.on_demand, Capacity.on_demand, id="named-on-demand"),
        pytest.param("gpu-node-1", None, Capacity.local, id="unnamed-the-backends"),
        pytest.param(None, Capacity.spot, Capacity.spot, id="named-before-the-node"),
    ],
)
def test_a_node_is_priced_as_it_named_or_as_its_backend(
    node: str | None, named: Capacity | None, expected: Capacity | None
) -> None:
    inv = replace(invocation(State.running), node=node, node_capacity=named)
    assert priced_as(inv, unnamed=Capacity.local) == expected
    requeued = advance(inv, State.queued, at(90))
    assert priced_as(requeued, unnamed=Capacity.local) is None, "a requeue forgets the node"


def ended_in(cluster: str, started: float, finished: float, state: State = State.succeeded) -> Invocation:
    """The record of an attempt that ran in MultiKueue's workers: its run counts from its first
    start to its end, and it names the worker of the run it ended with."""
    inv = invocation(state)
    timeline = replace(inv.timeline, started=at(started), finished=at(finished))
    return replace(inv, timeline=timeline, cluster=cluster, gpu_type="nvidia-tesla-t4")


def run(worker: str, started: float, ended: float) -> WorkerRun:
    return WorkerRun(worker, at(started), at(ended))


RUNS_CASES = [
    pytest.param(
        ended_in("w2", 2, 200),
        [run("w1", 2, 250), run("w2", 100, 200)],
        0,
        (150, "w1", 250),
        id="lost-worker-first: its run from 2 s went on to 250 s, the record's from 2 s counts w2's",
    ),
    pytest.param(
        ended_in("w1", 2, 150),
        [run("w1", 2, 150), run("w2", 100, 160)],
        0,
        (60, "w2", 160),
        id="the-other-stopped-after-the-end: its whole run",
    ),
    pytest.param(
        ended_in("w2", 40, 300),
        [run("w1", 40, 70), run("w2", 200, 300)],
        0,
        None,
        id="evicted-before-the-other-began: the record's run counts both already",
    ),
    pytest.param(
        ended_in("w2", 2, 200), [run("w1", 2, 250), run("w2", 100, 200)], 150, None, id="told-again: nothing"
    ),
    pytest.param(
        ended_in("w3", 0, 300),
        [run("w1", 0, 100), run("w2", 50, 200), run("w3", 150, 300)],
        50,  # what an earlier telling charged; all three held 400 s against the record's 300
        (50, "w2", 200),
        id="three-workers: a run told later adds its part",
    ),
    pytest.param(ended_in("w1", 0, 60), [run("w1", 0, 60), run("w1", 0, 60)], 0, None, id="one-worker"),
    pytest.param(ended_in("w2", 0, 60), [run("w1", 0, 60.5), run("w2", 0, 60)], 60, None, id="noise"),
]


@pytest.mark.parametrize(("inv", "runs", "charged_s", "charge"), RUNS_CASES)
def test_what_the_runs_held_beyond_the_records_run_is_charged_as_run_again(
    inv: Invocation, runs: list[WorkerRun], charged_s: float, charge: tuple[float, str, float] | None
) -> None:
    got = run_again_charge(inv, 0, runs, charged_s)
    if charge is None:
        assert got is None
        return
    assert got is not None
    [span] = got.spans
    seconds, worker, end = charge
    assert (span.phase, span.seconds, got.cluster, span.end) == (Phase.run_again, seconds, worker, at(end))
    assert (got.source, got.attempt, got.gpu_type) == (inv.id, 0, "nvidia-tesla-t4")


def test_runs_are_not_charged_before_the_record_ends_nor_for_another_attempt() -> None:
    runs = [run("w1", 2, 250), run("w2", 100, 200)]
    going = ended_in("w2", 2, 200, State.running)
    going = replace(going, timeline=replace(going.timeline, finished=None))
    assert run_again_charge(going, 0, runs, 0) is None
    assert run_again_charge(ended_in("w2", 2, 200), 1, runs, 0) is None
    assert run_again_charge(ended_in("w2", 2, 200), None, runs, 0) is None
