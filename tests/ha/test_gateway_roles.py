"""The gateway's roles in process: the app `build_app` makes with --leader-elect, on a real SQLite
store, a backend that only records, and the in-memory Lease, over httpx's ASGI transport. A
replica starts as a follower that serves the API and dispatches nothing; it leads when the lease
is released, and stops its dispatcher at once when another holder shows up. With real gateway
processes and the real Lease: tests/backends/kubernetes/test_replicas_cluster.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.api.runtime import Runtime
from elasticityops.domain.invocations import FailureReason, Invocation, State
from elasticityops.domain.lease import LeaseRecord, released
from elasticityops.domain.ports import Change, EventSink, LaunchRequest
from elasticityops.ha.settings import LeaderElectionSettings
from helpers.fake_backend import FakeBackend
from helpers.in_process import eventually, in_process_gateway, in_process_settings
from helpers.server import free_port
from helpers.webhook_receiver import running_receiver

from .memory_leases import Leases, Replica

pytestmark = pytest.mark.anyio

ELECTION = LeaderElectionSettings(
    leader_elect=True, identity="me", lease_duration_s=2, renew_deadline_s=1.0, retry_period_s=0.2
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class RecordingBackend(FakeBackend):
    """Runs nothing; says when it was started and stopped and what it was asked to launch."""

    name = "recording"
    runs: list[str] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)

    async def start(self, sink: EventSink) -> None:
        self.runs.append("start")

    async def stop(self) -> None:
        self.runs.append("stop")

    async def launch(self, request: LaunchRequest) -> None:
        self.launched.append(request.invocation.id)

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        return [i.id for i in active if i.id not in self.launched]


@dataclass
class Gateway:
    runtime: Runtime
    client: httpx.AsyncClient
    backend: RecordingBackend

    async def ready(self) -> tuple[int, Any]:
        answer = await self.client.get("/readyz")
        return answer.status_code, answer.json()

    async def leader_gauge(self) -> str:
        text = (await self.client.get("/metrics")).text
        return next(line for line in text.splitlines() if line.startswith("eops_leader "))


def _now() -> datetime:
    return datetime.now(UTC)


def held_by(holder: str, leases: Leases, duration: int = 60) -> None:
    """Another replica writes the lease (a long one: it stays fresh for the whole test)."""
    previous = leases.record
    transitions = 0 if previous is None else previous.transitions + 1
    leases.stored(LeaseRecord(holder, duration, _now(), _now(), transitions))


@asynccontextmanager
async def replica(tmp_path: Path, leases: Leases, **env: str) -> AsyncIterator[Gateway]:
    # In code, past load_settings' refusal of SQLite and the local backend: the roles are what
    # this tests, not the sharing of a database.
    settings = replace(in_process_settings(tmp_path, **env), leader=ELECTION)
    backend = RecordingBackend()
    async with in_process_gateway(settings, backend, lease_store=Replica(leases)) as (runtime, client):
        yield Gateway(runtime, client, backend)


async def test_a_follower_serves_leads_once_released_and_stops_at_once_when_deposed(tmp_path: Path) -> None:
    leases = Leases()
    held_by("other", leases)
    async with replica(tmp_path, leases) as r:
        await eventually(lambda: r.runtime.leader == "other", 2)
        assert await r.ready() == (200, {"status": "ready", "role": "follower", "leader": "other"})
        assert await r.leader_gauge() == "eops_leader 0.0"
        accepted = await r.client.post("/v1/functions/hello/invocations", content=b"{}")
        assert accepted.status_code == 202, "a follower accepts"
        inv = accepted.json()["id"]
        await asyncio.sleep(0.5)
        assert r.backend.runs == [], "a follower never starts the backend's watches"
        assert r.backend.launched == []
        assert r.runtime.election is not None
        assert r.runtime.election.observed_age() is not None

        assert leases.record is not None
        leases.stored(released(leases.record, _now()))
        await eventually(lambda: r.runtime.dispatcher.running, 3)
        assert await r.ready() == (200, {"status": "ready", "role": "leader", "leader": "me"})
        assert await r.leader_gauge() == "eops_leader 1.0"
        await eventually(lambda: inv in r.backend.launched, 3)  # adopted and admitted by the new leader
        assert leases.record.holder == "me"
        assert leases.record.transitions == 1, "other -> released (no transition) -> me"

        held_by("intruder", leases)
        await eventually(lambda: not r.runtime.dispatcher.running, ELECTION.retry_period_s + 1)
        assert r.backend.runs == ["start", "stop"]
        assert await r.ready() == (200, {"status": "ready", "role": "follower", "leader": "intruder"})
    assert leases.record.holder == "intruder", "a follower gives nothing up on its way out"


async def test_a_leader_releases_the_lease_on_its_way_out(tmp_path: Path) -> None:
    leases = Leases()
    async with replica(tmp_path, leases) as r:
        await eventually(lambda: r.runtime.dispatcher.running, 3)
        assert r.runtime.role == "leader"
    assert r.backend.runs == ["start", "stop"]
    assert leases.record is not None
    assert (leases.record.holder, leases.record.lease_duration_s) == ("", 1)


async def test_on_a_follower_headroom_names_the_leader_and_metrics_answer(tmp_path: Path) -> None:
    leases = Leases()
    held_by("gw-0", leases)
    async with replica(tmp_path, leases, EOPS_HEADROOM="warm:1") as r:
        await eventually(lambda: r.runtime.leader == "gw-0", 2)
        answer = await r.client.get("/v1/headroom")
        assert answer.status_code == 503
        assert answer.json()["error"]["message"].startswith(
            "this replica is a follower; the leader gw-0 runs the headroom controller"
        )
        assert "Retry-After" in answer.headers
        metrics = await r.client.get("/metrics")
        assert metrics.status_code == 200
        held = [line for line in metrics.text.splitlines() if line.startswith("eops_headroom_held{")]
        assert held == [], "a follower holds no warm capacity"


async def test_only_the_leader_delivers_webhooks_and_a_new_leader_delivers_what_waited(
    tmp_path: Path,
) -> None:
    """The outbox is the database's: a follower writes events but sends none; the replica that
    takes the lead reads them back and delivers them (a leader change loses none)."""
    leases = Leases()
    held_by("other", leases)
    env = {"EOPS_WEBHOOK_ALLOW_PRIVATE": "true", "EOPS_WEBHOOK_POLL_SECONDS": "0.1"}
    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver:
        async with replica(tmp_path, leases, **env) as r:
            await eventually(lambda: r.runtime.leader == "other", 2)
            spec = {"command": ["true"], "webhook": {"url": receiver.url}}
            deployed = await r.client.put("/v1/functions/hooked", json=spec)
            assert deployed.status_code == 201, deployed.text
            accepted = await r.client.post("/v1/functions/hooked/invocations", content=b"{}")
            inv = accepted.json()["id"]
            # Its end, as the leader's dispatcher (elsewhere) would write it: the event with it.
            change = Change(id=inv, to=State.failed, at=_now(), reason=FailureReason.function_deleted)
            assert await r.runtime.store.apply(change) is not None
            await asyncio.sleep(0.5)
            assert receiver.requests() == [], "a follower delivers nothing"
            assert leases.record is not None
            leases.stored(released(leases.record, _now()))
            await eventually(lambda: len(receiver.requests()) == 1, 5)
            (request,) = receiver.requests()
            assert request["headers"]["webhook-id"] == f"{inv}.completed"
