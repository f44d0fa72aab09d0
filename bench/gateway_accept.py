"""Accepted invocations per second and accept latency of `eops serve`, next to a bare
FastAPI/uvicorn endpoint that only answers 202, measured with wrk from a separate process.

The gateway runs with the local backend and a no-op function (`true`), with the dispatcher
paused (`--paused`), so what is measured is accepting: auth, validation, a durable insert
(SQLite, WAL, synchronous=FULL, group commit) and the 202. After the runs the gateway is killed
with SIGKILL and the database is counted: every invocation that got a 202 must be there.

    python bench/gateway_accept.py [--duration 15] [--connections 64] [--rounds 2]

Needs wrk (`apt-get install wrk`). Prints a Markdown table for BENCHMARKS.md and writes JSON to
bench/results/."""

from __future__ import annotations

import argparse
import json
import os
import platform
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

HERE = Path(__file__).resolve().parent
EOPS = str(Path(sys.executable).parent / "eops")
PATH = "/v1/functions/noop/invocations"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.+)", cpuinfo)
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    mem = re.search(r"MemTotal:\s*(\d+) kB", meminfo)
    return {
        "nproc": os.cpu_count(),
        "cpu": model.group(1).strip() if model else platform.processor(),
        "memory_gib": round(int(mem.group(1)) / 1024 / 1024, 1) if mem else None,
        "loadavg_before": os.getloadavg(),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def wait_ready(url: str, proc: subprocess.Popen[bytes], check: str = "GET") -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{proc.args} exited with {proc.returncode}")
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
    parser.add_argument("--out", type=Path, default=HERE / "results" / "gateway_accept.json")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk")

    info = machine()
    data_dir = Path(tempfile.mkdtemp(prefix="eops-bench-"))
    bare_port, eops_port = free_port(), free_port()
    bare = subprocess.Popen([sys.executable, str(HERE / "bare_app.py"), str(bare_port)])
    log = (data_dir / "gateway.log").open("wb")
    gateway = subprocess.Popen(
        [EOPS, "serve", "--port", str(eops_port), "--data-dir", str(data_dir / "data"), "--paused"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    runs: list[dict[str, Any]] = []
    try:
        bare_url = f"http://127.0.0.1:{bare_port}{PATH}"
        eops_base = f"http://127.0.0.1:{eops_port}"
        wait_ready(bare_url, bare, "POST")
        wait_ready(f"{eops_base}/readyz", gateway)
        token = (data_dir / "data" / "admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        put = httpx.put(f"{eops_base}/v1/functions/noop", json={"command": ["true"]}, headers=headers)
        put.raise_for_status()
        eops_ok = 0
        pids = {"bare": bare.pid, "eops": gateway.pid}
        for target, url, tok in (("bare", bare_url, ""), ("eops", eops_base + PATH, token)):
            warm = wrk(url, tok, args, 3, pids[target])  # warm-up, not reported
            if target == "eops":
                eops_ok += warm["ok"]
        for round_no in range(1, args.rounds + 1):
            for target, url, tok in (("bare", bare_url, ""), ("eops", eops_base + PATH, token)):
                result = wrk(url, tok, args, args.duration, pids[target])
                result.update(target=target, round=round_no)
                runs.append(result)
                if target == "eops":
                    eops_ok += result["ok"]
                print(
                    f"round {round_no} {target}: {result['per_s']:.0f}/s "
                    f"p50 {result['p50_us'] / 1000:.1f} ms p99 {result['p99_us'] / 1000:.1f} ms "
                    f"errors {result['errors']} "
                    f"server CPU {result['server_cpu_us_per_request']:.0f} us/request",
                    flush=True,
                )
        metrics = httpx.get(f"{eops_base}/metrics").text
        counted = re.search(r"^eops_invocations_accepted_total ([0-9.e+]+)$", metrics, re.M)
        accepted_counter = int(float(counted.group(1))) if counted else -1
    finally:
        stop(bare)
        stop(gateway, signal.SIGKILL)  # a crash right after the load: nothing gets flushed
        log.close()
    with sqlite3.connect(f"file:{data_dir / 'data' / 'eops.db'}?mode=ro", uri=True) as conn:
        stored = conn.execute("SELECT count(*) FROM invocations").fetchone()[0]

    def summary(target: str) -> dict[str, float]:
        chosen = [r for r in runs if r["target"] == target]
        return {
            "per_s": sum(r["per_s"] for r in chosen) / len(chosen),
            "p50_ms": sum(r["p50_us"] for r in chosen) / len(chosen) / 1000,
            "p99_ms": max(r["p99_us"] for r in chosen) / 1000,
            "errors": sum(r["errors"] for r in chosen),
            "cpu_us": sum(r["server_cpu_us_per_request"] for r in chosen) / len(chosen),
        }

    bare_s, eops_s = summary("bare"), summary("eops")
    ratio = eops_s["per_s"] / bare_s["per_s"]
    # wrk counts only answers that arrived before its clock stopped; requests still in flight then
    # are stored too (at most one per connection per run), so stored >= answered.
    in_flight_bound = args.connections * (args.rounds + 1)
    durable = accepted_counter == stored and eops_ok <= stored <= eops_ok + in_flight_bound
    report = {
        "machine": info,
        "settings": vars(args) | {"out": str(args.out)},
        "runs": runs,
        "bare": bare_s,
        "eops": eops_s,
        "ratio": ratio,
        "answered_2xx": eops_ok,
        "accepted_counter": accepted_counter,
        "stored_after_sigkill": stored,
        "durable": durable,
        "goal_met": eops_s["per_s"] >= 3000 and eops_s["p99_ms"] < 50 and ratio >= 0.4 and durable,
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
    for name, s in (("bare FastAPI 202", bare_s), ("eops serve (SQLite, paused dispatcher)", eops_s)):
        print(
            f"| {name} | {s['per_s']:.0f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} | {s['errors']:.0f} "
            f"| {s['cpu_us']:.0f} us |"
        )
    print()
    print(
        f"eops / bare: {ratio:.0%}; answered 202: {eops_ok}; accepted counter: {accepted_counter}; "
        f"rows after SIGKILL: {stored}; durable: {durable}; goal met: {report['goal_met']}"
    )


if __name__ == "__main__":
    main()
