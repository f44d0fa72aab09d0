"""The local backend on a full disk, with real supervisors and jobs: its run directories on a
2 MiB tmpfs that a filler file (or the job's own output) fills up. Whatever the disk refuses,
every job's watcher lives on: the job ends with an outcome that says what happened, its GPU
slot goes back, a cancel still stops it, and the launch waiting for the slot goes on."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

from elasticityops.backends.local import rundir
from elasticityops.backends.local.backend import LocalBackend
from elasticityops.backends.local.settings import LocalBackendSettings
from elasticityops.domain.invocations import FailureReason, State
from helpers.small_disk import fill, small_tmpfs

from .support import Events, reaped_supervisors, request, spec, supervisor_of, wait_gone

Scenario = Callable[[LocalBackend, Events, Path], Awaitable[None]]
NO_SPACE = os.strerror(28)  # "No space left on device"


def on_a_small_disk(tmp_path: Path, scenario: Scenario) -> None:
    """One GPU slot; run directories on a tmpfs of 2 MiB, handed to `scenario` as the disk."""
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        run_root = disk / "runs"
        settings = LocalBackendSettings(run_dir=run_root, gpus=1, virtual=True, kill_grace_s=2.0)
        backend = LocalBackend(settings)

        async def main() -> None:
            events = Events()
            await backend.start(events)
            try:
                await scenario(backend, events, disk)
            finally:
                await backend.stop()

        with reaped_supervisors(run_root):
            asyncio.run(main())


async def until_started(events: Events, inv_id: str) -> None:
    async with asyncio.timeout(60):
        while not events.of(inv_id, "started"):
            await events.changed()


def test_a_supervisor_lost_on_a_full_disk_ends_lost_and_hands_its_slot_on(tmp_path: Path) -> None:
    """The issue's case: the supervisor gone without a record, and the gateway's own record of
    the loss refused by the disk (no room set aside for it: a run dir from before there was
    any, or one the job emptied). The watcher died of ENOSPC here, its slot was never freed and
    the launch waiting for it never ran."""

    async def scenario(backend: LocalBackend, events: Events, disk: Path) -> None:
        sleeper = request(spec(), {"sleep": 300})
        await backend.launch(sleeper)
        await until_started(events, sleeper.invocation.id)
        behind = request(spec(), {"print": "ran after it"})
        await backend.launch(behind)  # no slot free: it waits in the backend, in order
        assert events.of(behind.invocation.id, "note")
        run_dir = disk / "runs" / sleeper.invocation.id
        for room in run_dir.glob(".exit.json.*"):
            room.unlink()
        filler = fill(disk)
        supervisor_of(run_dir).send_signal(signal.SIGKILL)

        lost = await events.finished(sleeper.invocation.id)
        assert lost.reason is FailureReason.lost, lost
        assert NO_SPACE in lost.message, lost.message
        pid = json.loads((run_dir / rundir.STARTED).read_text())["pid"]
        assert await asyncio.to_thread(wait_gone, pid), "the job is stopped"

        # The slot went on to the launch behind it, which met the full disk in its turn.
        failed = await events.finished(behind.invocation.id)
        assert failed.reason is FailureReason.launch_error, failed
        assert NO_SPACE in failed.message, failed.message
        assert backend.free_gpus() == 1
        assert not (disk / "runs" / behind.invocation.id).exists(), "a failed launch leaves no debris"

        filler.unlink()
        again = request(spec(), {"print": "room again"})
        await backend.launch(again)
        done = await events.finished(again.invocation.id)
        assert done.state is State.succeeded, done
        assert backend.free_gpus() == 1

    on_a_small_disk(tmp_path, scenario)


def test_output_that_fills_the_disk_is_dropped_and_the_job_ends_as_it_exits(tmp_path: Path) -> None:
    """A job writes 4 MiB to a 2 MiB disk: the log takes what fits, the rest is counted, the
    job runs to its own end (exit code 3 here), and the outcome says what the log is missing."""
    chatty = "import sys\nfor _ in range(4096): sys.stdout.write('x' * 1023 + '\\n')\nsys.exit(3)"

    async def scenario(backend: LocalBackend, events: Events, disk: Path) -> None:
        req = request(spec(["python", "-c", chatty]))
        await backend.launch(req)
        done = await events.finished(req.invocation.id)
        assert done.reason is FailureReason.exit_code, done
        assert done.exit_code == 3
        assert NO_SPACE in done.message, done.message
        assert "bytes of its output" in done.message
        assert backend.free_gpus() == 1

        (disk / "runs" / req.invocation.id / rundir.LOG).unlink()  # what filled it
        after = request(spec(), {"print": "after"})
        await backend.launch(after)
        assert (await events.finished(after.invocation.id)).state is State.succeeded

    on_a_small_disk(tmp_path, scenario)


def test_a_cancel_on_a_full_disk_stops_the_job_and_frees_its_slot(tmp_path: Path) -> None:
    async def scenario(backend: LocalBackend, events: Events, disk: Path) -> None:
        req = request(spec(), {"sleep": 300})
        await backend.launch(req)
        await until_started(events, req.invocation.id)
        filler = fill(disk)
        await backend.cancel(req.invocation)
        done = await events.finished(req.invocation.id)
        assert done.state is State.cancelled, done
        assert backend.free_gpus() == 1
        filler.unlink()
        after = request(spec(), {"print": "after"})
        await backend.launch(after)
        assert (await events.finished(after.invocation.id)).state is State.succeeded

    on_a_small_disk(tmp_path, scenario)


def test_a_watcher_that_fails_stops_its_job_reports_it_lost_and_frees_its_slot(tmp_path: Path) -> None:
    """Not the disk: anything else that breaks a watcher (here a look that raises) still ends
    the invocation, stops its job and hands the slot on."""

    async def scenario(backend: LocalBackend, events: Events, disk: Path) -> None:
        req = request(spec(), {"sleep": 300})
        await backend.launch(req)
        await until_started(events, req.invocation.id)
        behind = request(spec(), {"print": "ran after it"})
        await backend.launch(behind)
        pid = json.loads((disk / "runs" / req.invocation.id / rundir.STARTED).read_text())["pid"]

        look = backend._look

        def broken(run_dir: Path, proc: object, told: object) -> object:
            if run_dir.name == req.invocation.id:
                raise RuntimeError("a bug in a look")
            return look(run_dir, proc, told)  # type: ignore[arg-type]

        backend._look = broken  # type: ignore[assignment]
        lost = await events.finished(req.invocation.id)
        assert lost.reason is FailureReason.lost, lost
        assert "a bug in a look" in lost.message
        assert (await events.finished(behind.invocation.id)).state is State.succeeded
        assert await asyncio.to_thread(wait_gone, pid), "the job is stopped"

    on_a_small_disk(tmp_path, scenario)
