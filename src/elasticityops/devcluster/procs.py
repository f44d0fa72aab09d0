"""Start processes detached, record them by PID, stop them by PID (SIGTERM, then SIGKILL).

A record carries the process's start time as well as its PID, so a PID the kernel has
reused for an unrelated process is never signalled. The start time that counts is the
kernel's own, in clock ticks since boot (/proc/PID/stat): the wall-clock create time that
psutil derives from it moves whenever the machine's clock is stepped (a VM restored from a
snapshot, NTP), and a CLI started after such a step took a running cluster for a dead one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from elasticityops.procfs import stat_fields


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    create_time: float
    log: str
    argv: tuple[str, ...]
    # None in records written before the ticks were kept: create_time decides then.
    start_ticks: int | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            create_time=float(data["create_time"]),
            log=str(data["log"]),
            argv=tuple(str(a) for a in data["argv"]),
            start_ticks=None if data.get("start_ticks") is None else int(data["start_ticks"]),
        )


def start_ticks(pid: int) -> int | None:
    """The process's start in clock ticks after boot (field 22 of /proc/PID/stat), which no
    change of the wall clock moves; None where /proc does not say (not Linux, or gone)."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_PICKED_SPAN = 12_000  # how many ports below the kernel's own range a pick is drawn from


def _below_ephemeral() -> range | None:
    """The ports just below the kernel's ephemeral range, or None where it cannot be read or
    leaves too little room under it."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    start = max(1024, low - _PICKED_SPAN)
    return range(start, low) if low - start >= 1000 else None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port free on 127.0.0.1 right now, for a server started next, picked at random below the
    kernel's ephemeral range. The kernel hands out ports of that range itself (to every `bind` to
    port 0, and as the local end of every outgoing connection), so a port it chose could be
    taken by another process in the moment before our server binds it; with test lanes side by
    side, one was. Below the range only another such pick can take it, one in thousands."""
    span = _below_ephemeral()
    if span is not None:
        for _ in range(100):
            port = secrets.choice(span)
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> ProcessRecord:
    """Start `argv` in its own session (it outlives the CLI that started it), output to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
    try:
        created = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        created = 0.0
    ticks = start_ticks(proc.pid)
    # The Popen object is dropped on purpose: the child is tracked by PID from here on, and
    # reaped by whoever stops it (or by init once this process exits).
    return ProcessRecord(
        name=name, pid=proc.pid, create_time=created, log=str(log), argv=tuple(argv), start_ticks=ticks
    )


def _process(rec: ProcessRecord) -> psutil.Process | None:
    try:
        proc = psutil.Process(rec.pid)
        ticks = start_ticks(rec.pid) if rec.start_ticks is not None else None
        if ticks is not None:
            if ticks != rec.start_ticks:
                return None  # the PID was reused by another process
        elif abs(proc.create_time() - rec.create_time) > 1.0:
            return None  # the PID was reused by another process
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.NoSuchProcess:
        return None


def is_alive(rec: ProcessRecord) -> bool:
    return _process(rec) is not None


def _reap(pid: int) -> None:
    # Our own children become zombies until waited for; others are reaped by their parent.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(rec: ProcessRecord, timeout: float = 10.0) -> None:
    """SIGTERM the recorded process, SIGKILL it if it is still there after `timeout` seconds."""
    proc = _process(rec)
    if proc is None:
        _reap(rec.pid)
        return
    try:
        proc.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(rec.pid)
        if _process(rec) is None:
            return
        time.sleep(0.1)
    try:
        proc.send_signal(signal.SIGKILL)
    except psutil.NoSuchProcess:
        return
    for _ in range(50):
        _reap(rec.pid)
        if _process(rec) is None:
            return
        time.sleep(0.1)
