"""The console under load (docs/console.md, issue 17):

1. First load: a gateway whose store holds N invocations (default 10,000, written straight into
   its SQLite file before it starts); a fresh chromium profile (no cache) with the session
   cookie loads /ui and the invocations list. Measured: bytes transferred (bodies and headers
   of every response, the event stream's headers included) and the time from navigation start
   to the list's first rows drawn (`performance.mark("eops:list-ready")`), median of --loads.
   Also the size and time of one list page read from the store (keyset: the same with 10 or
   10,000 rows). The login form's own first load is reported too.
2. Side by side (--streams, default 50; 0 skips it): a paused gateway (accepts are stored, none
   run, so the accept rate is the gateway's alone) takes --seconds (5) of accepts from wrk
   (bench/accept.lua, 32 connections: thousands of accepts, more than the issue's 1,000-burst),
   first with no console open, then with that many event streams open (each read by a curl
   of its own) plus one real browser on the invocations list, --rounds (2) times each in turn. Measured:
   accepts per second, the gateway's CPU per accept, frames every stream received, resyncs.

   With --pin (Linux, 2 or more CPUs) the gateway runs on CPU 0 and everything else (wrk, the
   curls, chromium) on the others, so the browser's own rendering, which a real console does on
   the operator's machine, does not take CPU from the gateway: what is left is the gateway's
   cost of serving the console.

    python bench/console_load.py [--invocations 10000] [--loads 5] [--streams 50] [--seconds 5] [--pin]

Needs wrk and Debian's chromium (apt-get install wrk chromium), and playwright from PyPI (the dev extra).
Prints a Markdown table and writes JSON to bench/results/console_load.json."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the helpers that start a gateway and chromium

from elasticityops.domain.functions import Priority  # noqa: E402
from elasticityops.domain.invocations import State, new_invocation_id  # noqa: E402
from elasticityops.domain.ports import Change, NewInvocation  # noqa: E402
from elasticityops.store.sql import SqlStore  # noqa: E402
from helpers.browser import chromium  # noqa: E402
from helpers.examples import example_json, example_spec  # noqa: E402
from helpers.server import RunningServer, start_server  # noqa: E402
from machine_info import cpu_model  # noqa: E402

RESULTS = HERE / "results"


async def fill(database: Path, count: int) -> None:
    """`count` invocations of `hello` over the last day, most of them ended, as a busy gateway's
    store would hold them."""
    store = await SqlStore.open(f"sqlite:///{database}")
    try:
        spec = example_spec("hello")
        now = datetime.now(UTC)
        await store.put_function(spec, now)
        start = now - timedelta(days=1)
        step = timedelta(days=1) / count
        for chunk in range(0, count, 500):
            news = []
            for n in range(chunk, min(count, chunk + 500)):
                at = start + n * step
                ns = int(at.timestamp() * 1e9)
                news.append(NewInvocation(new_invocation_id(ns), "hello", 1, Priority.normal.rank, at, b"{}"))
            await asyncio.gather(*(store.create_invocation(new) for new in news))
            moves = []
            for new in news[: len(news) - (2 if chunk + 500 >= count else 0)]:
                end = State.succeeded if hash(new.id) % 20 else State.failed
                for to, dt in ((State.pending, 0.02), (State.running, 1.5), (end, 3.0)):
                    moves.append(Change(new.id, to, new.accepted_at + timedelta(seconds=dt), exit_code=0))
            for to in (State.pending, State.running, None):
                await asyncio.gather(
                    *(store.apply(m) for m in moves if (m.to is to if to is not None else m.to.terminal))
                )
    finally:
        await store.close()


def _login_cookie(gw: RunningServer) -> dict[str, Any]:
    answer = httpx.post(gw.url + "/ui/login", json={"token": gw.token}, timeout=30)
    answer.raise_for_status()
    value = answer.cookies["eops_session"]
    return {"name": "eops_session", "value": value, "url": gw.url, "httpOnly": True, "sameSite": "Strict"}


def first_loads(gw: RunningServer, loads: int, work: Path) -> dict[str, Any]:
    cookie = _login_cookie(gw)
    samples: list[dict[str, float]] = []
    for n in range(loads):
        for page_kind in ("login", "list"):
            with chromium(work / f"profile-{n}-{page_kind}") as context:
                if page_kind == "list":
                    context.add_cookies([cookie])  # type: ignore[list-item]
                page = context.new_page()
                sizes: list[int] = []

                def count(request: Any, into: list[int] = sizes) -> None:
                    s = request.sizes()
                    into.append(s["responseBodySize"] + s["responseHeadersSize"])

                page.on("requestfinished", count)
                page.on("response", lambda r, into=sizes: r.url.endswith("/v1/events") and into.append(400))
                page.goto(gw.url + "/ui#/invocations")
                if page_kind == "list":
                    page.wait_for_function("() => performance.getEntriesByName('eops:list-ready').length > 0")
                    ready = page.evaluate("performance.getEntriesByName('eops:list-ready')[0].startTime")
                    rows = page.locator("table.list tbody tr").count()
                else:
                    page.wait_for_selector("#token:focus")
                    ready = page.evaluate("performance.now()")
                    rows = 0
                page.wait_for_timeout(300)  # late requests (the event stream) are counted too
                samples.append({"kind": page_kind, "bytes": sum(sizes), "ms": ready, "rows": rows})
    out: dict[str, Any] = {}
    for kind in ("login", "list"):
        mine = [s for s in samples if s["kind"] == kind]
        out[kind] = {
            "bytes_median": statistics.median(s["bytes"] for s in mine),
            "ms_median": round(statistics.median(s["ms"] for s in mine), 1),
            "ms_max": round(max(s["ms"] for s in mine), 1),
            "rows": mine[0]["rows"],
        }
    with gw.client() as http:
        times = []
        for _ in range(20):
            started = time.perf_counter()
            page_answer = http.get("/v1/invocations", params={"limit": 50})
            times.append((time.perf_counter() - started) * 1000)
        out["list_page"] = {
            "bytes": len(page_answer.content),
            "ms_median": round(statistics.median(times), 2),
        }
    return out


def accept_burst(gw: RunningServer, seconds: float, connections: int) -> dict[str, float]:
    """wrk (bench/accept.lua, as bench/gateway_accept.py) POSTing accepts for `seconds`: the
    rate, and the gateway's CPU per accept (steadier than the rate on a shared machine)."""
    server = psutil.Process(gw.pid)
    before = server.cpu_times()
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{round(seconds)}s",
            "--timeout",
            "10s",
            "-s",
            str(HERE / "accept.lua"),
            gw.url + "/v1/functions/hello/invocations",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "EOPS_TOKEN": gw.token},
        check=True,
    )
    after = server.cpu_times()
    line = next(x for x in done.stdout.splitlines() if x.startswith("WRK_RESULT "))
    result = json.loads(line.removeprefix("WRK_RESULT "))
    ok = result["requests"] - result["non_2xx"]
    cpu = (after.user - before.user) + (after.system - before.system)
    return {
        "accepted": ok,
        "per_s": ok / (result["duration_us"] / 1e6),
        "p99_ms": result["p99_us"] / 1000,
        "cpu_us_per_accept": cpu / max(1, ok) * 1e6,
    }


