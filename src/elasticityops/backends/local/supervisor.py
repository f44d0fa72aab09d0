"""The per-job supervisor: `python -m elasticityops.backends.local.supervisor RUN_DIR [--lock-fd N]`.

The gateway starts one per invocation, in a session of its own, so the job outlives a gateway
that is killed (even with SIGKILL) and a new gateway can adopt it from its run directory. The
supervisor waits out the slot's cold-start delay, runs the command (never through a shell) in a
process group of its own (and a cgroup of its own where the machine allows: tracking.py),
enforces the timeout (counted from the launch, the cold start included), stops the group on
cancel (SIGTERM, then SIGKILL after the grace), kills whatever the job left behind when it ends
(a daemon that left its group too), and writes `exit.json` last. The job's stdout and stderr
come through a pipe into the log, capped at `max_log_bytes`. It holds the run dir's lock for its
whole life: that is how a gateway tells a live supervisor from a dead one.

Standard library only, for a fast start."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from elasticityops.backends.local import rundir, safefile, tracking

MODULE = "elasticityops.backends.local.supervisor"


_READ = 64 * 1024
_PUMP_MAX = 4 * 1024 * 1024  # bytes moved per look, so the loop still looks at the clock
_DRAIN_S = 2.0  # after the job is stopped: how long what is left in the pipe is read


class _CappedLog:
    """The job's output, appended to the run dir's log up to `limit` bytes; the rest dropped,
    with a note when the cap is reached and one at the end saying how much.

    What the disk refuses (full, or failing) is counted as lost instead of stopping the
    supervisor: the job runs on, its output resumes behind a note of the gap once there is
    room again, and its exit record says how much is missing (`lost`, `error`)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd = fd
        self.limit = limit
        self.written = 0
        self.dropped = 0
        self.lost = 0  # bytes the disk refused
        self.gap = 0  # of those, lost since the last write that went through
        self.error = ""  # why the disk refused them

    def _append(self, data: bytes) -> int:
        """Write all of `data`; how many bytes of it the disk refused."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            self.error = exc.strerror or str(exc)
        return len(view)

    def _lose(self, count: int) -> None:
        self.lost += count
        self.gap += count

    def _put(self, data: bytes) -> None:
        if self.gap:
            if self._append(self._gap_note()):
                self._lose(len(data))  # still no room: the gap goes on
                return
            self.gap = 0
        self._lose(self._append(data))

    def _gap_note(self) -> bytes:
        return f"\n[eops: {self.gap} bytes of output were lost here: {self.error}]\n".encode()

    def _note(self, text: str) -> None:
        """A line of eops's own; one the disk refuses is left out (it is no output)."""
        self._append(text.encode())

    def write(self, data: bytes) -> None:
        room = self.limit - self.written
        if room > 0:
            self._put(data[:room])
            self.written += min(room, len(data))
        if len(data) > room:
            if self.dropped == 0:
                self._note(f"\n[eops: the log reached its cap of {self.limit} bytes; the rest is dropped]\n")
            self.dropped += len(data) - max(room, 0)

    def close(self) -> None:
        if self.gap:
            self._append(self._gap_note())
        if self.dropped:
            self._note(f"[eops: {self.dropped} bytes of output were dropped]\n")
        os.close(self.fd)


