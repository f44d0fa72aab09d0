"""Accepted invocations per second and accept latency of `eops serve`, next to a bare
FastAPI/uvicorn endpoint that only answers 202, measured with wrk from a separate process.

The gateway runs with the local backend and a no-op function (`true`), with the dispatcher
paused (`--paused`), so what is measured is accepting: auth, validation, a durable insert
(SQLite, WAL, synchronous=FULL, group commit) and the 202. A second gateway ("eops-live") runs
the same way but with its dispatcher admitting and running the no-op function on virtual slots
meanwhile, which is what a user's gateway does. After the runs both are killed with SIGKILL and
their databases are counted: every invocation that got a 202 must be there.

    python bench/gateway_accept.py [--duration 15] [--connections 64] [--rounds 2]

Needs wrk (`apt-get install wrk`). Prints a Markdown table for BENCHMARKS.md and writes JSON to
bench/results/."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from machine_info import machine

HERE = Path(__file__).resolve().parent
EOPS = str(Path(sys.executable).parent / "eops")
PATH = "/v1/functions/noop/invocations"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(url: str, proc: subprocess.Popen[bytes], check: str = "GET") -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args!r} exited with {proc.returncode}")
        try:
            response = httpx.request(check, url, timeout=2)
            if response.status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} not ready in 90 s")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


class Gateway:
    """One `eops serve` with its own data dir, killed with SIGKILL at the end."""

    def __init__(self, proc: subprocess.Popen[bytes], base: str, data: Path, log: Any) -> None:
        self.proc, self.base, self.data, self._log = proc, base, data, log

    @classmethod
    def start(cls, name: str, root: Path, extra: list[str]) -> Gateway:
        root.mkdir(parents=True)
        port = free_port()
        log = (root / "gateway.log").open("wb")
        proc = subprocess.Popen(
            [EOPS, "serve", "--port", str(port), "--data-dir", str(root / "data"), *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        return cls(proc, f"http://127.0.0.1:{port}", root / "data", log)

    def token(self) -> str:
        return (self.data / "admin-token").read_text().strip()

    def kill(self) -> None:
        stop(self.proc, signal.SIGKILL)
        self._log.close()

    def stored(self) -> int:
        with sqlite3.connect(f"file:{self.data / 'eops.db'}?mode=ro", uri=True) as conn:
            count: int = conn.execute("SELECT count(*) FROM invocations").fetchone()[0]
            return count


def wrk(url: str, token: str, args: argparse.Namespace, duration: float, server_pid: int) -> dict[str, Any]:
    server = psutil.Process(server_pid)
    before = server.cpu_times()
    done = subprocess.run(
        [
            "wrk",
            f"-t{args.threads}",
            f"-c{args.connections}",
            f"-d{round(duration)}s",
            "--timeout",
            "10s",
            "-s",
            str(HERE / "accept.lua"),
            url,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "EOPS_TOKEN": token},
        check=True,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("WRK_RESULT "))
    result: dict[str, Any] = json.loads(line.removeprefix("WRK_RESULT "))
    errors = sum(result[k] for k in ("non_2xx", "connect_errors", "read_errors", "write_errors", "timeouts"))
    result["ok"] = result["requests"] - result["non_2xx"]
    result["errors"] = errors
    result["per_s"] = result["ok"] / (result["duration_us"] / 1e6)
    after = server.cpu_times()
    # CPU the server process spent (all threads), per request answered: independent of how
    # much of the machine other work took meanwhile.
    cpu = (after.user - before.user) + (after.system - before.system)
    result["server_cpu_s"] = cpu
    result["server_cpu_us_per_request"] = cpu / max(1, result["requests"]) * 1e6
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per measured run")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (leave the cores to the server)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating bare/eops rounds")
    parser.add_argument("--live-gpus", type=int, default=4, help="virtual slots of the live gateway")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "gateway_accept.json")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk")

    info = machine()
    data_dir = Path(tempfile.mkdtemp(prefix="eops-bench-"))
    bare_port = free_port()
    bare = subprocess.Popen([sys.executable, str(HERE / "bare_app.py"), str(bare_port)])
    # Two gateways: "eops" with the dispatcher paused (accepting alone), "eops-live" with the
    # dispatcher admitting and running the no-op function on virtual slots meanwhile.
    gateways: dict[str, Gateway] = {}
    runs: list[dict[str, Any]] = []
    answered: dict[str, int] = {}
    accepted_counter: dict[str, int] = {}

    def prepare(target: str, extra: list[str]) -> tuple[str, str, str, int]:
        gw = gateways[target] = Gateway.start(target, data_dir / target, extra)
        wait_ready(f"{gw.base}/readyz", gw.proc)
        token = gw.token()
        put = httpx.put(
            f"{gw.base}/v1/functions/noop",
            json={"command": ["true"]},
            headers={"Authorization": f"Bearer {token}"},
        )
        put.raise_for_status()
        answered[target] = 0
        return target, gw.base + PATH, token, gw.proc.pid

    def measure(targets: list[tuple[str, str, str, int]]) -> None:
        for target, url, tok, pid in targets:
            warm = wrk(url, tok, args, 3, pid)  # warm-up, not reported
            if target in answered:
                answered[target] += warm["ok"]
        for round_no in range(1, args.rounds + 1):
            for target, url, tok, pid in targets:
                result = wrk(url, tok, args, args.duration, pid)
                result.update(target=target, round=round_no)
                runs.append(result)
                if target in answered:
                    answered[target] += result["ok"]
                print(
                    f"round {round_no} {target}: {result['per_s']:.0f}/s "
                    f"p50 {result['p50_us'] / 1000:.1f} ms p99 {result['p99_us'] / 1000:.1f} ms "
                    f"errors {result['errors']} "
                    f"server CPU {result['server_cpu_us_per_request']:.0f} us/request",
                    flush=True,
                )

    try:
        bare_url = f"http://127.0.0.1:{bare_port}{PATH}"
        wait_ready(bare_url, bare, "POST")
        # Bare and the paused gateway alternate; the live gateway comes after, alone, because
        # its dispatcher keeps working through the backlog and would load the others' runs.
        measure([("bare", bare_url, "", bare.pid), prepare("eops", ["--paused"])])
        stop(bare)
        measure([prepare("eops-live", ["--gpus", str(args.live_gpus)])])
        for target, gw in gateways.items():
            metrics = httpx.get(f"{gw.base}/metrics").text
            counted = re.search(r"^eops_invocations_accepted_total ([0-9.e+]+)$", metrics, re.M)
            accepted_counter[target] = int(float(counted.group(1))) if counted else -1
    finally:
        stop(bare)
        for gw in gateways.values():
            gw.kill()  # SIGKILL right after the load: nothing gets flushed
    stored = {target: gw.stored() for target, gw in gateways.items()}

    def summary(target: str) -> dict[str, float]:
        chosen = [r for r in runs if r["target"] == target]
        return {
            "per_s": sum(r["per_s"] for r in chosen) / len(chosen),
            "p50_ms": sum(r["p50_us"] for r in chosen) / len(chosen) / 1000,
            "p99_ms": max(r["p99_us"] for r in chosen) / 1000,
            "errors": sum(r["errors"] for r in chosen),
            "cpu_us": sum(r["server_cpu_us_per_request"] for r in chosen) / len(chosen),
        }

    summaries = {target: summary(target) for target in ("bare", *gateways)}
    bare_s, eops_s = summaries["bare"], summaries["eops"]
    ratio = eops_s["per_s"] / bare_s["per_s"]
    # wrk counts only answers that arrived before its clock stopped; requests still in flight then
    # are stored too (at most one per connection per run), so stored >= answered.
    in_flight_bound = args.connections * (args.rounds + 1)
    durable = {
        target: accepted_counter[target] == stored[target]
        and answered[target] <= stored[target] <= answered[target] + in_flight_bound
        for target in gateways
    }
    report = {
        "machine": info,
        "settings": vars(args) | {"out": str(args.out)},
        "runs": runs,
        "summaries": summaries,
        "ratio": ratio,
        "live_ratio": summaries["eops-live"]["per_s"] / bare_s["per_s"],
        "answered_2xx": answered,
        "accepted_counter": accepted_counter,
        "stored_after_sigkill": stored,
        "durable": durable,
        "goal_met": eops_s["per_s"] >= 3000
        and eops_s["p99_ms"] < 50
        and ratio >= 0.4
        and all(durable.values()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    shutil.rmtree(data_dir, ignore_errors=True)
    print()
    print(
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory_gib']} GiB, "
        f"load before {info['loadavg_before']}"
    )
    print(
        f"wrk -t{args.threads} -c{args.connections}, {args.rounds} x {args.duration:.0f} s per target, "
        "alternating"
    )
    print()
    print("| target | accepted/s | p50 ms | p99 ms (worst run) | errors | server CPU per request |")
    print("|---|---:|---:|---:|---:|---:|")
    labels = {
        "bare": "bare FastAPI 202",
        "eops": "eops serve (SQLite, paused dispatcher)",
        "eops-live": f"eops serve (SQLite, dispatcher running noop on {args.live_gpus} slots)",
    }
    for target, s in summaries.items():
        print(
            f"| {labels[target]} | {s['per_s']:.0f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} "
            f"| {s['errors']:.0f} | {s['cpu_us']:.0f} us |"
        )
    print()
    for target in gateways:
        print(
            f"{target}: {summaries[target]['per_s'] / bare_s['per_s']:.0%} of bare; answered 2xx "
            f"{answered[target]}; accepted counter {accepted_counter[target]}; rows after SIGKILL "
            f"{stored[target]}; durable: {durable[target]}"
        )
    print(f"goal met (paused dispatcher): {report['goal_met']}")


if __name__ == "__main__":
    main()
