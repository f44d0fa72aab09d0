"""Builders and an event collector for the local backend tests."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from elasticityops.backends.local.supervisor import MODULE as SUPERVISOR_MODULE
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.functions import FunctionSpec, Priority
from elasticityops.domain.invocations import Invocation, State, Timeline, new_invocation_id
from elasticityops.domain.ports import LaunchRequest

RECORDER = str(Path(__file__).resolve().parents[2] / "jobs" / "recorder.py")


def spec(command: list[str] | None = None, **fields: Any) -> FunctionSpec:
    return FunctionSpec(name=fields.pop("name", "fn"), command=command or ["python", RECORDER], **fields)


def invocation(state: State = State.pending, priority: Priority = Priority.normal) -> Invocation:
    return Invocation(
        id=new_invocation_id(),
        function="fn",
        state=state,
        priority=priority,
        timeline=Timeline(accepted=datetime.now(UTC)),
    )


def request(
    fn: FunctionSpec, payload: dict[str, Any] | None = None, inv: Invocation | None = None
) -> LaunchRequest:
    return LaunchRequest(
        invocation=inv or invocation(),
        spec=fn,
        payload=json.dumps(payload or {}).encode(),
        callback_url="http://127.0.0.1:9/v1/invocations/x/result",
        callback_token="token-123",
    )


class Events:
    """Collects backend events; `finished(id)` waits for one invocation's end."""

    def __init__(self) -> None:
        self.items: list[BackendEvent] = []
        self._changed = asyncio.Event()

    async def __call__(self, event: BackendEvent) -> None:
        self.items.append(event)
        self._changed.set()

    def of(self, inv_id: str, part: str | None = None) -> list[BackendEvent]:
        """Its events; with `part` (note, capacity_ready, started, finished), those telling it."""
        return [e for e in self.items if e.invocation_id == inv_id and (part is None or part in e.parts)]

    def parts(self, inv_id: str) -> list[str]:
        """Everything told about it, in order."""
        return [part for e in self.of(inv_id) for part in e.parts]

    async def changed(self) -> None:
        """Wait for the next event."""
        self._changed.clear()
        await self._changed.wait()

    async def finished(self, inv_id: str, within_s: float = 60.0) -> Finished:
        async with asyncio.timeout(within_s):
            while True:
                done = self.of(inv_id, "finished")
                if done and done[0].finished is not None:
                    return done[0].finished
                self._changed.clear()
                await self._changed.wait()


class ShiftClock(SystemClock):
    """Real time that a test can move forward (for the slot idle timeout) without waiting."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def process_gone(pid: int) -> bool:
    """Gone, or a zombie (dead; only its exit status waits to be collected)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.05)
    return process_gone(pid)


def supervisor_of(run_dir: Path) -> psutil.Process:
    """The supervisor process of the job in `run_dir`."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if SUPERVISOR_MODULE in cmdline and str(run_dir) in cmdline:
            return proc
    raise AssertionError(f"no supervisor runs {run_dir}")


@contextlib.contextmanager
def reaped_supervisors(run_root: Path) -> Iterator[None]:
    """After the test, stop (by pid) whatever job or supervisor is left under `run_root`, so
    a failing test leaves no process behind."""
    try:
        yield
    finally:
        for started in run_root.glob("*/started.json"):
            pid = json.loads(started.read_text()).get("pid")
            if isinstance(pid, int) and not process_gone(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        for proc in psutil.process_iter(["pid", "cmdline"]):
            cmdline = proc.info.get("cmdline") or []
            if any(str(run_root) in part for part in cmdline) and proc.pid != os.getpid():
                with contextlib.suppress(psutil.Error):
                    proc.kill()


def assert_exclusive(
    starts: dict[str, dict[str, object]], ends: dict[str, dict[str, object]], n: int
) -> None:
    """No two jobs on one slot at once, never more than `n` jobs at once."""
    by_slot: dict[object, list[tuple[float, float]]] = {}
    for inv_id, start in starts.items():
        span = (float(start["t"]), float(ends[inv_id]["t"]))  # type: ignore[arg-type]
        by_slot.setdefault(start["slot"], []).append(span)
    assert set(by_slot) <= {str(i) for i in range(n)}
    for spans in by_slot.values():
        spans.sort()
        for (_, end), (next_start, _) in itertools.pairwise(spans):
            assert next_start >= end
    points = sorted(
        [(t0, 1) for spans in by_slot.values() for t0, _ in spans]
        + [(t1, -1) for spans in by_slot.values() for _, t1 in spans]
    )
    running = peak = 0
    for _, step in points:
        running += step
        peak = max(peak, running)
    assert peak <= n