class _Supervisor:
    def __init__(self, run_dir: Path, launch: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.launch = launch
        self.poll_s = float(launch.get("poll_interval_s", 0.05))
        self.grace_s = float(launch.get("kill_grace_s", 5.0))
        self.stop_requested = False
        self.cgroup: Path | None = None
        self.pipe: int | None = None  # read end of the job's stdout and stderr; None at EOF
        self.log: _CappedLog | None = None
        self.log_lost = (0, "")  # bytes of output the disk refused, and why (from the closed log)
        self.unwritten: dict[str, dict[str, Any]] = {}  # records the disk refused: see milestone
        # timeout_seconds counts from the launch (the gateway wrote launched_at), so the wait for
        # the slot (its cold start) counts too, as a Kubernetes Job's activeDeadlineSeconds does.
        launched_at = launch.get("launched_at")
        waited = max(0.0, time.time() - float(launched_at)) if isinstance(launched_at, int | float) else 0.0
        self.deadline = time.monotonic() + float(launch.get("timeout_s", 0)) - waited

    def on_signal(self, signum: int, frame: object) -> None:
        # SIGTERM to the supervisor means the same as a cancel from the gateway.
        self.stop_requested = True

    def cancelled(self) -> bool:
        return self.stop_requested or safefile.exists(self.run_dir / rundir.CANCEL)

    def finish(self, **fields: Any) -> None:
        """The exit record, into the room the gateway set aside for it at launch (rundir.write_exit):
        a full disk cannot refuse it."""
        record: dict[str, Any] = {
            "exit_code": None,
            "signal": None,
            "timed_out": False,
            "cancelled": False,
            "launch_error": None,
            "lost": False,
            "at": time.time(),
        }
        lost, error = self.log_lost
        if lost:
            record.update(log_lost_bytes=lost, log_error=error)
        record.update(fields)
        rundir.write_exit(self.run_dir, record)

    def milestone(self, name: str, record: dict[str, Any]) -> None:
        """A record the gateway reads as news (capacity, start). One the disk refuses is tried
        again at each look (`write_unwritten`), in order, while the job goes on: news late
        beats a supervisor stopped by a full disk, which would leave its job unwatched."""
        self.unwritten[name] = record
        self.write_unwritten()

    def write_unwritten(self) -> None:
        for name, record in list(self.unwritten.items()):
            try:
                rundir.write_json_atomic(self.run_dir / name, record)
            except OSError:
                return
            del self.unwritten[name]

    def _ended_before_start(self) -> bool:
        """Cancelled or past its deadline while it waited for its (simulated) capacity: ended
        so, without starting."""
        if self.cancelled():
            self.finish(cancelled=True)
            return True
        if time.monotonic() >= self.deadline:
            self.finish(timed_out=True, started=False)
            return True
        return False

    def _capacity_ready(self) -> bool:
        """Wait out the slot's cold start; False when the job ended so, without starting."""
        delay = float(self.launch.get("provision_delay_s", 0.0))
        until = time.monotonic() + delay
        while time.monotonic() < until:
            if self._ended_before_start():
                return False
            time.sleep(min(self.poll_s, max(0.0, until - time.monotonic())))
        self.milestone(rundir.CAPACITY, {"at": time.time()})
        return not self._ended_before_start()

    def run(self) -> None:
        if not self._capacity_ready():
            return
        try:
            log_fd = safefile.open_append(self.run_dir / rundir.LOG)
        except OSError as exc:
            self.finish(launch_error=f"could not create the job's log: {exc.strerror or exc}")
            return
        if self.launch.get("cgroups", True):
            self.cgroup = tracking.make_cgroup(tracking.PREFIX + self.run_dir.name)
        cgroup = self.cgroup
        if cgroup is None:
            tracking.become_subreaper()  # the process tree, then: orphans come back here
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.Popen(
                self.launch["argv"],
                env=self.launch["env"],
                cwd=self.launch["cwd"],
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=write_end,
                process_group=0,
                close_fds=True,
                preexec_fn=(lambda: tracking.enter(cgroup)) if cgroup is not None else None,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            os.close(read_end)
            os.close(log_fd)
            if cgroup is not None:
                tracking.kill_cgroup(cgroup, reap=True)
            self.finish(launch_error=_describe_launch_error(self.launch["argv"], self.launch["cwd"], exc))
            return
        finally:
            os.close(write_end)
        if cgroup is not None and not tracking.holds(cgroup, proc.pid) and proc.poll() is None:
            # Alive and not in it: the move was refused (enter() never fails the start), so
            # the process tree it is.
            tracking.kill_cgroup(cgroup)  # empty; never reap here: the job is alive
            self.cgroup = None
            tracking.become_subreaper()
        os.set_blocking(read_end, False)
        self.pipe = read_end
        self.log = _CappedLog(log_fd, int(self.launch.get("max_log_bytes", 64 * 1024 * 1024)))
        self.milestone(
            rundir.STARTED,
            {
                "pid": proc.pid,
                "at": time.time(),
                "tracking": "cgroup" if self.cgroup is not None else "process tree",
                "cgroup": str(self.cgroup) if self.cgroup is not None else None,
            },
        )
        self.watch(proc)

    def pump(self, wait_s: float) -> None:
        """Move what the job wrote into the log, waiting up to `wait_s` for something."""
        if self.pipe is None:
            time.sleep(wait_s)
            return
        ready, _, _ = select.select([self.pipe], [], [], wait_s)
        if not ready:
            return
        moved = 0
        while moved < _PUMP_MAX:
            try:
                data = os.read(self.pipe, _READ)
            except BlockingIOError:
                return
            if not data:  # every writer closed it; the job may well run on (it closed stdout)
                os.close(self.pipe)
                self.pipe = None
                return
            assert self.log is not None
            self.log.write(data)
            moved += len(data)

    def wait_for(self, proc: subprocess.Popen[bytes], seconds: float) -> bool:
        """Pump the log until `proc` ends (True) or `seconds` pass (False)."""
        until = time.monotonic() + seconds
        while proc.poll() is None:
            left = until - time.monotonic()
            if left <= 0:
                return False
            self.pump(min(self.poll_s, left))
            tracking.reap_any(keep=proc.pid)
            self.write_unwritten()
        return True

    def watch(self, proc: subprocess.Popen[bytes]) -> None:
        timed_out = cancelled = False
        while not self.wait_for(proc, self.poll_s):
            if self.cancelled():
                cancelled = True
            elif time.monotonic() >= self.deadline:
                timed_out = True
            else:
                continue
            self.stop_group(proc)
            break
        # Whatever the job left behind goes too, in its group or not (a daemon that called
        # setsid): the slot must be free for the next job.
        self.kill_everything(proc)
        self.drain()
        code = proc.returncode
        sig = -code if code < 0 else None
        self.finish(
            exit_code=128 + sig if sig is not None else code,
            signal=signal.Signals(sig).name if sig is not None else None,
            timed_out=timed_out,
            cancelled=cancelled,
        )

    def stop_group(self, proc: subprocess.Popen[bytes]) -> None:
        _signal_group(proc.pid, signal.SIGTERM)
        if not self.wait_for(proc, self.grace_s):
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def kill_everything(self, proc: subprocess.Popen[bytes]) -> None:
        _signal_group(proc.pid, signal.SIGKILL)
        if self.cgroup is not None:
            tracking.kill_cgroup(self.cgroup, reap=True)  # every descendant is in it, whatever it did
        else:
            tracking.kill_tree(os.getpid())
        tracking.reap_any()

    def drain(self) -> None:
        """The rest of the output, once every writer is gone (bounded in time, in case one
        could not be stopped), then the log's closing note."""
        until = time.monotonic() + _DRAIN_S
        while self.pipe is not None and time.monotonic() < until:
            self.pump(min(self.poll_s, max(0.0, until - time.monotonic())))
        if self.pipe is not None:
            os.close(self.pipe)
            self.pipe = None
        if self.log is not None:
            self.log.close()
            self.log_lost = (self.log.lost, self.log.error)
            self.log = None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _describe_launch_error(argv: list[str], cwd: str, exc: OSError | subprocess.SubprocessError) -> str:
    if isinstance(exc, OSError) and not os.path.isdir(cwd):
        # Popen's error for a missing cwd reads like a missing program.
        return (
            f"workdir {cwd!r} is not a directory on the gateway's machine; create it, or deploy "
            "the function again with `workdir` (or from its spec file) where its files are now"
        )
    if isinstance(exc, FileNotFoundError):
        return (
            f"command not found: {argv[0]!r}; check `command` in the function spec "
            "(it is run without a shell)"
        )
    if isinstance(exc, PermissionError):
        return f"command not executable: {argv[0]!r}; make it executable or run it through an interpreter"
    if isinstance(exc, OSError):
        return f"could not start {argv[0]!r}: {exc.strerror or exc}"
    return f"could not start {argv[0]!r}: {exc}"


def main(args: list[str]) -> int:
    if not args:
        print(f"usage: python -m {MODULE} RUN_DIR [--lock-fd N]", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    if len(args) >= 3 and args[1] == "--lock-fd":
        lock_fd = int(args[2])  # inherited, already locked by the gateway
    else:
        acquired = rundir.acquire_lock(run_dir)
        if acquired is None:
            return 0  # another supervisor runs this job
        lock_fd = acquired
    if safefile.exists(run_dir / rundir.EXIT):
        return 0  # already done; never run a job twice
    launch = rundir.read_json(run_dir / rundir.LAUNCH)
    sup = _Supervisor(run_dir, launch or {})
    signal.signal(signal.SIGTERM, sup.on_signal)
    signal.signal(signal.SIGINT, sup.on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if launch is None:
        sup.finish(launch_error=f"{run_dir / rundir.LAUNCH} is missing or unreadable")
    else:
        sup.run()
    os.close(lock_fd)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is on disk (exit.json renamed into place, the lock let go): skip the
    # interpreter's teardown, the gateway is waiting for this process to end.
    os._exit(code)