def _browser_cpu() -> float:
    """CPU seconds chromium's processes (this process's descendants) have used."""
    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name():
                times = proc.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def open_readers(gw: RunningServer, count: int, into: Path) -> list[subprocess.Popen[bytes]]:
    """`count` event streams, each read by a curl of its own into a file: a reader that costs
    the machine next to nothing, so what is measured is the gateway's side."""
    into.mkdir(parents=True, exist_ok=True)
    readers = []
    for n in range(count):
        with (into / f"{n}.sse").open("wb") as out:
            readers.append(
                subprocess.Popen(
                    ["curl", "-sN", "-H", f"Authorization: Bearer {gw.token}", gw.url + "/v1/events"],
                    stdout=out,
                    stderr=subprocess.DEVNULL,
                )
            )
    return readers


def close_readers(readers: list[subprocess.Popen[bytes]], into: Path) -> tuple[list[int], int]:
    """Stop each curl by its PID; (changes frames per stream, resync frames in all)."""
    for reader in readers:
        reader.terminate()
    for reader in readers:
        reader.wait(10)
    texts = [p.read_text() for p in sorted(into.glob("*.sse"))]
    return [t.count("event: changes") for t in texts], sum(t.count("event: resync") for t in texts)


def side_by_side(
    work: Path, streams: int, seconds: float, connections: int, browser: bool, pin: bool, rounds: int = 2
) -> dict[str, Any]:
    everything = os.sched_getaffinity(0)
    if pin:
        os.sched_setaffinity(0, {0})  # the gateway and its threads inherit CPU 0 ...
    gw = start_server(work / "paused", "--paused", env={"EOPS_CONSOLE_MAX_STREAMS": str(streams + 10)})
    if pin:
        os.sched_setaffinity(0, everything - {0})  # ... wrk, curl and chromium get the rest
    try:
        with gw.client() as http:
            http.put("/v1/functions/hello", content=example_json("hello"))
        accept_burst(gw, 2, connections)  # warm up
        rates: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
        frames: list[int] = []
        resyncs = 0
        for _round in range(rounds):
            rates["without"].append(accept_burst(gw, seconds, connections))
            into = work / f"readers-{_round}"
            readers = open_readers(gw, streams, into)
            try:
                with contextlib.ExitStack() as stack:
                    shown = 0
                    if browser:
                        context = stack.enter_context(chromium(work / f"profile-side-{_round}"))
                        context.add_cookies([_login_cookie(gw)])  # type: ignore[list-item]
                        page = context.new_page()
                        page.goto(gw.url + "/ui#/invocations")
                        page.wait_for_function(
                            "() => performance.getEntriesByName('eops:list-ready').length > 0"
                        )
                    time.sleep(1.0)  # the readers' streams are open
                    browser_before = _browser_cpu()
                    rates["with"].append(accept_burst(gw, seconds, connections))
                    rates["with"][-1]["browser_cpu_s"] = _browser_cpu() - browser_before
                    time.sleep(1.0)  # the last frames reach the readers
                    if browser:
                        shown = page.locator("table.list tbody tr").count()
            finally:
                got, lost = close_readers(readers, into)
            frames += got
            resyncs += lost

        def median(side: str, key: str) -> float:
            return round(statistics.median(r[key] for r in rates[side]), 1)

        return {
            "pinned": pin,
            "gateway_cpus": sorted(psutil.Process(gw.pid).cpu_affinity() or []),
            "streams": streams,
            "seconds": seconds,
            "connections": connections,
            "rounds": rates,
            "per_s_without": median("without", "per_s"),
            "per_s_with": median("with", "per_s"),
            "cost_percent": round(100 * (1 - median("with", "per_s") / median("without", "per_s")), 1),
            # Each round's own cost (with against the burst without just before it): the spread.
            "cost_percent_by_round": [
                round(100 * (1 - w["per_s"] / wo["per_s"]), 1)
                for wo, w in zip(rates["without"], rates["with"], strict=True)
            ],
            "cpu_us_without": median("without", "cpu_us_per_accept"),
            "cpu_us_with": median("with", "cpu_us_per_accept"),
            "frames_per_stream_min": min(frames),
            "frames_per_stream_max": max(frames),
            "resyncs": resyncs,
            "browser_rows": shown,
        }
    finally:
        gw.stop()
        os.sched_setaffinity(0, everything)


