"""The per-job supervisor: `python -m elasticityops.backends.local.supervisor RUN_DIR [--lock-fd N]`.

The gateway starts one per invocation, in a session of its own, so the job outlives a gateway
that is killed (even with SIGKILL) and a new gateway can adopt it from its run directory. The
supervisor waits out the slot's cold-start delay, runs the command (never through a shell) in a
process group of its own, enforces the timeout, stops the group on cancel (SIGTERM, then SIGKILL
after the grace), and writes `exit.json` last. It holds the run dir's lock for its whole life:
that is how a gateway tells a live supervisor from a dead one.

Standard library only, for a fast start."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from elasticityops.backends.local import rundir

MODULE = "elasticityops.backends.local.supervisor"


class _Supervisor:
    def __init__(self, run_dir: Path, launch: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.launch = launch
        self.poll_s = float(launch.get("poll_interval_s", 0.05))
        self.grace_s = float(launch.get("kill_grace_s", 5.0))
        self.stop_requested = False

    def on_signal(self, signum: int, frame: object) -> None:
        # SIGTERM to the supervisor means the same as a cancel from the gateway.
        self.stop_requested = True

    def cancelled(self) -> bool:
        return self.stop_requested or (self.run_dir / rundir.CANCEL).exists()

    def finish(self, **fields: Any) -> None:
        record = {
            "exit_code": None,
            "signal": None,
            "timed_out": False,
            "cancelled": False,
            "launch_error": None,
            "lost": False,
            "at": time.time(),
        }
        record.update(fields)
        rundir.write_json_atomic(self.run_dir / rundir.EXIT, record)

    def run(self) -> None:
        delay = float(self.launch.get("provision_delay_s", 0.0))
        until = time.monotonic() + delay
        while time.monotonic() < until:
            if self.cancelled():
                self.finish(cancelled=True)
                return
            time.sleep(min(self.poll_s, max(0.0, until - time.monotonic())))
        rundir.write_json_atomic(self.run_dir / rundir.CAPACITY, {"at": time.time()})
        if self.cancelled():
            self.finish(cancelled=True)
            return
        with open(self.run_dir / rundir.LOG, "ab") as log:
            try:
                proc = subprocess.Popen(
                    self.launch["argv"],
                    env=self.launch["env"],
                    cwd=self.launch["cwd"],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    process_group=0,
                    close_fds=True,
                )
            except OSError as exc:
                self.finish(launch_error=_describe_launch_error(self.launch["argv"], exc))
                return
        rundir.write_json_atomic(self.run_dir / rundir.STARTED, {"pid": proc.pid, "at": time.time()})
        self.watch(proc)

    def watch(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + float(self.launch["timeout_s"])
        timed_out = cancelled = False
        while True:
            try:
                proc.wait(timeout=self.poll_s)
                break
            except subprocess.TimeoutExpired:
                pass
            if self.cancelled():
                cancelled = True
            elif time.monotonic() >= deadline:
                timed_out = True
            else:
                continue
            self.stop_group(proc)
            break
        # Whatever the job left behind in its group goes too: the slot must be free for the next.
        _signal_group(proc.pid, signal.SIGKILL)
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
        try:
            proc.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _describe_launch_error(argv: list[str], exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return (
            f"command not found: {argv[0]!r}; check `command` in the function spec "
            "(it is run without a shell)"
        )
    if isinstance(exc, PermissionError):
        return f"command not executable: {argv[0]!r}; make it executable or run it through an interpreter"
    return f"could not start {argv[0]!r}: {exc.strerror or exc}"


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
    if (run_dir / rundir.EXIT).exists():
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
    sys.exit(main(sys.argv[1:]))
