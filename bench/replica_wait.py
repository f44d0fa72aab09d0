"""What `?wait` costs on a gateway replica that did not make the change (docs/high-availability.md).

1. Latency: a follower (`build_app(dispatch=False)`, served by uvicorn on 127.0.0.1) holds a
   `GET /v1/invocations/{id}?wait=30`; another replica's store (a second SqlStore on the same
   PostgreSQL database, as the leader's dispatcher writes) commits the invocation's end at a
   random moment; the time from that commit to the follower's answer is one sample (p50/p95).
2. Load: N waiters (1, 100, 1,000) on the follower's hub, the change poller running on the
   system clock for a window: its queries per second, and how long each query takes.

    python bench/replica_wait.py [--database-url URL] [--samples 60] [--window 10] [--poll 0.5]

Without --database-url it starts a throwaway PostgreSQL (initdb, as the tests do:
tests/helpers/pg_cluster.py). Prints a Markdown table and writes JSON to bench/results/."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from machine_info import cpu_model

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the throwaway PostgreSQL of the tests

from elasticityops.changes.hub import ChangeHub, Watch  # noqa: E402
from elasticityops.changes.replicas import ChangePoller  # noqa: E402
from elasticityops.domain.clock import SystemClock  # noqa: E402
from elasticityops.domain.functions import Priority  # noqa: E402
from elasticityops.domain.invocations import State, new_invocation_id  # noqa: E402
from elasticityops.domain.ports import Change, NewInvocation  # noqa: E402
from elasticityops.server.app import build_app  # noqa: E402
from elasticityops.server.credentials import create_token  # noqa: E402
from elasticityops.settings import load_settings  # noqa: E402
from elasticityops.store.sql import SqlStore  # noqa: E402


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _queued(store: SqlStore) -> str:
    new = NewInvocation(new_invocation_id(), "bench", 1, Priority.normal.rank, datetime.now(UTC), b"{}")
    await store.create_invocation(new)
    return new.id


async def latency(url: str, samples: int, poll_s: float, data_dir: Path) -> list[float]:
    port = free_port()
    settings = load_settings(
        env={
            "EOPS_DATA_DIR": str(data_dir),
            "EOPS_DATABASE_URL": url,
            "EOPS_PORT": str(port),
            "EOPS_CHANGE_POLL_SECONDS": str(poll_s),
        }
    )
    app = build_app(settings, freeze_heap=False, dispatch=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    other = await SqlStore.open(url)  # the replica that makes the change
    found: list[float] = []
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
            await asyncio.sleep(0.02)
        token = await create_token(app.state.runtime.store, "bench", SystemClock())
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as http:
            for _ in range(samples):
                inv_id = await _queued(other)
                answered: dict[str, float] = {}

                async def wait(inv_id: str = inv_id, answered: dict[str, float] = answered) -> None:
                    answer = await http.get(f"/v1/invocations/{inv_id}", params={"wait": 30})
                    answered["at"] = time.perf_counter()
                    assert answer.json()["state"] == "cancelled", answer.text

                waiting = asyncio.create_task(wait())
                await asyncio.sleep(0.2 + random.uniform(0, poll_s))  # any phase of the poll
                await other.apply(Change(inv_id, State.cancelled, datetime.now(UTC)))
                committed = time.perf_counter()
                await waiting
                found.append(answered["at"] - committed)
    finally:
        await other.close()
        server.should_exit = True
        await serving
    return found


class TimedStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.durations: list[float] = []

    async def change_stamps(self, ids: Sequence[str]) -> Any:
        started = time.perf_counter()
        try:
            return await self.store.change_stamps(ids)
        finally:
            self.durations.append(time.perf_counter() - started)


async def load(url: str, waiters: int, window_s: float, poll_s: float) -> dict[str, float]:
    store = await SqlStore.open(url)
    try:
        ids = [await _queued(store) for _ in range(waiters)]
        hub = ChangeHub()
        timed = TimedStore(store)
        poller = ChangePoller(timed, hub, SystemClock(), poll_s)  # type: ignore[arg-type]
        with ExitStack() as stack:
            watches: list[Watch] = [stack.enter_context(hub.watch(i)) for i in ids]
            for watch in watches:
                watch.saw((State.queued, 0))
            poller.start()
            await asyncio.sleep(window_s)
            await poller.stop()
        return {
            "waiters": waiters,
            "queries_per_s": poller.queries / window_s,
            "query_ms_mean": 1000 * statistics.mean(timed.durations),
            "query_ms_p95": 1000 * percentile(timed.durations, 0.95),
        }
    finally:
        await store.close()


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from helpers.pg_cluster import fresh_database, pg_cluster

    with pg_cluster() as cluster:
        yield fresh_database(cluster)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with database(args.database_url) as url, tempfile.TemporaryDirectory() as tmp:
        found = await latency(url, args.samples, args.poll, Path(tmp) / "follower")
        loads = [await load(url, n, args.window, args.poll) for n in (1, 100, 1000)]
    return {
        "poll_s": args.poll,
        "samples": len(found),
        "end_to_answer_ms": {
            "p50": 1000 * percentile(found, 0.5),
            "p95": 1000 * percentile(found, 0.95),
            "max": 1000 * max(found),
        },
        "load": loads,
        "cpu": cpu_model(),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def table(result: dict[str, Any]) -> str:
    latency_ = result["end_to_answer_ms"]
    lines = [
        f"poll interval {result['poll_s']} s; {result['samples']} samples; end committed by another "
        f"replica -> follower's ?wait answer: p50 {latency_['p50']:.0f} ms, p95 {latency_['p95']:.0f} ms, "
        f"max {latency_['max']:.0f} ms",
        "",
        "| waiters | queries/s | query mean (ms) | query p95 (ms) |",
        "|---:|---:|---:|---:|",
    ]
    for row in result["load"]:
        lines.append(
            f"| {row['waiters']:,} | {row['queries_per_s']:.2f} | {row['query_ms_mean']:.2f} | "
            f"{row['query_ms_p95']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="a PostgreSQL URL; default: a throwaway server")
    parser.add_argument("--samples", type=int, default=60, help="?wait answers timed")
    parser.add_argument("--window", type=float, default=10.0, help="seconds each waiter count is polled")
    parser.add_argument("--poll", type=float, default=0.5, help="EOPS_CHANGE_POLL_SECONDS")
    parsed = parser.parse_args()
    outcome = asyncio.run(main(parsed))
    out = HERE / "results" / "replica_wait.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(outcome, indent=2) + "\n")
    print(table(outcome))
