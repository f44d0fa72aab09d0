"""One list page of invocations whose results are large: what the store reads, and what a real
gateway answers (issue 37).

A SQLite store in a temp data dir gets N invocations, each succeeded with a result of SIZE bytes
(a JSON string), written through the store's own calls. Then, R times each, in turns:

    store      SqlStore.list_invocations(limit=N): the list query alone, in this process
    http       GET /v1/invocations?limit=N on a real `eops serve` (paused) on that data dir

and the bytes of the HTTP answer. Run it on two checkouts (PYTHONPATH=CHECKOUT/src) to compare a
list query that reads whole results with one that reads only what the summary needs.

    python bench/list_page.py [--count 60] [--size 1048576] [--runs 20] [--json OUT]

Needs the `eops` entry point beside this Python; prints a Markdown row for BENCHMARKS.md."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from machine_info import machine

EOPS = Path(sys.executable).parent / "eops"
_BANNER = re.compile(r"ElasticityOps gateway on (http://\S+) ")
_TOKEN = re.compile(r"EOPS_TOKEN=(\S+)")


async def seed(data_dir: Path, count: int, size: int) -> None:
    """`count` succeeded invocations with a result of `size` bytes each."""
    from elasticityops.domain.functions import Priority
    from elasticityops.domain.invocations import State, new_invocation_id
    from elasticityops.domain.ports import Change, NewInvocation
    from elasticityops.store.sql import SqlStore

    store = await SqlStore.open(f"sqlite:///{data_dir / 'eops.db'}")
    result = json.dumps("r" * (size - 2)).encode()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    try:
        for n in range(count):
            new = NewInvocation(new_invocation_id(), "echo", 1, Priority.normal.rank, at, b"{}")
            await store.create_invocation(new)
            await store.apply(Change(new.id, State.pending, at))
            await store.apply(Change(new.id, State.running, at))
            await store.set_result(new.id, result)
            await store.apply(Change(new.id, State.succeeded, at + timedelta(seconds=n + 1), exit_code=0))
    finally:
        await store.close()


async def time_store(data_dir: Path, count: int) -> float:
    from elasticityops.store.sql import SqlStore

    store = await SqlStore.open(f"sqlite:///{data_dir / 'eops.db'}")
    try:
        started = time.perf_counter()
        page = await store.list_invocations(function=None, state=None, limit=count, cursor=None)
        elapsed = time.perf_counter() - started
        assert len(page.items) == count
        return elapsed
    finally:
        await store.close()


def start_gateway(data_dir: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    log = data_dir / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOPS_")}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(EOPS),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--data-dir",
                str(data_dir),
                "--paused",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        url, token = _BANNER.search(text), _TOKEN.search(text)
        if url and token:
            try:
                if httpx.get(url[1] + "/readyz", timeout=2).status_code == 200:
                    return process, url[1], token[1]
            except httpx.TransportError:
                pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"eops serve did not start:\n{log.read_text(errors='replace')}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=60, help="invocations, and the page size")
    parser.add_argument("--size", type=int, default=1024 * 1024, help="bytes of each result")
    parser.add_argument("--runs", type=int, default=20, help="timed list pages of each kind")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if not os.access(EOPS, os.X_OK):
        raise SystemExit(f"no `eops` entry point at {EOPS}: run this with the project's virtualenv Python")
    with tempfile.TemporaryDirectory(prefix="eops-list-page-") as tmp:
        data_dir = Path(tmp)
        asyncio.run(seed(data_dir, args.count, args.size))
        store_s: list[float] = []
        http_s: list[float] = []
        answer_bytes = 0
        process, url, token = start_gateway(data_dir)
        try:
            with httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as http:
                for _ in range(args.runs):
                    store_s.append(asyncio.run(time_store(data_dir, args.count)))
                    started = time.perf_counter()
                    answer = http.get("/v1/invocations", params={"limit": args.count})
                    http_s.append(time.perf_counter() - started)
                    answer.raise_for_status()
                    answer_bytes = len(answer.content)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
    figures = {
        "count": args.count,
        "size": args.size,
        "runs": args.runs,
        "store_median_ms": round(statistics.median(store_s) * 1000, 2),
        "store_max_ms": round(max(store_s) * 1000, 2),
        "http_median_ms": round(statistics.median(http_s) * 1000, 2),
        "http_max_ms": round(max(http_s) * 1000, 2),
        "answer_bytes": answer_bytes,
        "machine": machine(),
    }
    print(
        f"| {args.count} x {args.size} B | {figures['store_median_ms']} / {figures['store_max_ms']} | "
        f"{figures['http_median_ms']} / {figures['http_max_ms']} | {answer_bytes:,} |"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
