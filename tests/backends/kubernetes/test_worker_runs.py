"""Which workers an attempt ran in, kept past its end and bounded, and each pod's end told once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from elasticityops.backends.kubernetes.worker_runs import WorkerRuns
from elasticityops.domain.node_seconds import WorkerRun


def test_the_workers_an_attempt_ran_in_add_up_and_a_retry_starts_afresh() -> None:
    runs = WorkerRuns()
    assert runs.ran("a", 0, "worker-1")
    assert not runs.ran("a", 0, "worker-1"), "no news"
    assert runs.ran("a", 0, "worker-2")
    assert runs.workers("a", 0) == {"worker-1", "worker-2"}
    assert runs.ran("a", 1, "worker-2")
    assert runs.workers("a", 1) == {"worker-2"}, "a retry is no second run of the first"
    assert not runs.ran("a", 0, "worker-1"), "an older attempt's pod, while it goes"
    assert runs.workers("a", 0) == set()
    assert runs.ran("b", 0, "worker-1")
    assert runs.workers("b", 0) == {"worker-1"}, "each invocation its own"


def test_the_runs_over_are_told_once_two_workers_ran_each_time_one_more_is_over() -> None:
    runs = WorkerRuns()
    t0 = datetime(2026, 12, 7, tzinfo=UTC)
    first, second = WorkerRun("worker-1", t0, t0 + timedelta(seconds=30)), WorkerRun("worker-2", t0, t0)
    runs.ran("a", 0, "worker-1")
    assert runs.over("a", 0, "uid-1", first) == (), "one worker so far: kept, told with the next"
    runs.ran("a", 0, "worker-2")
    assert runs.over("a", 0, "uid-1", first) == (), "the same pod again"
    assert runs.over("a", 0, "uid-2", second) == (first, second)
    assert runs.over("a", -1, "uid-3", second) == (), "an older attempt's"


def test_only_the_newest_invocations_are_kept() -> None:
    runs = WorkerRuns(limit=2)
    runs.ran("a", 0, "worker-1")
    runs.ran("b", 0, "worker-1")
    runs.ran("a", 0, "worker-2")  # a is the newest used now
    runs.ran("c", 0, "worker-1")  # b goes
    assert runs.workers("a", 0) == {"worker-1", "worker-2"}
    assert runs.workers("b", 0) == set(), "b was forgotten"
