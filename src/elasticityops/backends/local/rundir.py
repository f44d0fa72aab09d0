"""One directory per invocation: the only state a job's supervisor and the gateway share, so a
new gateway can pick up where a killed one left off.

Standard library only: the supervisor imports this and must start fast.

    launch.json     what to run (argv, env, cwd, timeout, slots), written before the supervisor starts
    payload         the request body (EOPS_PAYLOAD_PATH)
    result          what the job hands back (EOPS_RESULT_PATH), optional
    log             the job's stdout and stderr (capped by the supervisor at max_log_bytes)
    lock            flock-ed by the supervisor for its whole life: held <=> a supervisor is alive
    cancel          present: the gateway asked to cancel
    capacity.json   the slot is provisioned (after the cold-start delay)
    started.json    the job's pid (= its process group) and start time
    exit.json       how it ended; written once, atomically, last
    .exit.json.room the room exit.json takes, set aside at launch: a disk that fills up while
                    the job runs (its own output, anything else) cannot refuse how it ended

Creating the directory (mkdir, which fails if it exists) is the launch's idempotency marker.
The job may change anything here (it runs as the same user): every read goes through safefile,
and exit.json is believed only once its supervisor is gone. Mode 0700, files 0600."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from enum import Enum
from pathlib import Path
from typing import Any

from elasticityops.backends.local import safefile

LAUNCH = "launch.json"
PAYLOAD = "payload"
RESULT = "result"
LOG = "log"
LOCK = "lock"
CANCEL = "cancel"
CAPACITY = "capacity.json"
STARTED = "started.json"
EXIT = "exit.json"
SUPERVISOR_LOG = "supervisor.log"
EXIT_ROOM = ".exit.json.room"
EXIT_ROOM_BYTES = 16 * 1024  # an exit record is a few hundred bytes; a longer one is written anew
ATTEMPT_SEPARATOR = "."  # ids are "inv-" and base32: never a "."


def run_key(invocation_id: str, attempt: int) -> str:
    """The run directory's name for one attempt of an invocation: the id for the first (as
    before attempts existed, so older run dirs are still found), `<id>.<attempt>` after a
    preemption, so the new attempt never meets the old one's files or lock."""
    return invocation_id if attempt == 0 else f"{invocation_id}{ATTEMPT_SEPARATOR}{attempt}"


def parse_run_key(key: str) -> tuple[str, int]:
    """(invocation id, attempt) of a run_key."""
    head, sep, number = key.rpartition(ATTEMPT_SEPARATOR)
    if sep and number.isascii() and number.isdigit():
        return head, int(number)
    return key, 0


# The largest record (launch.json, exit.json, ...) read back; launch.json carries the job's
# environment, which the spec's limits keep far below this.
MAX_RECORD_BYTES = 4 * 1024 * 1024


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary name, then rename: a reader sees all of it or nothing.

    No fsync: what this guards against is a process dying (the page cache survives that); a
    machine crash takes the running jobs with it anyway, and the store keeps the invocations."""
    write_bytes_atomic(path, json.dumps(data).encode())


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Mode 0600; never through a link the job left at the temporary name (see safefile)."""
    safefile.write_atomic(path, data)


def reserve_exit_room(run_dir: Path) -> None:
    """Set aside the room of the run's exit record while there is room (at launch, before the
    job runs): see write_exit."""
    safefile.write_atomic(run_dir / EXIT_ROOM, bytes(EXIT_ROOM_BYTES))


def write_exit(run_dir: Path, record: dict[str, Any]) -> None:
    """exit.json, atomically: into the room set aside at launch where there is one (so a full
    disk cannot refuse it), else as a file of its own (a run dir from before rooms were set
    aside, a record too long for its room, a room the job took away)."""
    data = json.dumps(record).encode()
    if not safefile.write_into_room(run_dir / EXIT_ROOM, run_dir / EXIT, data):
        write_bytes_atomic(run_dir / EXIT, data)


def read_json(path: Path) -> dict[str, Any] | None:
    """The file's object, or None when it is absent, not a regular file (a link, a FIFO: see
    safefile), over MAX_RECORD_BYTES or (never expected) torn."""
    return safefile.read_json(path, MAX_RECORD_BYTES)


def acquire_lock(run_dir: Path) -> int | None:
    """Open and flock the run dir's lock file without blocking. Returns the fd (the lock lives as
    long as any process holds a copy of it), or None when someone else holds it."""
    flags = os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(run_dir / LOCK, flags, safefile.FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def supervisor_alive(run_dir: Path) -> bool:
    """True while a supervisor holds the run dir's lock (a dead process holds no lock, so pid
    reuse cannot fool this)."""
    if not (run_dir / LOCK).exists():
        return False
    try:
        fd = acquire_lock(run_dir)
    except OSError:
        return True  # the job replaced the lock with a link or worse: never read as dead
    if fd is None:
        return True
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    return False


class RunState(Enum):
    absent = "absent"  # never launched here
    unstarted = "unstarted"  # a launch died before its supervisor ran the command: safe to redo
    alive = "alive"  # a supervisor holds the lock
    orphaned = "orphaned"  # the command started but its supervisor is gone without an exit record
    done = "done"  # exit.json is written


def classify(run_dir: Path) -> RunState:
    """What a run directory says about its job. The lock is looked at before exit.json, so a
    supervisor that finishes in between is seen as done, never as orphaned. Blocking (files):
    callers on an event loop run it in a thread."""
    if not run_dir.is_dir():
        return RunState.absent
    if supervisor_alive(run_dir):
        # Alive first: an exit.json is only the supervisor's once it is gone (the job, the
        # same user, could write one itself).
        return RunState.alive
    if (run_dir / EXIT).exists():
        return RunState.done
    if (run_dir / STARTED).exists():
        return RunState.orphaned
    return RunState.unstarted
