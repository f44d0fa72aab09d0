"""Priority preemption end to end: a real SQLite store, the local backend, real processes.

Two GPU slots (or a GPU budget of 2) held by low-priority work; a high-priority invocation
arrives and starts once the newest preemptible one is stopped for it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from backends.local.support import process_gone, read_records, wait_gone
from dispatch.test_dispatcher import Gateway, first_record, gateway, recorder, run
from elasticityops.api.metrics import Metrics
from elasticityops.dispatch.cycle import CyclePlan
from elasticityops.domain.admission import DEFAULT_GPU_TYPE, AdmissionSnapshot, QueuedItem
from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.functions import Priority
from elasticityops.domain.gpus_held import by_version
from elasticityops.domain.invocations import FailureReason, Note, State
from elasticityops.domain.preemption import PREEMPTED, PREEMPTING

LONG_S = 4.0  # the newer low-priority job: still running when the high one comes
OLDER_S = 120.0  # the older one never ends by itself (a test cancels it): it frees no GPU


async def _two_low_running(gw: Gateway, record: Path, **payload: Any) -> tuple[str, str]:
    older = await gw.submit("low", {"record": str(record), "sleep": OLDER_S, **payload})
    await gw.until(older, State.running)
    await first_record(record, older)
    newer = await gw.submit("low", {"record": str(record), "sleep": LONG_S, **payload})
    await gw.until(newer, State.running)
    await first_record(record, newer)
    return older, newer


def _starts(record: Path) -> list[str]:
    return [r["id"] for r in read_records(record) if r["event"] == "start"]


def _ends(record: Path) -> list[str]:
    return [r["id"] for r in read_records(record) if r["event"] == "end"]


def _order(record: Path) -> list[tuple[str, str]]:
    """(event, id) in the order the jobs wrote them."""
    return [(r["event"], r["id"]) for r in read_records(record)]


async def _cancel_older(gw: Gateway, older: str) -> None:
    """The older one ran on untouched (never preempted) until the test is done with it."""
    current = await gw.store.get_invocation(older)
    assert current is not None
    assert (current.state, current.attempt) == (State.running, 0)
    assert not any(n.kind == PREEMPTING for n in current.notes)
    await gw.dispatcher.cancel(older)


@pytest.mark.parametrize(
    "limit",
    [{"gpus": 2}, {"gpus": 3, "gpu_budget": GpuBudget(total=2)}],
    ids=["two-slots", "budget-of-two"],
)
def test_high_priority_preempts_the_newest_low_which_is_requeued_and_succeeds(
    tmp_path: Path, limit: dict[str, Any]
) -> None:
    record = tmp_path / "record.jsonl"
    metrics = Metrics()

    async def scenario() -> None:
        async with gateway(tmp_path, **limit) as gw:
            gw.store.observe_transitions(metrics.on_transition)
            await gw.deploy(recorder("low", priority=Priority.low, preemptible=True, retries=1))
            await gw.deploy(recorder("high", priority=Priority.high))
            # Deaf to SIGTERM: the victim takes the kill grace (1 s) to go, and its GPU is not
            # free before that.
            older, newer = await _two_low_running(gw, record, ignore_term=True)
            first_pid = (await first_record(record, newer))["pid"]
            high = await gw.submit("high", {"record": str(record), "sleep": 0.1})
            # It starts once the victim's GPU is really free: its process is gone by then.
            await first_record(record, high)
            assert process_gone(first_pid)
            ran = await gw.ended(high, within_s=30)
            assert ran.state is State.succeeded, ran.message
            # The newest low one made way, and its process is gone; the older one ran on.
            assert wait_gone(first_pid)
            assert high in _starts(record)
            assert newer not in _ends(record)[: _ends(record).index(high)]
            done = await gw.ended(newer, within_s=60)
            assert (done.state, done.attempt) == (State.succeeded, 1), done.message
            kinds = [n.kind for n in done.notes]
            assert PREEMPTING in kinds
            assert PREEMPTED in kinds
            assert any(high in n.message for n in done.notes if n.kind == PREEMPTED)
            assert done.timeline.preempted is not None
            assert done.timeline.started is not None
            assert done.timeline.started > done.timeline.preempted
            await _cancel_older(gw, older)
        starts = _starts(record)
        assert starts.count(newer) == 2, "the preempted one ran again as its next attempt"
        assert starts.count(older) == 1
        assert starts.index(high) < len(starts) - 1 == starts.index(newer, starts.index(newer) + 1)
        assert (tmp_path / "runs" / f"{newer}.1").is_dir(), "the new attempt has a run dir of its own"
        assert metrics.preemptions.labels(outcome="requeued")._value.get() == 1

    run(tmp_path, scenario)


def test_without_retries_the_victim_fails_preempted(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=2) as gw:
            await gw.deploy(recorder("low", priority=Priority.low, preemptible=True))
            await gw.deploy(recorder("high", priority=Priority.high))
            older, newer = await _two_low_running(gw, record)
            high = await gw.submit("high", {"record": str(record), "sleep": 0.1})
            failed = await gw.ended(newer, within_s=30)
            assert (failed.state, failed.failure_reason, failed.attempt) == (
                State.failed,
                FailureReason.preempted,
                0,
            )
            assert high in failed.message
            assert "retries" in failed.message
            assert (await gw.ended(high, within_s=30)).state is State.succeeded
            await _cancel_older(gw, older)
        assert _starts(record).count(newer) == 1

    run(tmp_path, scenario)


def test_a_function_that_is_not_preemptible_is_never_preempted(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=2) as gw:
            await gw.deploy(recorder("low", priority=Priority.low, retries=3))  # preemptible: false
            await gw.deploy(recorder("high", priority=Priority.high))
            older, newer = await _two_low_running(gw, record)
            high = await gw.submit("high", {"record": str(record), "sleep": 0.1})
            done = await gw.ended(newer, within_s=30)
            assert (done.state, done.attempt) == (State.succeeded, 0)
            assert (await gw.ended(high, within_s=30)).state is State.succeeded
            assert gw.dispatcher.preempter.preempted == 0
            await _cancel_older(gw, older)
        order = _order(record)
        assert order.index(("start", high)) > order.index(("end", newer)), "it waited for a slot"

    run(tmp_path, scenario)


def test_equal_priority_waits_instead_of_preempting(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=2) as gw:
            await gw.deploy(recorder("low", priority=Priority.low, preemptible=True, retries=1))
            await gw.deploy(recorder("low-too", priority=Priority.low))
            older, newer = await _two_low_running(gw, record)
            same = await gw.submit("low-too", {"record": str(record)})
            assert (await gw.ended(same, within_s=30)).state is State.succeeded
            assert (await gw.ended(newer, within_s=30)).attempt == 0
            assert gw.dispatcher.preempter.preempted == 0
            await _cancel_older(gw, older)
        order = _order(record)
        assert order.index(("start", same)) > order.index(("end", newer)), "it waited for a slot"

    run(tmp_path, scenario)


def test_a_restart_finishes_a_preemption_begun_before_a_crash(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=1) as gw:
            await gw.deploy(recorder("low", priority=Priority.low, preemptible=True, retries=1))
            victim = await gw.submit("low", {"record": str(record), "sleep": 120})
            await gw.until(victim, State.running)
            first_pid = (await first_record(record, victim))["pid"]
            # The gateway dies right after recording the intent (before stopping the job).
            await gw.dispatcher.stop()
            note = Note(datetime.now(UTC), PREEMPTING, "for inv-gone")
            assert await gw.store.mark_preempting(victim, "inv-gone", note) is not None
        async with gateway(tmp_path, gpus=1) as gw:
            # The restart stops the old attempt and requeues it: not lost, not run twice at once.
            requeued = await gw.until(victim, State.queued, within_s=30)
            assert requeued.attempt == 1
            assert requeued.preempting_by is None
            assert wait_gone(first_pid)
            running = await gw.until(victim, State.running, within_s=30)
            assert running.attempt == 1
            again = await first_record_of_attempt(record, victim, 2)
            assert again["pid"] != first_pid
            await gw.dispatcher.cancel(victim)
        assert _starts(record).count(victim) == 2

    run(tmp_path, scenario)


async def first_record_of_attempt(path: Path, inv_id: str, nth: int) -> dict[str, Any]:
    """The `nth` start record of the invocation (its attempts run the same job again)."""
    async with asyncio.timeout(60):
        while True:
            found = [r for r in read_records(path) if r["id"] == inv_id and r["event"] == "start"]
            if len(found) >= nth:
                return found[nth - 1]
            await asyncio.sleep(0.05)


def test_a_gpu_freed_during_a_cycle_is_no_reason_to_stop_a_second_victim(tmp_path: Path) -> None:
    """The race CI met: a cycle read no GPU free while a stopped job still held its slot (one GPU
    freeing), and that job's end came before the cycle's preemption step. The step must give
    back what the cycle read; read afresh (nothing freeing any more, the free count still the
    old one), the high-priority work still looked blocked, and the other low one was stopped
    for it too. Here both readings are handed to the step directly, with real running jobs."""
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=2) as gw:
            await gw.deploy(recorder("low", priority=Priority.low, preemptible=True, retries=1))
            older, newer = await _two_low_running(gw, record)
            active = by_version(await gw.store.active_counts_by_type())
            versions = await gw.dispatcher.functions.versions(list(active))
            waiting = QueuedItem("inv-high-waiting", "high", Priority.high, 1, DEFAULT_GPU_TYPE)
            snapshot = AdmissionSnapshot(
                queued=[waiting], free_gpus=0, gpu_budget_left=None, active_by_function={}, max_concurrency={}
            )
            plan = CyclePlan(admit=[], fail=[], snapshot=snapshot)
            preempter = gw.dispatcher.preempter

            held = await preempter.after_plan(plan, active, versions, {DEFAULT_GPU_TYPE: 1})
            assert held == 0, "the GPU the cycle saw going away is the high one's"
            for inv in (older, newer):
                current = await gw.store.get_invocation(inv)
                assert current is not None
                assert (current.state, current.attempt, current.preempting_by) == (State.running, 0, None)

            # The control: with nothing freeing, the same plan stops the newest low one.
            assert await preempter.after_plan(plan, active, versions, {}) == 1
            stopped = await gw.store.get_invocation(newer)
            assert stopped is not None
            assert stopped.attempt == 1, "requeued as its next attempt"
            await _cancel_older(gw, older)
            await gw.dispatcher.cancel(newer)

    run(tmp_path, scenario)
