"""The dispatcher's spillover hook end to end over a real SQLite store: a note that the type
cannot be had (or a wait past EOPS_SPILL_AFTER_SECONDS) moves a pending invocation to its
function's next GPU type, the Job is withdrawn before the new one is launched, and the timeline
says why. The backend is a stand-in that records what it is asked (the Kubernetes backend's own
withdraw is tested against an HTTP server in tests/backends/kubernetes/test_backend.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from elasticityops.changes.hub import ChangeHub
from elasticityops.dispatch.dispatcher import Dispatcher
from elasticityops.dispatch.settings import DispatchSettings
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.functions import FunctionSpec, GpuSpec
from elasticityops.domain.invocations import Invocation, Note, State, new_invocation_id
from elasticityops.domain.ports import LaunchRequest, NewInvocation
from elasticityops.domain.spillover import SPILLED
from elasticityops.store.sql import SqlStore
from helpers.fake_backend import FakeBackend

pytestmark = pytest.mark.anyio

T4, L4 = "nvidia-tesla-t4", "nvidia-l4"
STOCKOUT = "simulated stockout: zone us-central1-a does not have enough resources available"


class ClusterLike(FakeBackend):
    """Records launches with the GPU type each asks for; `withdraw` records the order of calls,
    so the test can tell the old Job went before the new one was launched."""

    name = "cluster-like"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self.launched = asyncio.Event()

    async def launch(self, request: LaunchRequest) -> None:
        self.calls.append(("launch", request.invocation.id, request.invocation.gpu_type))
        self.launched.set()

    async def withdraw(self, invocation: Invocation) -> bool:
        self.calls.append(("withdraw", invocation.id, invocation.gpu_type))
        await asyncio.sleep(0.05)  # the Job takes a moment to go
        return True

    async def note(self, invocation_id: str, kind: str, message: str) -> None:
        assert self.sink is not None
        await self.sink(BackendEvent(invocation_id, note=Note(datetime.now(UTC), kind, message)))


@asynccontextmanager
async def gateway(
    tmp_path: Path, **dispatch: float
) -> AsyncIterator[tuple[SqlStore, ClusterLike, ChangeHub]]:
    store = await SqlStore.open(f"sqlite:///{tmp_path / 'eops.db'}")
    backend = ClusterLike()
    hub = ChangeHub()
    settings = DispatchSettings(server_secret=b"s", tick_s=0.2, **dispatch)  # type: ignore[arg-type]
    dispatcher = Dispatcher(store, backend, hub, SystemClock(), settings)
    await dispatcher.start()
    try:
        yield store, backend, hub
    finally:
        await dispatcher.stop()
        await store.close()


async def submit(store: SqlStore, hub: ChangeHub, types: list[str]) -> str:
    spec = FunctionSpec(name="f", command=["true"], gpu=GpuSpec(written=types))
    record, _ = await store.put_function(spec, datetime.now(UTC))
    new = NewInvocation(new_invocation_id(), "f", record.version, 1, datetime.now(UTC), b"{}")
    inv, _ = await store.create_invocation(new)
    hub.work_available()
    return inv.id


async def until(store: SqlStore, inv_id: str, check: object, within_s: float = 10) -> Invocation:
    async with asyncio.timeout(within_s):
        while True:
            inv = await store.get_invocation(inv_id)
            assert inv is not None
            if callable(check) and check(inv):
                return inv
            await asyncio.sleep(0.05)


async def test_a_stockout_note_spills_a_pending_invocation_to_the_next_type(tmp_path: Path) -> None:
    async with gateway(tmp_path) as (store, backend, hub):
        inv_id = await submit(store, hub, [T4, L4])
        pending = await until(store, inv_id, lambda i: i.state is State.pending and backend.calls)
        assert pending.gpu_type == T4
        await backend.note(inv_id, "Stockout", STOCKOUT)
        spilled = await until(store, inv_id, lambda i: len(backend.calls) == 3)
    assert backend.calls == [("launch", inv_id, T4), ("withdraw", inv_id, T4), ("launch", inv_id, L4)]
    assert (spilled.state, spilled.gpu_type) == (State.pending, L4)
    assert spilled.notes[-1].kind == SPILLED
    assert (
        spilled.notes[-1].message
        == "spilled to nvidia-l4: zone us-central1-a stocked out for nvidia-tesla-t4"
    )


async def test_a_note_on_the_last_type_or_of_a_single_type_function_moves_nothing(tmp_path: Path) -> None:
    async with gateway(tmp_path) as (store, backend, hub):
        single = await submit(store, hub, [T4])
        await until(store, single, lambda i: i.state is State.pending)
        await backend.note(single, "Stockout", STOCKOUT)
        await asyncio.sleep(0.5)
        inv = await store.get_invocation(single)
    assert inv is not None
    assert [c[0] for c in backend.calls] == ["launch"]
    assert inv.gpu_type == T4
    assert [n.kind for n in inv.notes] == ["Stockout"]


async def test_waiting_past_spill_after_seconds_spills(tmp_path: Path) -> None:
    async with gateway(tmp_path, spill_after_seconds=1.0) as (store, backend, hub):
        inv_id = await submit(store, hub, [T4, L4])
        spilled = await until(store, inv_id, lambda i: i.gpu_type == L4 and len(backend.calls) == 3)
    assert (
        spilled.notes[-1].message
        == "spilled to nvidia-l4: no nvidia-tesla-t4 node within 1 s (EOPS_SPILL_AFTER_SECONDS)"
    )
    assert [c[0] for c in backend.calls] == ["launch", "withdraw", "launch"]
