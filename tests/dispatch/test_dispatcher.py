"""The dispatcher end to end: a real SQLite store, the local backend, real processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backends.local.support import RECORDER, assert_exclusive, read_records, reaped_supervisors, wait_gone
from elasticityops.backends.local.backend import LocalBackend
from elasticityops.backends.local.settings import LocalBackendSettings
from elasticityops.changes.hub import ChangeHub
from elasticityops.dispatch.dispatcher import Dispatcher
from elasticityops.dispatch.settings import DispatchSettings
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.functions import FunctionSpec, GpuSpec, Priority
from elasticityops.domain.invocations import FailureReason, Invocation, State, new_invocation_id
from elasticityops.domain.ports import Change, NewInvocation
from elasticityops.store.sql import SqlStore
from helpers.examples import example_spec

REPO = Path(__file__).resolve().parents[2]
SECRET = b"test-secret"


@dataclass
class Gateway:
    store: SqlStore
    backend: LocalBackend
    hub: ChangeHub
    dispatcher: Dispatcher

    async def deploy(self, spec: FunctionSpec) -> FunctionSpec:
        # As the API routes do: write, then drop the name from the one cache of specs.
        await self.store.put_function(spec, datetime.now(UTC))
        self.dispatcher.functions.forget(spec.name)
        return spec

    async def delete(self, name: str) -> None:
        assert await self.store.delete_function(name, datetime.now(UTC))
        self.dispatcher.functions.forget(name)

    async def submit(self, function: str, payload: dict[str, Any] | None = None) -> str:
        record = await self.store.get_function(function)
        assert record is not None
        new = NewInvocation(
            id=new_invocation_id(),
            function=function,
            spec_version=record.version,
            priority_rank=record.spec.priority.rank,
            accepted_at=datetime.now(UTC),
            payload=json.dumps(payload or {}).encode(),
        )
        inv, _ = await self.store.create_invocation(new)
        self.hub.work_available()
        return inv.id

    async def ended(self, inv_id: str, within_s: float = 90) -> Invocation:
        async with asyncio.timeout(within_s):
            while True:
                with self.hub.watch(inv_id) as changed:
                    inv = await self.store.get_invocation(inv_id)
                    assert inv is not None
                    if inv.state.terminal:
                        return inv
                    await changed.wait()

    async def until(self, inv_id: str, state: State, within_s: float = 60) -> Invocation:
        async with asyncio.timeout(within_s):
            while True:
                with self.hub.watch(inv_id) as changed:
                    inv = await self.store.get_invocation(inv_id)
                    assert inv is not None
                    if inv.state is state:
                        return inv
                    await changed.wait()


@asynccontextmanager
async def gateway(
    tmp_path: Path, gpus: int = 2, start: bool = True, **dispatch: Any
) -> AsyncIterator[Gateway]:
    store = await SqlStore.open(f"sqlite:///{tmp_path / 'eops.db'}")
    backend = LocalBackend(
        LocalBackendSettings(
            run_dir=tmp_path / "runs", gpus=gpus, virtual=True, kill_grace_s=1.0, workdir=REPO
        )
    )
    hub = ChangeHub()
    settings = DispatchSettings(
        server_secret=SECRET, callback_base_url="http://127.0.0.1:9", tick_s=0.5, **dispatch
    )
    gw = Gateway(store, backend, hub, Dispatcher(store, backend, hub, SystemClock(), settings))
    try:
        if start:
            await gw.dispatcher.start()
        yield gw
    finally:
        await gw.dispatcher.stop()
        await store.close()


def recorder(name: str = "rec", **fields: Any) -> FunctionSpec:
    return FunctionSpec(name=name, command=["python", RECORDER], **fields)


async def first_record(path: Path, inv_id: str) -> dict[str, Any]:
    """The job's own "start" record: it exists only once the job's code runs."""
    async with asyncio.timeout(60):
        while True:
            found = [r for r in read_records(path) if r["id"] == inv_id]
            if found:
                return found[0]
            await asyncio.sleep(0.05)


def run(tmp_path: Path, scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with reaped_supervisors(tmp_path / "runs"):
        asyncio.run(scenario())


def test_hello_example_succeeds_with_its_result_and_timeline(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with gateway(tmp_path) as gw:
            await gw.deploy(example_spec("hello"))
            inv = await gw.ended(await gw.submit("hello", {"name": "Ada"}))
            assert inv.state is State.succeeded, inv.message
            assert inv.exit_code == 0
            assert json.loads(inv.result or b"") == {"greeting": "hello, Ada!", "gpu_slot": "0"}
            assert inv.node == "slot-0"
            tl = inv.timeline
            assert None not in (tl.dispatched, tl.capacity_ready, tl.started, tl.finished)
            logs = b"".join([c async for c in gw.backend.logs(inv, follow=False)])
            assert b"hello, Ada!" in logs

    run(tmp_path, scenario)


def test_gpu_matmul_example_says_where_it_ran(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with gateway(tmp_path) as gw:
            await gw.deploy(example_spec("gpu-matmul"))
            inv = await gw.ended(await gw.submit("gpu-matmul", {"n": 128, "repeat": 2}))
            assert inv.state is State.succeeded, inv.message
            result = json.loads(inv.result or b"")
            # Virtual slots hide every GPU, so the example must have fallen back to the CPU.
            assert (result["device"], result["library"], result["gpu"]) == ("cpu", "numpy", False)
            assert result["gflops"] > 0

    run(tmp_path, scenario)


def test_failures_are_recorded_with_their_reason(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with gateway(tmp_path) as gw:
            await gw.deploy(recorder())
            await gw.deploy(recorder("short", timeout_seconds=1))
            await gw.deploy(FunctionSpec(name="missing", command=["eops-no-such-command"]))
            await gw.deploy(recorder("big", gpu=GpuSpec(count=3)))
            failed = await gw.ended(await gw.submit("rec", {"exit": 7}))
            timed_out = await gw.ended(await gw.submit("short", {"sleep": 60}))
            not_found = await gw.ended(await gw.submit("missing"))
            too_big = await gw.ended(await gw.submit("big"))
            assert (failed.state, failed.failure_reason, failed.exit_code) == (
                State.failed,
                FailureReason.exit_code,
                7,
            )
            assert (timed_out.state, timed_out.failure_reason) == (State.timed_out, FailureReason.timeout)
            assert (not_found.state, not_found.failure_reason) == (State.failed, FailureReason.launch_error)
            assert (too_big.state, too_big.failure_reason) == (State.failed, FailureReason.no_capacity)

    run(tmp_path, scenario)


def test_queue_beyond_the_slots_runs_in_priority_then_arrival_order(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=1, start=False) as gw:
            for priority in Priority:
                await gw.deploy(recorder(f"rec-{priority.value}", priority=priority))
            order = ["low", "normal", "high", "normal", "low", "high"]
            ids = [await gw.submit(f"rec-{p}", {"record": str(record), "sleep": 0.1}) for p in order]
            await gw.dispatcher.start()
            for inv_id in ids:
                assert (await gw.ended(inv_id)).state is State.succeeded
            started = [r["id"] for r in read_records(record) if r["event"] == "start"]
            expected = [ids[i] for i in (2, 5, 1, 3, 0, 4)]
            assert started == expected

    run(tmp_path, scenario)


def test_slots_are_exclusive_with_many_concurrent_invocations(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    slots = 3

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=slots) as gw:
            await gw.deploy(recorder())
            ids = await asyncio.gather(
                *(gw.submit("rec", {"record": str(record), "sleep": 0.2}) for _ in range(12))
            )
            for inv_id in ids:
                assert (await gw.ended(inv_id)).state is State.succeeded
        lines = read_records(record)
        starts = {r["id"]: r for r in lines if r["event"] == "start"}
        ends = {r["id"]: r for r in lines if r["event"] == "end"}
        assert sorted(starts) == sorted(ids)
        assert_exclusive(starts, ends, slots)

    run(tmp_path, scenario)


def test_cancel_queued_and_running(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path, gpus=1) as gw:
            await gw.deploy(recorder())
            running_id = await gw.submit("rec", {"record": str(record), "sleep": 120, "child": True})
            queued_id = await gw.submit("rec", {"record": str(record)})
            await gw.until(running_id, State.running)
            assert (await gw.store.get_invocation(queued_id)).state is State.queued  # type: ignore[union-attr]
            cancelled_queued = await gw.dispatcher.cancel(queued_id)
            assert cancelled_queued.state is State.cancelled
            start = await first_record(record, running_id)
            cancelled = await gw.dispatcher.cancel(running_id)
            assert (cancelled.state, cancelled.failure_reason) == (State.cancelled, FailureReason.cancelled)
            assert wait_gone(start["pid"])
            assert wait_gone(start["child_pid"])
            again = await gw.dispatcher.cancel(running_id)  # over already: unchanged
            assert again.state is State.cancelled
        assert [r["id"] for r in read_records(record)] == [running_id]  # the queued one never ran

    run(tmp_path, scenario)


def test_function_deleted_while_queued_fails_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with gateway(tmp_path, start=False) as gw:
            await gw.deploy(recorder("doomed"))
            inv_id = await gw.submit("doomed")
            await gw.delete("doomed")
            await gw.dispatcher.start()
            inv = await gw.ended(inv_id)
            assert (inv.state, inv.failure_reason) == (State.failed, FailureReason.function_deleted)

    run(tmp_path, scenario)


def test_restart_adopts_relaunches_and_never_runs_twice(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"

    async def scenario() -> None:
        async with gateway(tmp_path) as gw:
            await gw.deploy(recorder())
            survivor = await gw.submit("rec", {"record": str(record), "sleep": 1.5})
            await gw.until(survivor, State.running)
            # The gateway "dies": its dispatcher and watchers stop, the job runs on.
            await gw.dispatcher.stop()
            # Died between `queued -> pending` and launch: pending, never launched.
            unlaunched = await gw.submit("rec", {"record": str(record)})
            now = datetime.now(UTC)
            await gw.store.apply(Change(unlaunched, State.pending, now))
            # Running, but the backend has no trace of it (its run dir was lost).
            vanished = await gw.submit("rec", {"record": str(record)})
            await gw.store.apply(Change(vanished, State.pending, now))
            await gw.store.apply(Change(vanished, State.running, now))
        async with gateway(tmp_path) as gw:
            assert (await gw.ended(survivor)).state is State.succeeded
            assert (await gw.ended(unlaunched)).state is State.succeeded
            lost = await gw.ended(vanished)
            assert (lost.state, lost.failure_reason) == (State.failed, FailureReason.lost)
        starts = [r["id"] for r in read_records(record) if r["event"] == "start"]
        assert sorted(starts) == sorted([survivor, unlaunched])  # once each; the lost one never

    run(tmp_path, scenario)


def _writes_result(name: str, value: str) -> FunctionSpec:
    code = f"import os; open(os.environ['EOPS_RESULT_PATH'], 'w').write('\"{value}\"')"
    return FunctionSpec(name=name, command=["python", "-c", code])


def test_an_invocation_runs_the_spec_version_it_was_accepted_with(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with gateway(tmp_path, start=False) as gw:
            await gw.deploy(_writes_result("versioned", "v1"))
            under_v1 = await gw.submit("versioned")
            await gw.deploy(_writes_result("versioned", "v2"))
            under_v2 = await gw.submit("versioned")
            await gw.dispatcher.start()
            first, second = await gw.ended(under_v1), await gw.ended(under_v2)
            assert (first.state, first.result) == (State.succeeded, b'"v1"'), (
                "ran the spec it was accepted with"
            )
            assert (second.state, second.result) == (State.succeeded, b'"v2"')
            assert (first.spec_version, second.spec_version) == (1, 2)

    run(tmp_path, scenario)
