"""A job the gateway can no longer learn the end of: its supervisor is gone without an exit
record, or the watch of it broke. What is left of it is stopped and it is recorded `lost` (it
may have run, so it never runs again). Blocking (processes, files): callers on an event loop
run these in a thread. Neither raises for a file the disk refuses: the end is reported all the
same, and the job's slot goes back."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from pathlib import Path

from elasticityops.backends.local import rundir, safefile, tracking

log = logging.getLogger(__name__)

_TAIL_BYTES = 500  # of the supervisor's own output, quoted in the message


def record_lost(run_dir: Path) -> dict[str, object]:
    """The supervisor is gone without saying how the job ended: stop whatever is left of the
    job, and its exit record saying it was lost. The record is written (into the room set
    aside at launch) only so that a restarted gateway finds the run done; where even that
    fails, the message says so and the record is returned all the same."""
    _kill_leftovers(run_dir)
    tail = safefile.read_tail(run_dir / rundir.SUPERVISOR_LOG, _TAIL_BYTES)
    said = tail.decode("utf-8", errors="replace").strip()
    message = "the job's supervisor process died before recording how the job ended"
    record: dict[str, object] = {"lost": True, "message": message + (f": {said}" if said else "")}
    try:
        rundir.write_exit(run_dir, record)
    except OSError as exc:
        log.warning("could not record the lost job of %s: %s", run_dir, exc)
        unrecorded = f"its run directory could not record it ({exc.strerror or exc})"
        record["message"] = f"{record['message']}; {unrecorded}"
    return record


def stop_unwatched(run_dir: Path, proc: subprocess.Popen[bytes] | None) -> None:
    """The watch of a job broke (a bug): ask its supervisor to stop it as a cancel does (the
    cancel file; SIGTERM, which means the same, to a supervisor that is this process's own
    child), or stop what is left of it where no supervisor runs it any more."""
    safefile.touch(run_dir / rundir.CANCEL)
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
    elif proc is None and not rundir.supervisor_alive(run_dir):
        _kill_leftovers(run_dir)


def _kill_leftovers(run_dir: Path) -> None:
    started = rundir.read_json(run_dir / rundir.STARTED)
    if started is not None and isinstance(started.get("pid"), int):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(started["pid"], signal.SIGKILL)
    cgroup = tracking.job_cgroup((started or {}).get("cgroup"), tracking.PREFIX + run_dir.name)
    if cgroup is not None:
        tracking.kill_cgroup(cgroup)  # what left the group (a daemon) goes too
