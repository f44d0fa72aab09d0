"""Hostile functions against a real `eops serve` over HTTP: each job attacks the gateway that
runs it (tests/jobs/hostile.py), and while it does, /healthz must answer within a second.

The gateway runs with a canary secret in its environment (a job must never see it, nor get it
back as a result) and a 1 MiB log cap."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.server import REPO, RunningServer, running_server

HOSTILE = str(REPO / "tests" / "jobs" / "hostile.py")
CANARY = "canary-" + uuid.uuid4().hex
LOG_CAP = 1024 * 1024
RESULT_LIMIT = 1024 * 1024  # the local backend's max_result_bytes
HEALTHZ_BUDGET_S = 1.0
BLOCKED_S = 5.0  # a probe this slow means the event loop was held, whatever else ran
# The median is a verdict from this many probes on: a short job gets 3, whose median is one probe
# (1.23 s of 0.77, 1.23, 1.49 failed a fresh-clone rehearsal under the cluster half's load, no
# probe timing out, so no step of any took 1 s)
MEDIAN_PROBES = 5


@pytest.fixture(scope="module")
def hostile_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    env = {"HOSTILE_TEST_SECRET": CANARY, "EOPS_MAX_LOG_BYTES": str(LOG_CAP)}
    with running_server(tmp_path_factory.mktemp("hostile"), "--gpus", "4", env=env) as gw:
        yield gw


class Healthz:
    """Polls /healthz (a fresh connection each time, 1 s timeout) in a thread while a job runs."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                response = httpx.get(self.url + "/healthz", timeout=HEALTHZ_BUDGET_S)
                if response.status_code != 200:
                    self.failures.append(f"status {response.status_code}")
            except httpx.HTTPError as exc:
                self.failures.append(f"{type(exc).__name__} after {time.monotonic() - began:.2f}s")
            self.latencies.append(time.monotonic() - began)
            self._stop.wait(0.1)

    def __enter__(self) -> Healthz:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def check(self) -> None:
        """Not blocked: no probe failed (each waits HEALTHZ_BUDGET_S for each step: a blocked event
        loop fails it, as the FIFO did), most answered within the budget, and none took
        BLOCKED_S. One probe's time alone is no verdict: it counts this test's own process too,
        which the suite's other half (the cluster tests beside it, at a higher CPU priority) can
        hold off a core for over a second (1.58 s seen once, on a job the gateway never blocked
        for)."""
        assert self.latencies, "no /healthz probe ran"
        ordered = sorted(self.latencies)
        worst, middle = ordered[-1], ordered[len(ordered) // 2]
        print(f"/healthz: {len(ordered)} probes, median {middle * 1000:.0f} ms, worst {worst * 1000:.0f} ms")
        assert not self.failures, f"/healthz failed while the job ran: {self.failures[:5]}"
        if len(ordered) >= MEDIAN_PROBES:  # fewer, and the median is one probe's time again
            assert middle < HEALTHZ_BUDGET_S, ordered
        assert worst < BLOCKED_S, ordered


def run_hostile(
    gw: RunningServer, payload: dict[str, Any], within_s: float = 60.0, **spec: Any
) -> tuple[dict[str, Any], Healthz]:
    """Deploy the hostile job, invoke it with `payload`, and follow it to its end while probing
    /healthz. Returns the ended invocation and the probe."""
    name = "hostile-" + uuid.uuid4().hex[:8]
    with gw.client(timeout=10) as client, Healthz(gw.url) as health:
        put = client.put(f"/v1/functions/{name}", json={"command": ["python", HOSTILE], **spec})
        assert put.status_code == 201, put.text
        accepted = client.post(f"/v1/functions/{name}/invocations", json=payload)
        assert accepted.status_code == 202, accepted.text
        inv_id = accepted.json()["id"]
        deadline = time.monotonic() + within_s
        body: dict[str, Any] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TimeoutException):
                body = client.get(f"/v1/invocations/{inv_id}").json()
                if body["state"] in ("succeeded", "failed", "timed_out", "cancelled"):
                    break
            time.sleep(0.1)
        else:
            pytest.fail(f"{inv_id} did not end within {within_s}s: {body}")
        time.sleep(1.0)  # and a second more: the gateway reads the result after the end
    return body, health


def run_dir(gw: RunningServer, inv_id: str) -> Path:
    return gw.data_dir / "runs" / inv_id


def unblock_fifos(gw: RunningServer) -> None:
    """Write into any FIFO left at a result path, so that a gateway blocked on one goes on."""
    for result in (gw.data_dir / "runs").glob("*/result"):
        if stat.S_ISFIFO(result.lstat().st_mode):
            with contextlib.suppress(OSError):
                fd = os.open(result, os.O_WRONLY | os.O_NONBLOCK)
                os.write(fd, b"unblocked")
                os.close(fd)


def test_a_fifo_at_the_result_path_hangs_nothing(hostile_gateway: RunningServer) -> None:
    try:
        body, health = run_hostile(hostile_gateway, {"do": "fifo"}, within_s=20)
    finally:
        unblock_fifos(hostile_gateway)
    health.check()
    assert body["state"] == "succeeded", body
    assert body["result"] is None
    assert "FIFO" in body["message"], body["message"]


