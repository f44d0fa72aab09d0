"""The local backend with real processes: outcomes, timeouts, cancels, slots, cold starts and
adoption after a gateway is killed. Nothing here asserts how fast anything is."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from elasticityops.backends.local import rundir
from elasticityops.backends.local.backend import LocalBackend
from elasticityops.backends.local.settings import LocalBackendSettings
from elasticityops.domain.functions import GpuSpec
from elasticityops.domain.invocations import FailureReason, Invocation, State

from .support import (
    Events,
    ShiftClock,
    assert_exclusive,
    invocation,
    process_gone,
    read_records,
    reaped_supervisors,
    request,
    spec,
    wait_gone,
)

Scenario = Callable[[LocalBackend, Events], Awaitable[None]]


def run_scenario(tmp_path: Path, scenario: Scenario, **settings: object) -> None:
    run_root = tmp_path / "runs"
    options: dict[str, object] = {"gpus": 2, "virtual": True, "kill_grace_s": 2.0, **settings}
    backend = LocalBackend(LocalBackendSettings(run_dir=run_root, **options))  # type: ignore[arg-type]

    async def main() -> None:
        events = Events()
        await backend.start(events)
        try:
            await scenario(backend, events)
        finally:
            await backend.stop()

    with reaped_supervisors(run_root):
        asyncio.run(main())


async def wait_for_record(path: Path, inv_id: str, event: str = "start") -> dict[str, object]:
    async with asyncio.timeout(60):
        while True:
            for line in read_records(path):
                if line["id"] == inv_id and line["event"] == event:
                    return line
            await asyncio.sleep(0.05)


def test_success_hands_back_result_logs_and_environment(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(
            spec(), {"print": "hello from the job", "result": {"answer": 42}, "record": str(record)}
        )
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.exit_code == 0
        assert done.reason is None
        assert json.loads(done.result or b"") == {"answer": 42}
        assert events.parts(req.invocation.id) == ["capacity_ready", "started", "finished"]
        logs = b"".join([chunk async for chunk in backend.logs(req.invocation, follow=False)])
        assert b"hello from the job" in logs
        (seen,) = [r for r in read_records(record) if r["event"] == "start"]
        assert seen["slot"] == "0"
        assert seen["cuda"] == ""  # a virtual slot hides every real GPU
        assert seen["token"] == "token-123"
        assert seen["callback"] == req.callback_url
        assert seen["cwd"] == os.getcwd()
        assert seen["python"] == sys.executable  # a leading `python` is the gateway's interpreter
        assert backend.free_gpus() == 2

    run_scenario(tmp_path, scenario)


def test_non_zero_exit_fails_with_the_code(tmp_path: Path) -> None:
    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(), {"exit": 3})
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.reason is FailureReason.exit_code
        assert done.exit_code == 3
        assert "code 3" in done.message

    run_scenario(tmp_path, scenario)


def test_command_not_found_is_a_launch_error(tmp_path: Path) -> None:
    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(["eops-no-such-command-anywhere"]))
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.reason is FailureReason.launch_error
        assert "eops-no-such-command-anywhere" in done.message
        assert not events.of(req.invocation.id, "started")
        assert backend.free_gpus() == 2

    run_scenario(tmp_path, scenario)


def test_the_job_runs_in_its_functions_workdir(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    workdir = tmp_path / "fn dir"  # a space: the directory is passed as it is, never through a shell
    workdir.mkdir()

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(workdir=str(workdir)), {"record": str(record)})
        await backend.launch(req)
        assert (await events.finished(req.invocation.id)).exit_code == 0
        (seen,) = [r for r in read_records(record) if r["event"] == "start"]
        assert seen["cwd"] == str(workdir)

    run_scenario(tmp_path, scenario)


def test_a_workdir_that_is_not_there_is_a_launch_error_naming_it(tmp_path: Path) -> None:
    gone = tmp_path / "moved-away"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(workdir=str(gone)))
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.reason is FailureReason.launch_error
        assert f"workdir {str(gone)!r} is not a directory" in done.message
        assert "command not found" not in done.message
        assert backend.free_gpus() == 2

    run_scenario(tmp_path, scenario)


def test_more_gpus_than_the_machine_has_is_refused(tmp_path: Path) -> None:
    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(gpu=GpuSpec(count=3)))
        await backend.launch(req)  # launch failures come back as the job's end, like any other
        done = await events.finished(req.invocation.id)
        assert (done.state, done.reason) == (State.failed, FailureReason.launch_error)
        assert "gpu.count is 3" in done.message
        assert not (tmp_path / "runs" / req.invocation.id).exists()  # nothing was started

    run_scenario(tmp_path, scenario)


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(timeout_seconds=1), {"sleep": 120, "child": True, "record": str(record)})
        await backend.launch(req)
        started = await wait_for_record(record, req.invocation.id)
        done = await events.finished(req.invocation.id)
        assert done.state is State.timed_out
        assert done.reason is FailureReason.timeout
        assert wait_gone(int(started["pid"]))  # type: ignore[call-overload]
        assert wait_gone(int(started["child_pid"]))  # type: ignore[call-overload]

    run_scenario(tmp_path, scenario)


HOSTILE = str(Path(__file__).resolve().parents[2] / "jobs" / "hostile.py")


def test_launches_of_one_invocation_at_once_start_it_once(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(), {"sleep": 1, "record": str(record)})
        await asyncio.gather(*(backend.launch(req) for _ in range(5)))
        assert backend.free_gpus() == 1, "one slot taken, once"
        await events.finished(req.invocation.id)
        assert [r["event"] for r in read_records(record)] == ["start", "end"]
        assert len(events.of(req.invocation.id, "finished")) == 1
        assert backend.free_gpus() == 2

    run_scenario(tmp_path, scenario)


@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroup", "process-tree"])
def test_a_daemon_that_left_its_session_goes_with_its_job(tmp_path: Path, cgroups: bool) -> None:
    pid_file = tmp_path / "daemon.pid"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(["python", HOSTILE]), {"do": "daemon", "pid_file": str(pid_file)})
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.state is State.succeeded, done
        daemon, sid, _ = (int(n) for n in pid_file.read_text().split())
        started = json.loads((tmp_path / "runs" / req.invocation.id / rundir.STARTED).read_text())
        assert sid != started["pid"], "it left the job's session"
        try:
            assert wait_gone(daemon, 10), f"daemon {daemon} outlived its job"
        finally:
            if not process_gone(daemon):
                os.kill(daemon, signal.SIGKILL)
        if cgroups and started["tracking"] != "cgroup":
            pytest.skip("this machine gives no writable cgroup v2; tracked by process tree instead")
        assert started["tracking"] == ("cgroup" if cgroups else "process tree")

    run_scenario(tmp_path, scenario, cgroups=cgroups)


def test_the_wait_for_a_cold_slot_counts_toward_the_timeout(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(timeout_seconds=2), {"record": str(record)})
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.state is State.timed_out, done
        assert "never started" in done.message
        assert read_records(record) == [], "the job never ran"

    run_scenario(tmp_path, scenario, slot_provision_delay_s=4.0)


def test_an_exit_record_the_job_writes_itself_is_not_believed(tmp_path: Path) -> None:
    forge = (
        "import json, os, time; run = os.path.dirname(os.environ['EOPS_RESULT_PATH']); "
        "open(os.path.join(run, 'exit.json'), 'w').write(json.dumps({'exit_code': 0})); "
        "time.sleep(1.5); raise SystemExit(7)"
    )

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(["python", "-c", forge]))
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.state is State.failed, done
        assert done.exit_code == 7

    run_scenario(tmp_path, scenario)


@pytest.mark.parametrize("ignores_sigterm", [False, True], ids=["polite", "ignores-sigterm"])
def test_cancel_stops_the_process_group(tmp_path: Path, ignores_sigterm: bool) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        payload = {"sleep": 120, "child": True, "record": str(record), "ignore_term": ignores_sigterm}
        req = request(spec(), payload)
        await backend.launch(req)
        started = await wait_for_record(record, req.invocation.id)
        assert not process_gone(int(started["pid"]))  # type: ignore[call-overload]
        await backend.cancel(req.invocation)
        done = await events.finished(req.invocation.id)
        assert done.state is State.cancelled
        assert done.reason is FailureReason.cancelled
        if ignores_sigterm:
            assert done.exit_code == 128 + signal.SIGKILL  # SIGKILL after the grace
        assert wait_gone(int(started["pid"]))  # type: ignore[call-overload]
        assert wait_gone(int(started["child_pid"]))  # type: ignore[call-overload]
        assert backend.free_gpus() == 2

    run_scenario(tmp_path, scenario, kill_grace_s=0.5)


def test_gpu_slots_are_exclusive_under_concurrency(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    slots = 3

    async def scenario(backend: LocalBackend, events: Events) -> None:
        reqs = [request(spec(), {"sleep": 0.3, "record": str(record)}) for _ in range(10)]
        # All at once: beyond the free slots the backend holds them, in order.
        for req in reqs:
            await backend.launch(req)
        assert backend.free_gpus() == 0
        for req in reqs:
            assert (await events.finished(req.invocation.id)).exit_code == 0
        assert backend.free_gpus() == slots

    run_scenario(tmp_path, scenario, gpus=slots)
    lines = read_records(record)
    starts = {r["id"]: r for r in lines if r["event"] == "start"}
    ends = {r["id"]: r for r in lines if r["event"] == "end"}
    assert len(starts) == len(ends) == 10
    assert_exclusive(starts, ends, slots)


def test_logs_follow_until_the_job_ends(tmp_path: Path) -> None:
    code = "import time\nfor i in range(5):\n    print('line', i, flush=True)\n    time.sleep(0.1)\n"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(["python", "-c", code]))
        await backend.launch(req)
        await wait_started(events, req.invocation.id)
        text = b"".join([chunk async for chunk in backend.logs(req.invocation, follow=True)])
        assert text.decode().splitlines() == [f"line {i}" for i in range(5)]

    run_scenario(tmp_path, scenario)


async def wait_started(events: Events, inv_id: str) -> None:
    async with asyncio.timeout(60):
        while not events.of(inv_id, "started") and not events.of(inv_id, "finished"):
            await events.changed()


def test_cold_slot_warms_once_then_is_released_after_idling(tmp_path: Path) -> None:
    clock = ShiftClock()
    delay = 0.5
    backend = LocalBackend(
        LocalBackendSettings(
            run_dir=tmp_path / "runs",
            gpus=1,
            virtual=True,
            slot_provision_delay_s=delay,
            slot_idle_timeout_s=60,
        ),
        clock,
    )

    async def run_one(events: Events) -> list[str]:
        req = request(spec())
        await backend.launch(req)
        await events.finished(req.invocation.id)
        run_dir = tmp_path / "runs" / req.invocation.id
        launched = (run_dir / rundir.LAUNCH).stat().st_mtime
        capacity = rundir.read_json(run_dir / rundir.CAPACITY)
        assert capacity is not None
        notes = [e.note.kind for e in events.of(req.invocation.id, "note") if e.note is not None]
        if "SlotWarming" in notes:
            assert float(capacity["at"]) - launched >= delay  # the cold start really waited
        return [*notes, *(p for p in events.parts(req.invocation.id) if p != "note")]

    async def main() -> None:
        events = Events()
        await backend.start(events)
        try:
            assert not backend.slots()[0].warm
            assert await run_one(events) == ["SlotWarming", "capacity_ready", "started", "finished"]
            assert backend.slots()[0].warm
            # warm: no wait, and the timeline says it found warm capacity
            assert await run_one(events) == ["WarmUnits", "capacity_ready", "started", "finished"]
            clock.offset += 61  # idle past the timeout: released, cold again
            assert not backend.slots()[0].warm
            assert await run_one(events) == ["SlotWarming", "capacity_ready", "started", "finished"]
        finally:
            await backend.stop()

    with reaped_supervisors(tmp_path / "runs"):
        asyncio.run(main())


def test_cancel_during_the_cold_start_never_runs_the_job(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(), {"record": str(record)})
        await backend.launch(req)
        await backend.cancel(req.invocation)
        done = await events.finished(req.invocation.id)
        assert done.state is State.cancelled
        assert not events.of(req.invocation.id, "started")

    run_scenario(tmp_path, scenario, slot_provision_delay_s=30)
    assert read_records(record) == []


def test_jobs_survive_a_killed_gateway_and_are_adopted_exactly_once(tmp_path: Path) -> None:
    run_root = tmp_path / "runs"
    record = tmp_path / "record.jsonl"
    stand_in = Path(__file__).with_name("gateway_stand_in.py")
    with reaped_supervisors(run_root):
        gateway = subprocess.Popen(
            [sys.executable, str(stand_in), str(run_root), str(record), "2"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert gateway.stdout is not None
            ids = json.loads(gateway.stdout.readline())
            long_ids, quick_id = ids["long"], ids["quick"]
            asyncio.run(wait_records(record, [*long_ids, quick_id]))
        finally:
            gateway.send_signal(signal.SIGKILL)  # the gateway dies without any goodbye
            gateway.wait()
            assert gateway.stdout is not None
            gateway.stdout.close()
        never_launched = invocation()
        adopted_ids = [*long_ids, quick_id]

        async def main() -> None:
            backend = LocalBackend(LocalBackendSettings(run_dir=run_root, gpus=3, virtual=True))
            events = Events()
            await backend.start(events)
            try:
                active = [invocation_with_id(i) for i in adopted_ids] + [never_launched]
                missing = await backend.adopt(active)
                assert missing == [never_launched.id]
                for inv_id in adopted_ids:
                    assert (await events.finished(inv_id)).exit_code == 0
                # Launching adopted work again starts nothing (it only reports the end again).
                for inv in active[:-1]:
                    await backend.launch(request(spec(), {"record": str(record)}, inv))
                    await events.finished(inv.id)
                assert backend.free_gpus() == 3
            finally:
                await backend.stop()

        asyncio.run(main())
    starts = [r["id"] for r in read_records(record) if r["event"] == "start"]
    assert sorted(starts) == sorted(adopted_ids)  # each ran exactly once


def invocation_with_id(inv_id: str) -> Invocation:
    return replace(invocation(State.running), id=inv_id)


async def wait_records(path: Path, ids: list[str]) -> None:
    for inv_id in ids:
        await wait_for_record(path, inv_id)


def test_adopted_running_job_keeps_its_slot(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    run_root = tmp_path / "runs"

    async def main() -> None:
        first = LocalBackend(LocalBackendSettings(run_dir=run_root, gpus=2, virtual=True))
        await first.start(Events())
        req = request(spec(), {"sleep": 120, "record": str(record)})
        await first.launch(req)
        await wait_for_record(record, req.invocation.id)
        await first.stop()  # the old gateway is gone; its job is not
        second = LocalBackend(LocalBackendSettings(run_dir=run_root, gpus=2, virtual=True))
        events = Events()
        await second.start(events)
        try:
            assert await second.adopt([req.invocation]) == []
            assert second.free_gpus() == 1
            assert [s.holder for s in second.slots()] == [req.invocation.id, None]
            await second.cancel(req.invocation)
            assert (await events.finished(req.invocation.id)).state is State.cancelled
            assert second.free_gpus() == 2
        finally:
            await second.stop()

    with reaped_supervisors(run_root):
        asyncio.run(main())


def test_a_dead_supervisor_means_lost_and_its_job_is_stopped(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(), {"sleep": 120, "record": str(record)})
        await backend.launch(req)
        started = await wait_for_record(record, req.invocation.id)
        run_dir = str(tmp_path / "runs" / req.invocation.id)
        (supervisor,) = [
            p for p in psutil.process_iter(["cmdline"]) if run_dir in (p.info.get("cmdline") or [])
        ]
        supervisor.send_signal(signal.SIGKILL)
        done = await events.finished(req.invocation.id)
        assert done.reason is FailureReason.lost
        assert wait_gone(int(started["pid"]))  # type: ignore[call-overload]

    run_scenario(tmp_path, scenario)


def test_a_dead_supervisors_daemon_is_stopped_by_its_cgroup(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        payload = {"do": "daemon", "pid_file": str(pid_file), "then_sleep": 120}
        req = request(spec(["python", HOSTILE]), payload)
        await backend.launch(req)
        for _ in range(600):
            if pid_file.exists():
                break
            await asyncio.sleep(0.05)
        daemon = int(pid_file.read_text().split()[0])
        try:
            run_dir = tmp_path / "runs" / req.invocation.id
            if json.loads((run_dir / rundir.STARTED).read_text())["tracking"] != "cgroup":
                pytest.skip("no writable cgroup v2 here: a lost supervisor's daemon is out of reach")
            (supervisor,) = [
                p for p in psutil.process_iter(["cmdline"]) if str(run_dir) in (p.info.get("cmdline") or [])
            ]
            supervisor.send_signal(signal.SIGKILL)
            done = await events.finished(req.invocation.id)
            assert done.reason is FailureReason.lost
            assert wait_gone(daemon, 10), "the daemon outlived its lost supervisor"
        finally:
            if not process_gone(daemon):
                os.kill(daemon, signal.SIGKILL)

    run_scenario(tmp_path, scenario)


def test_a_launch_that_died_before_its_supervisor_is_redone(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario(backend: LocalBackend, events: Events) -> None:
        req = request(spec(), {"record": str(record)})
        (tmp_path / "runs" / req.invocation.id).mkdir()  # a gateway died right after mkdir
        assert await backend.adopt([req.invocation]) == [req.invocation.id]
        await backend.launch(req)
        assert (await events.finished(req.invocation.id)).exit_code == 0

    run_scenario(tmp_path, scenario)
    assert len([r for r in read_records(record) if r["event"] == "start"]) == 1


def test_launch_beyond_the_slots_waits_and_can_be_cancelled(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    waiting = request(spec(), {"record": str(record)})

    async def scenario(backend: LocalBackend, events: Events) -> None:
        running = request(spec(), {"sleep": 120, "record": str(record)})
        await backend.launch(running)
        await backend.launch(waiting)  # no slot: held, and said so
        assert [e.note.kind for e in events.of(waiting.invocation.id) if e.note] == ["WaitingForSlot"]
        assert backend.free_gpus() == 0
        await backend.cancel(waiting.invocation)
        assert (await events.finished(waiting.invocation.id)).state is State.cancelled
        await backend.cancel(running.invocation)
        assert (await events.finished(running.invocation.id)).state is State.cancelled
        assert backend.free_gpus() == 1

    run_scenario(tmp_path, scenario, gpus=1)
    assert waiting.invocation.id not in {r["id"] for r in read_records(record)}  # it never ran


def test_physical_gpus_are_handed_out_one_per_invocation(tmp_path: Path) -> None:
    """As on a machine where nvidia-smi lists two GPUs: each job sees only its own."""
    record = tmp_path / "record.jsonl"
    backend = LocalBackend(
        LocalBackendSettings(run_dir=tmp_path / "runs"), detected_gpus=[(0, "NVIDIA L4"), (1, "NVIDIA L4")]
    )

    async def main() -> None:
        events = Events()
        await backend.start(events)
        try:
            reqs = [request(spec(), {"sleep": 0.5, "record": str(record)}) for _ in range(2)]
            for req in reqs:
                await backend.launch(req)
            for req in reqs:
                assert (await events.finished(req.invocation.id)).exit_code == 0
        finally:
            await backend.stop()

    with reaped_supervisors(tmp_path / "runs"):
        asyncio.run(main())
    seen = sorted((r["slot"], r["cuda"]) for r in read_records(record) if r["event"] == "start")
    assert seen == [("0", "0"), ("1", "1")]
