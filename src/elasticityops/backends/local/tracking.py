"""Finding every process a job started, so that all of them stop when it ends.

A job runs in a process group of its own, but a process may leave its group and session
(`setsid`, a double fork: what a daemon does), and a signal to the group then misses it. Two
ways to keep track, the first the machine allows:

- **cgroup** (Linux cgroup v2, writable: root, or a delegated subtree): the supervisor makes a
  cgroup `eops-<invocation id>` below its own and the job is started inside it; every
  descendant stays in it whatever it does with sessions and groups, and `cgroup.kill` (or a
  SIGKILL to each of `cgroup.procs`) stops them all at once.
- **process tree**: the supervisor is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a
  process that daemonizes is re-parented to the supervisor instead of init and is still found
  among its descendants (/proc/*/stat) and killed. A process whose supervisor has died (lost)
  is found by its process group only.

Standard library only: the supervisor imports this and must start fast."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from elasticityops.procfs import stat_fields

PREFIX = "eops-"
_PR_SET_CHILD_SUBREAPER = 36


def _cgroup2_mount() -> tuple[str, Path] | None:
    """(root inside the hierarchy, mount point) of a cgroup v2 mount, from /proc/self/mountinfo."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, sep, right = line.partition(" - ")
        if sep and right.split(" ", 1)[0] == "cgroup2":
            fields = left.split(" ")
            if len(fields) >= 5:
                return fields[3], Path(fields[4])
    return None


def _own_cgroup() -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return line[3:]
    return None


def make_cgroup(name: str) -> Path | None:
    """A new cgroup `name` below this process's own, or None when the machine does not allow
    one (no cgroup v2, not writable, a v1-only host)."""
    mount = _cgroup2_mount()
    own = _own_cgroup()
    if mount is None or own is None:
        return None
    root, mount_point = mount
    if own != root and not own.startswith(root.rstrip("/") + "/"):
        return None
    relative = own[len(root) :].strip("/")
    path = mount_point / relative / name if relative else mount_point / name
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    if not os.access(path / "cgroup.procs", os.W_OK):
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return None
    return path


def job_cgroup(recorded: object, name: str) -> Path | None:
    """The cgroup a run dir's started.json names, if it can be one the supervisor made: `name`,
    in a cgroup v2 mount, no link on the way. (The file is in the job's reach; a job could
    kill any process of its user anyway, but the gateway will not do it for one.)"""
    mount = _cgroup2_mount()
    if not isinstance(recorded, str) or mount is None:
        return None
    path = Path(recorded)
    inside = str(mount[1]).rstrip("/") + "/"
    if path.name != name or os.path.realpath(path) != recorded or not recorded.startswith(inside):
        return None
    return path


def enter(cgroup: Path) -> None:
    """Move the calling process into `cgroup` (in the child, before exec). Never raises: a job
    that could not be placed is still tracked by its process tree."""
    with contextlib.suppress(OSError):
        fd = os.open(cgroup / "cgroup.procs", os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


def holds(cgroup: Path, pid: int) -> bool:
    """Whether `pid` is in `cgroup` (its move at start may have been refused)."""
    return pid in cgroup_pids(cgroup)


def cgroup_pids(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _populated(cgroup: Path) -> bool:
    try:
        events = (cgroup / "cgroup.events").read_text()
    except OSError:
        return bool(cgroup_pids(cgroup))
    return "populated 1" in events


def kill_cgroup(cgroup: Path, wait_s: float = 5.0, *, reap: bool = False) -> None:
    """SIGKILL every process in `cgroup`, wait until it is empty, remove it. `reap`: collect
    ended children meanwhile (the supervisor, a subreaper; never the gateway, whose children
    are other jobs' supervisors with a Popen each)."""
    deadline = time.monotonic() + wait_s
    # Kernels before 5.14 have no cgroup.kill: then one by one, below, until none is left.
    with contextlib.suppress(OSError):
        (cgroup / "cgroup.kill").write_text("1")
    while True:
        for pid in cgroup_pids(cgroup):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if reap:
            reap_any()
        # cgroup.procs empties before the killed are all gone; rmdir waits for `populated 0`.
        if not _populated(cgroup):
            try:
                os.rmdir(cgroup)
                return
            except FileNotFoundError:
                return
            except OSError:
                pass  # EBUSY: a task still on its way out
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)


def become_subreaper() -> bool:
    """Make orphaned descendants come back to this process (Linux); False when it cannot."""
    import ctypes  # here, not at the top: only a job's start needs it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, from /proc (children before grandchildren)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = stat_fields(entry)
        if fields is not None and len(fields) > 1 and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int, rounds: int = 50) -> None:
    """SIGKILL every descendant of `pid` (not `pid` itself) until none is left."""
    for _ in range(rounds):
        found = descendants(pid)
        if not found:
            return
        for child in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        reap_any()
        time.sleep(0.01)


def reap_any(keep: int | None = None) -> None:
    """Collect the exit status of every ended child but `keep` (whose status its Popen wants):
    a subreaper inherits orphans, and each must be collected or it stays a zombie."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == keep:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)