@pytest.mark.parametrize("target", ["/proc/self/environ", "outside", "/dev/zero"])
def test_a_symlinked_result_is_not_followed(hostile_gateway: RunningServer, target: str) -> None:
    if target == "outside":
        outside = hostile_gateway.data_dir / "outside-the-run-dir.txt"
        outside.write_text(f"a file outside the run dir: {CANARY}")
        target = str(outside)
    body, health = run_hostile(hostile_gateway, {"do": "link", "target": target}, within_s=30)
    health.check()
    assert body["state"] == "succeeded", body
    assert body["result"] is None, "the link was followed"
    assert CANARY not in json.dumps(body)
    assert "symbolic link" in body["message"], body["message"]


def test_a_result_over_the_limit_written_slowly_is_dropped(hostile_gateway: RunningServer) -> None:
    payload = {"do": "slow_result", "bytes": RESULT_LIMIT + 256 * 1024, "pause": 0.05}
    body, health = run_hostile(hostile_gateway, payload)
    health.check()
    assert body["state"] == "succeeded", body
    assert body["result"] is None
    assert f"over the {RESULT_LIMIT}-byte limit" in body["message"], body["message"]


def test_a_daemon_that_left_the_session_is_killed_with_its_job(hostile_gateway: RunningServer) -> None:
    pid_file = hostile_gateway.data_dir / f"daemon-{uuid.uuid4().hex}.pid"
    daemon: int | None = None
    try:
        body, health = run_hostile(hostile_gateway, {"do": "daemon", "pid_file": str(pid_file)})
        daemon, sid, pgid = (int(n) for n in pid_file.read_text().split())
        health.check()
        assert body["state"] == "succeeded", body
        started = json.loads((run_dir(hostile_gateway, body["id"]) / "started.json").read_text())
        assert sid == pgid != started["pid"], "the daemon left the job's session and group"
        deadline = time.monotonic() + 10
        while _alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(daemon), f"daemon {daemon} (setsid) outlived its job"
        print(f"tracked by {started.get('tracking')} ({started.get('cgroup')})")
        assert started["tracking"] in ("cgroup", "process tree")
        assert_cgroup_removed(started)
    finally:
        if daemon is not None and _alive(daemon):
            os.kill(daemon, signal.SIGKILL)


def test_a_job_that_closes_stdout_is_still_watched_and_stopped(hostile_gateway: RunningServer) -> None:
    began = time.monotonic()
    body, health = run_hostile(hostile_gateway, {"do": "close_stdout", "sleep": 120}, timeout_seconds=3)
    health.check()
    assert body["state"] == "timed_out", body
    assert time.monotonic() - began < 30
    pid = json.loads((run_dir(hostile_gateway, body["id"]) / "started.json").read_text())["pid"]
    assert not _alive(pid)


def test_a_job_that_logs_without_end_is_capped(hostile_gateway: RunningServer) -> None:
    body, health = run_hostile(hostile_gateway, {"do": "flood"}, timeout_seconds=3)
    health.check()
    assert body["state"] == "timed_out", body
    assert_cgroup_removed(json.loads((run_dir(hostile_gateway, body["id"]) / "started.json").read_text()))
    log = run_dir(hostile_gateway, body["id"]) / "log"
    size = log.stat().st_size
    assert size < LOG_CAP + 4096, f"the log grew to {size} bytes past its cap of {LOG_CAP}"
    with hostile_gateway.client(timeout=30) as client:
        text = client.get(f"/v1/invocations/{body['id']}/logs").text
    assert f"the log reached its cap of {LOG_CAP} bytes" in text
    assert "bytes of output were dropped" in text


def test_a_job_sees_none_of_the_gateways_secrets(hostile_gateway: RunningServer) -> None:
    body, health = run_hostile(hostile_gateway, {"do": "env"})
    health.check()
    assert body["state"] == "succeeded", body
    seen = body["result"]
    assert CANARY not in json.dumps(seen["env"]), "the job got the gateway's environment"
    assert CANARY not in seen["launch_json"], "launch.json holds the gateway's environment"
    assert "HOSTILE_TEST_SECRET" not in seen["env"]
    assert {k for k in seen["env"] if k.startswith("EOPS_")} <= {
        "EOPS_INVOCATION_ID",
        "EOPS_PAYLOAD_PATH",
        "EOPS_RESULT_PATH",
        "EOPS_CALLBACK_URL",
        "EOPS_CALLBACK_TOKEN",
        "EOPS_GPU_SLOT",
    }
    where = run_dir(hostile_gateway, body["id"])
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert stat.S_IMODE(where.parent.stat().st_mode) == 0o700
    for name in ("launch.json", "payload", "log", "exit.json", "started.json", "supervisor.log", "lock"):
        mode = stat.S_IMODE((where / name).stat().st_mode)
        assert mode == 0o600, f"{name} is {mode:o}"


def assert_cgroup_removed(started: dict[str, Any]) -> None:
    """The job's cgroup, if it had one, is gone with it (none left behind per invocation)."""
    if started.get("cgroup"):
        assert not Path(started["cgroup"]).exists(), f"{started['cgroup']} was left behind"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
