"""How long `eops` takes to start, beside bare Python, measured side by side in one run.

Four commands, each run N times as a user types them (a new process each time, stdout and stderr
captured), in turns so that a change of load on the machine touches all four alike:

    python -c pass          the floor: what any Python program pays to start
    eops --help             the CLI's start-up alone (no network)
    eops fn ls              a client command: one GET to the gateway
    eops status ID          a client command: one GET of an invocation

`eops fn ls` and `eops status ID` talk to a real `eops serve` this bench starts on 127.0.0.1 (a
temp data dir, the examples deployed, the dispatcher paused so ID stays queued) and stops by its
PID. Goal (issue 38): the median of `eops --help` within 0.3 s of the median of `python -c pass`.

    python bench/cli_startup.py [--runs 20] [--json bench/results/cli_startup.json]

Needs the `eops` entry point beside this Python (`pip install -e .` in the project's virtualenv);
run from the checkout (the examples are deployed from examples/). Prints a Markdown table for
BENCHMARKS.md and writes JSON."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine_info import machine

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EOPS = Path(sys.executable).parent / "eops"
GOAL_S = 0.3
# The examples (noop among them) deployed, and nothing admitted: the invocation stays queued.
FLAGS = ("--example", "--paused")
_BANNER = re.compile(r"ElasticityOps gateway on (http://\S+) ")
_TOKEN = re.compile(r"EOPS_TOKEN=(\S+)")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def check_prerequisites() -> None:
    if not os.access(EOPS, os.X_OK):
        raise SystemExit(
            f"no `eops` entry point at {EOPS}: install the project into this Python's virtualenv "
            "(`pip install -e .` in the checkout) and run this with that Python"
        )
    if not (REPO / "examples" / "noop.yaml").is_file():
        raise SystemExit(f"{REPO / 'examples'} has no noop.yaml: run this from the project's checkout")


class Gateway:
    """`eops serve` on 127.0.0.1 with a temp data dir; ready once its banner names the URL and
    token; stopped by its PID."""

    def __init__(self, data_dir: Path) -> None:
        self.log_path = data_dir / "serve.log"
        where = ["--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir / "data")]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [EOPS, "serve", *where, *FLAGS],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO,
                env=clean_env(),
            )
        self.url, self.token = self._await_banner()

    def _await_banner(self) -> tuple[str, str]:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            text = self.log_path.read_text(errors="replace")
            url, token = _BANNER.search(text), _TOKEN.search(text)
            if url and token:
                return url.group(1), token.group(1)
            if self.proc.poll() is not None:
                raise SystemExit(f"eops serve exited with {self.proc.returncode}:\n{text[-3000:]}")
            time.sleep(0.1)
        self.stop()
        raise SystemExit("eops serve printed no banner in 90 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(20)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """No inherited EOPS_* settings and no terminal width: what a fresh shell in a pipe sees."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOPS_") and k != "COLUMNS"}
    return {**env, **(extra or {})}


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, cwd=REPO, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command!r} exited with {done.returncode}:\n{done.stderr.decode()[-3000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "cli_startup.json", help="JSON out")
    args = parser.parse_args()
    check_prerequisites()

    info = machine()
    with tempfile.TemporaryDirectory(prefix="eops-cli-startup-") as tmp:
        gateway = Gateway(Path(tmp))
        try:
            env = clean_env({"EOPS_URL": gateway.url, "EOPS_TOKEN": gateway.token})
            invoked = subprocess.run(
                [EOPS, "invoke", "noop"], capture_output=True, text=True, env=env, check=True
            )
            inv_id = invoked.stdout.strip()
            commands = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "eops --help": [str(EOPS), "--help"],
                "eops fn ls": [str(EOPS), "fn", "ls"],
                "eops status ID": [str(EOPS), "status", inv_id],
            }
            for command in commands.values():  # warm the page cache and .pyc files; not counted
                timed(command, env)
            times: dict[str, list[float]] = {name: [] for name in commands}
            names = list(commands)
            for k in range(args.runs):
                # A different order each round: no command always follows the same one.
                for name in names[k % len(names) :] + names[: k % len(names)]:
                    times[name].append(timed(commands[name], env))
        finally:
            gateway.stop()

    summary = {
        name: {
            "median_s": statistics.median(values),
            "p90_s": percentile(values, 0.9),
            "min_s": min(values),
        }
        for name, values in times.items()
    }
    over = summary["eops --help"]["median_s"] - summary["python -c pass"]["median_s"]
    report = {
        "machine": info,
        "loadavg_after": os.getloadavg(),
        "runs": args.runs,
        "times_s": times,
        "summary": summary,
        "help_over_python_s": over,
        "goal_met": over <= GOAL_S,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))

    print(
        f"Machine: nproc {info['nproc']}, {info['cpu']}, {info['memory_gib']} GiB, Python "
        f"{info['python']}; load {info['loadavg_before'][0]:.1f} before, "
        f"{report['loadavg_after'][0]:.1f} after; {args.runs} runs each, in turns"
    )
    print()
    print("| command | median | p90 | best |")
    print("|---|---:|---:|---:|")
    for name, s in summary.items():
        print(f"| `{name}` | {s['median_s']:.3f} s | {s['p90_s']:.3f} s | {s['min_s']:.3f} s |")
    print()
    print(f"eops --help over python -c pass (medians): {over:.3f} s; goal <= {GOAL_S} s: {over <= GOAL_S}")


if __name__ == "__main__":
    main()