def missing_prerequisites() -> list[str]:
    """What this bench needs and does not find, each with how to get it."""
    missing = [
        f"{tool} (apt-get install {tool})"
        for tool in ("wrk", "curl", "chromium")
        if shutil.which(tool) is None
    ]
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install -e '.[dev]')")
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--invocations", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each accept burst")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="pairs of bursts (without, then with consoles)")
    parser.add_argument("--no-browser", action="store_true", help="the streams alone, no chromium")
    parser.add_argument(
        "--pin", action="store_true", help="the gateway on CPU 0, wrk, curl and chromium on the other CPUs"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "console_load.json")
    args = parser.parse_args()
    missing = missing_prerequisites()
    if missing:
        sys.exit("console_load needs: " + "; ".join(missing))
    if args.pin and (
        not hasattr(os, "sched_setaffinity")
        or len(os.sched_getaffinity(0)) < 2
        or 0 not in os.sched_getaffinity(0)
    ):
        sys.exit("--pin needs Linux and at least two CPUs this process may use, CPU 0 among them")
    report: dict[str, Any] = {"cpu": cpu_model(), "invocations": args.invocations}
    with tempfile.TemporaryDirectory(prefix="eops-console-bench-") as tmp:
        work = Path(tmp)
        data = work / "data"
        data.mkdir(mode=0o700)
        asyncio.run(fill(data / "eops.db", args.invocations))
        gw = start_server(data)
        try:
            report["first_load"] = first_loads(gw, args.loads, work)
        finally:
            gw.stop()
        if args.streams:
            report["side_by_side"] = side_by_side(
                work, args.streams, args.seconds, args.connections, not args.no_browser, args.pin, args.rounds
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    fl = report["first_load"]
    print(f"Console, {args.invocations} invocations stored ({report['cpu']}):\n")
    print("| load | bytes transferred (median) | interactive, ms (median / max) |")
    print("|---|---|---|")
    for kind in ("login", "list"):
        print(f"| {kind} | {fl[kind]['bytes_median']:.0f} | {fl[kind]['ms_median']} / {fl[kind]['ms_max']} |")
    print(f"\nOne list page (50 rows): {fl['list_page']['bytes']} bytes, {fl['list_page']['ms_median']} ms")
    if "side_by_side" in report:
        s = report["side_by_side"]
        where = f", gateway pinned to CPU {s['gateway_cpus']}" if s["pinned"] else ""
        bursts = f"{s['seconds']:g} s bursts (wrk, {s['connections']} connections)"
        rounds = len(s["rounds"]["with"])
        by_round = s["cost_percent_by_round"]
        print(f"\nAccepts, {bursts}{where}, medians of {rounds} (cost by round, %: {by_round}):\n")
        print("| consoles open | accepted/s | gateway CPU per accept (us) |")
        print("|---|---|---|")
        print(f"| none | {s['per_s_without']} | {s['cpu_us_without']} |")
        with_what = f"{s['streams']} event streams" + (" + 1 browser" if s["browser_rows"] else "")
        print(f"| {with_what} | {s['per_s_with']} | {s['cpu_us_with']} |")
        print(
            f"\nCost {s['cost_percent']}%; frames per stream {s['frames_per_stream_min']}-"
            f"{s['frames_per_stream_max']}, resyncs {s['resyncs']}, rows in the browser {s['browser_rows']}"
        )


if __name__ == "__main__":
    main()
