"""Batches beside single POSTs, from the same client in the same run, against a real `eops serve`:
invocations accepted per second and the gateway's CPU per accepted invocation. Then `map` over
many inputs on the local backend, beside the time the jobs themselves need.

Part 1, accepting: a gateway with the dispatcher paused (`--paused`: what is measured is
accepting: auth, validation, a durable insert in SQLite WAL with synchronous=FULL, the 202).
The same asyncio httpx client sends N single POSTs (`--connections` at once), then the same N
inputs as N/B batches of B (`--batch-concurrency` at once), alternating for `--rounds`. Goal:
the batch path accepts at least 5x as many per second.

Part 2, map: a second gateway running `sleep JOB_SECONDS` jobs on `--slots` virtual GPU slots;
`Client.map` over `--map-inputs` inputs. The jobs themselves need at least
ceil(inputs / slots) x JOB_SECONDS (the slots all busy from the first job's start to the last
one's end); the report gives map's wall time beside that and beside the span the jobs took
(first started to last finished). Goal: map's time within 10% of the jobs' own.

    python bench/batch_accept.py [--inputs 10000] [--batch 1000] [--map-inputs 1000]

Writes JSON to bench/results/batch_accept.json and prints a Markdown table."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil

from elasticityops.client import Client
from machine_info import machine

HERE = Path(__file__).resolve().parent
EOPS = str(Path(sys.executable).parent / "eops")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Gateway:
    """One `eops serve` on a data dir of its own, stopped by PID at the end."""

    def __init__(self, root: Path, extra: list[str], env: dict[str, str] | None = None) -> None:
        root.mkdir(parents=True)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.data = root / "data"
        self._log = (root / "gateway.log").open("wb")
        self.proc = subprocess.Popen(
            [EOPS, "serve", "--port", str(self.port), "--data-dir", str(self.data), *extra],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"eops serve exited with {self.proc.returncode}; see {root / 'gateway.log'}")
            try:
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("eops serve not ready in 90 s")
            time.sleep(0.2)
        self.token = (self.data / "admin-token").read_text().strip()
        self.headers = {"Authorization": f"Bearer {self.token}"}
        self.process = psutil.Process(self.proc.pid)

    def deploy(self, name: str, command: list[str]) -> None:
        httpx.put(
            f"{self.base}/v1/functions/{name}", json={"command": command}, headers=self.headers
        ).raise_for_status()

    def cpu_s(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._log.close()


async def singles(http: httpx.AsyncClient, n: int, connections: int) -> int:
    """N single POSTs, `connections` at a time; the invocations accepted (202s)."""
    left = iter(range(n))
    accepted = 0

    async def worker() -> None:
        nonlocal accepted
        for i in left:
            try:
                response = await http.post("/v1/functions/noop/invocations", json={"i": i})
            except httpx.HTTPError as exc:
                print(f"single {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            accepted += response.status_code == 202

    await asyncio.gather(*(worker() for _ in range(connections)))
    return accepted


async def batches(http: httpx.AsyncClient, n: int, size: int, concurrency: int) -> int:
    """The same N inputs as batches of `size`, `concurrency` at a time; invocations accepted."""
    left = iter(range(0, n, size))
    accepted = 0

    async def worker() -> None:
        nonlocal accepted
        for start in left:
            inputs = [{"i": i} for i in range(start, min(n, start + size))]
            try:
                response = await http.post("/v1/functions/noop/invocations:batch", json={"inputs": inputs})
            except httpx.HTTPError as exc:
                print(f"batch at {start}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            if response.status_code == 202:
                accepted += len(response.json()["invocation_ids"])

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return accepted


def measure(gw: Gateway, how: str, args: argparse.Namespace) -> dict[str, Any]:
    async def run() -> int:
        limits = httpx.Limits(max_connections=max(args.connections, args.batch_concurrency))
        async with httpx.AsyncClient(
            base_url=gw.base, headers=gw.headers, timeout=120, limits=limits
        ) as http:
            if how == "single":
                return await singles(http, args.inputs, args.connections)
            return await batches(http, args.inputs, args.batch, args.batch_concurrency)

    cpu_before, began = gw.cpu_s(), time.perf_counter()
    accepted = asyncio.run(run())
    seconds = time.perf_counter() - began
    cpu = gw.cpu_s() - cpu_before
    return {
        "how": how,
        "accepted": accepted,
        "seconds": seconds,
        "per_s": accepted / seconds,
        "server_cpu_s": cpu,
        "server_cpu_us_per_invocation": cpu / max(1, accepted) * 1e6,
    }


def accept_part(root: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    # The batch size by its variable, not a flag: the same run works against a gateway that has
    # no batch route (its single POSTs alone: a baseline of the same client on the same machine).
    gw = Gateway(root / "accept", ["--paused"], {"EOPS_MAX_BATCH_INPUTS": str(max(args.batch, 1000))})
    try:
        gw.deploy("noop", ["true"])
        measure(gw, "single", argparse.Namespace(**{**vars(args), "inputs": 500}))  # warm-up
        runs = []
        for round_no in range(1, args.rounds + 1):
            for how in ("single", "batch"):
                result = measure(gw, how, args) | {"round": round_no}
                runs.append(result)
                print(
                    f"round {round_no} {how}: {result['per_s']:.0f} accepted/s, server CPU "
                    f"{result['server_cpu_us_per_invocation']:.0f} us per invocation",
                    flush=True,
                )
        return runs
    finally:
        gw.stop()


def map_part(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    gw = Gateway(root / "map", ["--gpus", str(args.slots)])
    try:
        gw.deploy("nap", ["sleep", str(args.job_seconds)])
        with Client(gw.base, gw.token) as client:
            began = time.perf_counter()
            results = client.map(
                "nap", [{"i": i} for i in range(args.map_inputs)], max_in_flight=args.map_inputs
            )
            wall = time.perf_counter() - began
            items = list(client.iter_invocations(function="nap", page_size=500))
        assert len(results) == args.map_inputs
        starts = [_at(i.timeline.started) for i in items]
        ends = [_at(i.timeline.finished) for i in items]
        runs = [i.durations.get("run") or 0.0 for i in items]
        ideal = math.ceil(args.map_inputs / args.slots) * args.job_seconds
        span = max(ends) - min(starts)
        return {
            "inputs": args.map_inputs,
            "slots": args.slots,
            "job_seconds": args.job_seconds,
            "map_wall_s": wall,
            "jobs_ideal_s": ideal,
            "jobs_span_s": span,
            "mean_run_s": sum(runs) / len(runs),
            "map_over_ideal": wall / ideal,
            "map_over_span": wall / span,
        }
    finally:
        gw.stop()


def _at(value: datetime | None) -> float:
    assert value is not None
    return value.timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--inputs", type=int, default=10_000, help="invocations per way of sending them (0: skip that part)"
    )
    parser.add_argument("--batch", type=int, default=1000, help="inputs per batch")
    parser.add_argument("--connections", type=int, default=32, help="single POSTs in flight at once")
    parser.add_argument("--batch-concurrency", type=int, default=2, help="batches in flight at once")
    parser.add_argument("--rounds", type=int, default=2, help="alternating single/batch rounds")
    parser.add_argument("--map-inputs", type=int, default=1000, help="inputs of the map run (0: skip it)")
    parser.add_argument("--slots", type=int, default=32, help="virtual GPU slots of the map gateway")
    parser.add_argument("--job-seconds", type=float, default=1.0, help="how long each map job sleeps")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "batch_accept.json")
    args = parser.parse_args()
    info = machine()
    root = Path(tempfile.mkdtemp(prefix="eops-batch-bench-"))
    runs = accept_part(root, args) if args.inputs else []
    mapped = map_part(root, args) if args.map_inputs else None

    def mean(how: str, key: str) -> float:
        chosen = [r[key] for r in runs if r["how"] == how]
        return sum(chosen) / len(chosen) if chosen else float("nan")

    single, batch = mean("single", "per_s"), mean("batch", "per_s")
    report = {
        "machine": info,
        "settings": vars(args) | {"out": str(args.out)},
        "runs": runs,
        "single_per_s": single,
        "batch_per_s": batch,
        "ratio": batch / single if single else float("nan"),
        "single_cpu_us": mean("single", "server_cpu_us_per_invocation"),
        "batch_cpu_us": mean("batch", "server_cpu_us_per_invocation"),
        "map": mapped,
        "goal_met": batch >= 5 * single and (mapped is None or mapped["map_over_ideal"] <= 1.10),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print()
    print(
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory_gib']} GiB, "
        f"load before {info['loadavg_before']}"
    )
    print(f"{args.inputs} invocations each way, {args.rounds} rounds, one asyncio httpx client")
    print()
    print("| how | accepted/s | gateway CPU per accepted invocation |")
    print("|---|---:|---:|")
    print(f"| single POSTs ({args.connections} at once) | {single:.0f} | {report['single_cpu_us']:.0f} us |")
    print(
        f"| batches of {args.batch} ({args.batch_concurrency} at once) | {batch:.0f} "
        f"| {report['batch_cpu_us']:.0f} us |"
    )
    print(f"\nbatch / single: {report['ratio']:.1f}x (goal 5x)")
    if mapped is not None:
        print(
            f"map over {mapped['inputs']} inputs ({mapped['job_seconds']:g} s jobs on "
            f"{mapped['slots']} slots): "
            f"{mapped['map_wall_s']:.1f} s; the jobs need {mapped['jobs_ideal_s']:.1f} s "
            f"({mapped['map_over_ideal']:.2f}x, goal 1.10x); their span {mapped['jobs_span_s']:.1f} s "
            f"({mapped['map_over_span']:.2f}x); mean run {mapped['mean_run_s']:.3f} s"
        )
    print(f"goal met: {report['goal_met']}")


if __name__ == "__main__":
    main()
