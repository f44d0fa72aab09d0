"""Which workers an attempt ran in, kept past its end and bounded, and each pod's end told once."""

from __future__ import annotations

from elasticityops.backends.kubernetes.worker_runs import WorkerRuns


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


def test_each_pods_end_is_told_once() -> None:
    runs = WorkerRuns()
    runs.ran("a", 0, "worker-1")
    assert runs.first_end("a", 0, "uid-1")
    assert not runs.first_end("a", 0, "uid-1")
    assert runs.first_end("a", 0, "uid-2")
    assert not runs.first_end("a", -1, "uid-3"), "an older attempt's"


def test_only_the_newest_invocations_are_kept() -> None:
    runs = WorkerRuns(limit=2)
    runs.ran("a", 0, "worker-1")
    runs.ran("b", 0, "worker-1")
    runs.ran("a", 0, "worker-2")  # a is the newest used now
    runs.ran("c", 0, "worker-1")  # b goes
    assert runs.workers("a", 0) == {"worker-1", "worker-2"}
    assert runs.workers("b", 0) == set(), "b was forgotten"
