"""Several gateways on one PostgreSQL: a follower (dispatcher not running) accepts, answers
?wait, sees the functions another replica deploys and deletes, and cancels work the leader runs;
they share the callback secret. Real local jobs (processes), real HTTP (uvicorn in process)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from backends.local.support import reaped_supervisors, wait_gone
from elasticityops.domain.invocations import State, callback_token
from elasticityops.store.sql import SqlStore
from helpers.server import EOPS, base_env

from .support import leader_and_follower, prints_then_sleeps, replica, spec, writes_result

pytestmark = pytest.mark.anyio


async def test_replicas_starting_together_share_one_callback_secret(
    tmp_path: Path, database_url: str
) -> None:
    """Started together, the followers with --headroom too: neither their dispatcher nor their
    headroom controller starts."""
    async with AsyncExitStack() as stack:
        entering = [
            replica(tmp_path / name, database_url, dispatch=name == "a", EOPS_HEADROOM="warm:1")
            for name in ("a", "b", "c")
        ]
        a, b, c = await asyncio.gather(*(stack.enter_async_context(r) for r in entering))
        secrets = {r.runtime.server_secret for r in (a, b, c)}
        assert len(secrets) == 1
        assert len(next(iter(secrets))) == 32
        assert a.runtime.dispatcher.running
        assert a.runtime.headroom is not None
        for follower in (b, c):
            assert not follower.runtime.dispatcher.running
            assert follower.runtime.headroom is None


async def test_a_follower_runs_what_another_replica_deployed_and_refuses_what_it_deleted(
    tmp_path: Path, database_url: str
) -> None:
    async with leader_and_follower(tmp_path, database_url) as (a, b):
        await a.deploy(writes_result("versioned", "v1"))
        started = time.monotonic()
        first = await b.http.post("/v1/functions/versioned/invocations?wait=30", content=b"{}")
        assert first.status_code == 200, first.text  # ?wait on the follower: the leader ran it
        # Answered once the follower's poller saw the end, not when the wait ran out.
        assert time.monotonic() - started < 15
        assert (first.json()["spec_version"], first.json()["result"]) == (1, "v1")

        await a.deploy(writes_result("versioned", "v2"))
        await asyncio.sleep(0.5 + 0.2)  # the follower's functions check bound, and a margin
        started = time.monotonic()
        second = await b.http.post("/v1/functions/versioned/invocations?wait=30", content=b"{}")
        assert time.monotonic() - started < 15
        assert second.status_code == 200, second.text
        assert (second.json()["state"], second.json()["spec_version"], second.json()["result"]) == (
            "succeeded",
            2,
            "v2",
        )

        assert (await a.http.delete("/v1/functions/versioned")).is_success
        await asyncio.sleep(0.5 + 0.2)
        gone = await b.http.post("/v1/functions/versioned/invocations", content=b"{}")
        assert gone.status_code == 404, gone.text


async def test_cancel_through_the_follower_stops_the_leaders_running_job(
    tmp_path: Path, database_url: str
) -> None:
    async with leader_and_follower(tmp_path, database_url) as (a, b):
        await a.deploy(prints_then_sleeps("sleeper", 120))
        accepted = await b.http.post("/v1/functions/sleeper/invocations", content=b"{}")
        assert accepted.status_code == 202
        inv_id = accepted.json()["id"]
        await b.until(inv_id, lambda i: i.state is State.running)
        pid = a.job_pid(inv_id)
        # The follower checks the tokens of jobs the leader launched: one secret.
        posted = await b.http.post(
            f"/v1/invocations/{inv_id}/result",
            content=b'"partial"',
            headers={"Authorization": f"Bearer {callback_token(a.runtime.server_secret, inv_id)}"},
        )
        assert posted.status_code == 204, posted.text

        started = time.monotonic()
        cancelled = await b.http.post(f"/v1/invocations/{inv_id}/cancel")
        took = time.monotonic() - started
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["state"] == "cancelled"
        assert cancelled.json()["cancel_requested_at"] is None, "the end clears the request"
        assert took < 5, "the leader carried it out within the follower's wait"
        assert await asyncio.to_thread(wait_gone, pid, 20.0), f"job {pid} still runs"
        assert (await a.state_of(inv_id)).state is State.cancelled
        store = a.runtime.store
        assert isinstance(store, SqlStore)  # the API types it by what the routes use
        assert await store.cancel_requests(10) == []


async def test_a_queued_invocation_is_cancelled_by_the_follower_at_once(
    tmp_path: Path, database_url: str
) -> None:
    async with (
        replica(tmp_path / "a", database_url, dispatch=True, EOPS_DISPATCH_PAUSED="true") as a,
        replica(tmp_path / "b", database_url, dispatch=False) as b,
    ):
        await a.deploy(spec("quick", "pass"))
        inv_id = (await b.http.post("/v1/functions/quick/invocations", content=b"{}")).json()["id"]
        cancelled = await b.http.post(f"/v1/invocations/{inv_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert (cancelled.json()["state"], cancelled.json()["timeline"]["dispatched"]) == ("cancelled", None)
        assert (await b.http.post(f"/v1/invocations/{inv_id}/cancel")).status_code == 200, "again: a no-op"


async def test_cancels_racing_the_leaders_admission_all_end_cancelled_and_stop_every_job(
    tmp_path: Path, database_url: str
) -> None:
    """Ten invoked and at once cancelled through the follower while the leader admits them (2
    slots): whichever of the follower's compare-and-set and the leader's admission wins, each
    ends cancelled, and every job that was started is gone."""
    async with leader_and_follower(tmp_path, database_url) as (a, b):
        await a.deploy(prints_then_sleeps("sleeper", 120))

        async def invoke_and_cancel(after_s: float) -> tuple[str, int, str]:
            inv_id = (await b.http.post("/v1/functions/sleeper/invocations", content=b"{}")).json()["id"]
            await asyncio.sleep(after_s)
            answer = await b.http.post(f"/v1/invocations/{inv_id}/cancel")
            return inv_id, answer.status_code, answer.json()["state"]

        # Spread over many of the leader's 0.2 s ticks (wide enough for a loaded machine, where
        # a tick comes late): the early ones are cancelled while queued, the ones it admitted
        # meanwhile through a request it carries out.
        results = await asyncio.gather(*(invoke_and_cancel(0.3 * i) for i in range(10)))
        assert [(code, state) for _, code, state in results] == [(200, "cancelled")] * 10
        ended = [await a.state_of(inv_id) for inv_id, _, _ in results]
        admitted = [inv for inv in ended if inv.timeline.dispatched is not None]
        assert admitted, "the leader admitted some before their cancel: both paths ran"
        assert len(admitted) < len(ended), "and some were cancelled while queued"
        for inv_id, _, _ in results:
            run_dir = a.data_dir / "runs" / inv_id
            if (run_dir / "started.json").exists():
                assert await asyncio.to_thread(wait_gone, a.job_pid(inv_id), 20.0)


async def test_a_cancel_no_dispatcher_acts_on_is_answered_202_and_the_next_leader_carries_it_out(
    tmp_path: Path, database_url: str
) -> None:
    with reaped_supervisors(tmp_path / "a" / "runs"):
        follower = replica(tmp_path / "b", database_url, dispatch=False, EOPS_CANCEL_WAIT_SECONDS="0.5")
        async with follower as b:
            async with replica(tmp_path / "a", database_url, dispatch=True) as a:
                await a.deploy(prints_then_sleeps("sleeper", 120))
                inv_id = (await b.http.post("/v1/functions/sleeper/invocations", content=b"{}")).json()["id"]
                await b.until(inv_id, lambda i: i.state is State.running)
                pid = a.job_pid(inv_id)
            # The leader is gone (its job goes on running, as after any gateway stop).
            recorded = await b.http.post(f"/v1/invocations/{inv_id}/cancel")
            assert recorded.status_code == 202, recorded.text
            assert recorded.json()["state"] == "running"
            assert recorded.json()["cancel_requested_at"] is not None

            cli = await asyncio.to_thread(
                _eops, ["cancel", inv_id], {"EOPS_URL": b.url, "EOPS_TOKEN": b.token}
            )
            assert cli.returncode == 0, cli.stderr
            assert f"{inv_id}: running, cancel requested" in cli.stdout

            # A new leader on the same data dir adopts the job and carries the request out.
            async with replica(tmp_path / "a", database_url, dispatch=True):
                done = await b.until(inv_id, lambda i: i.state.terminal)
                assert (done.state, done.cancel_requested) == (State.cancelled, None)
                assert await asyncio.to_thread(wait_gone, pid, 20.0), f"job {pid} still runs"


def _eops(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EOPS, *args], env=base_env(env), capture_output=True, text=True, timeout=60)
